"""Records as an open reads them: only the fields the fold needs, decoded in one go.

A **row** is a record decoded into a small msgspec Struct (one type per kind,
tagged by ``kind``) holding only what the fold reads: a long conversation's open
then builds no dict per record. `History.apply_all` takes a sound ``turn``,
plain ``reply`` or ``end`` row as it is and reads any other record again whole;
a file with a kind rows do not know is read as dicts. tests/test_opening_rows.py
holds the golden cases. msgspec is imported with the first row decoded.
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["decode_lines", "row_reader"]

#: The row types by kind, made with msgspec on first use (empty until then).
ROWS: dict[str, type] = {}
_decode_lines: Callable[[Any], list[Any]] | None = None
#: An unset or empty list (``changes``, ``sections``) or dict (``without``) in a row.
EMPTY_LIST: Any = None
EMPTY_DICT: Any = None

#: The fields of each kind's row (None when absent); another known kind's row has none and is
#: read again whole. `_RAW` fields stay undecoded JSON: read later or only compared with empty.
#: A turn's lease is not in its row: the fold reads it whole for a turn still running.
_KINDS: dict[str, tuple[str, ...]] = {
    "turn": ("turn", "parent", "inputs", "shown", "context", "changes", "without", "sections", "at", "call",
             "claim", "fork", "ran_with", "key"),
    "reply": ("turn", "reply", "n"),
    "end": ("turn", "state", "outputs", "error"),
    **{kind: () for kind in ("conversation", "entry", "tool", "wait", "answer", "late_answer", "resume", "lease",
                                   "interrupt")},
}
_RAW = frozenset({"ran_with", "reply", "changes", "without", "sections"})
_UNSET: Any = None

# Each written so that no part can match a text in two ways (a string unrolled: runs of plain
# characters, then an escape and a run), so a text that almost matches fails at once, as Python
# 3.10's regular expressions have no possessive quantifiers to say so.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_NUMBER = rb'-?[0-9][0-9.eE+-]*'
_COUNTS = rb'\{(?:"[^"\\]*":' + _NUMBER + rb'(?:,"[^"\\]*":' + _NUMBER + rb')*)?\}'
#: A plain final answer as this version writes it (text, no tool calls, token counts, a finish
#: reason): in JSON the row decode already checked, a match means the reply is sound.
PLAIN_REPLY = re.compile(rb'\{"text":(?:' + _STRING + rb'|null),"tool_calls":\[\],"usage":' + _COUNTS
                          + rb',"finish_reason":(?:"[^"\\]*"|null)\}')


def _load() -> Callable[[Any], list[Any]]:
    global _decode_lines, _UNSET, EMPTY_LIST, EMPTY_DICT
    from typing import Union

    import msgspec

    _UNSET = msgspec.UNSET
    EMPTY_LIST, EMPTY_DICT = (_UNSET, msgspec.Raw(b"[]")), (_UNSET, msgspec.Raw(b"{}"))
    # Tagged by ``kind``; no cycles go through a row, so the collector never needs to see one.
    base = msgspec.defstruct("Row", [("functai_conversation", Any, None)], tag_field="kind", gc=False)
    for kind, names in _KINDS.items():
        fields = [(name, msgspec.Raw, _UNSET) if name in _RAW else (name, Any, None) for name in names]
        ROWS[kind] = msgspec.defstruct(f"{kind.title()}Row", fields, bases=(base,), tag=kind, gc=False)
    _decode_lines = msgspec.json.Decoder(Union[tuple(ROWS.values())]).decode_lines
    return _decode_lines


def decode_lines(data: bytes | memoryview | str) -> list[Any]:
    """Every line of a JSON-lines buffer as a row; ``ValueError`` when any is not an object of a known
    kind, or is nested deeper than the decoder reads (the caller then reads line by line)."""
    try:
        return (_decode_lines or _load())(data)
    except RecursionError:
        raise ValueError("a line is nested deeper than the decoder reads") from None


def row_reader(store: Any) -> Callable[[str, int], tuple[list[Any], Callable[[int], dict[str, Any]]]] | None:
    """The store's ``read_rows`` when it reads what its ``read`` does (a subclass or wrapper
    overriding only ``read`` is read by ``read``)."""
    own = getattr(store, "__dict__", None) or {}
    reads_rows: bool | None
    if "read" in own or "read_rows" in own:
        reads_rows = "read_rows" in own and "read" in own
    else:
        kind = type(store)
        reads_rows = _CLASS_READS_ROWS.get(kind)
        if reads_rows is None:
            found = _owner(kind, "read_rows")
            reads_rows = _CLASS_READS_ROWS[kind] = found is not None and found is _owner(kind, "read")
    return store.read_rows if reads_rows else None


#: Per store class, whether it reads rows by the class that gives its ``read`` (`row_reader`; asked at every refresh).
_CLASS_READS_ROWS: dict[type, bool] = {}


def _owner(kind: type, name: str) -> type | None:
    return next((c for c in kind.__mro__ if name in c.__dict__), None)
