"""Records as an open reads them: only the fields the fold needs, decoded in one go.

`Store.read` gives each record as a dict of everything in it; opening a long
conversation builds tens of thousands of them only to drop most of their
parts again (a turn's lease owner, its record's format number and kind, a
reply's count), and freeing them costs about as much as making them. A
**row** is a record decoded into a small msgspec Struct (one type per kind,
tagged by ``kind``) holding only the fields the fold reads; the decoder
skips the rest (still checking it as JSON). `History.apply_all` applies a sound
``turn``, plain ``reply`` or ``end`` row as it is; any other row is read
again from its line as the whole dict and checked field by field. A file
with a kind rows do not know (a newer writer's) is read as dicts.
tests/test_opening_rows.py opens conversations both ways (sound, damaged,
torn, hand-edited, written by older versions) and compares every field of
every turn, the damage named, and what the views return.

Nothing is read lazily from the file: a row holds what was read, so another
process appending to (or cutting) the file later changes nothing already
folded; the store notices on its next read as it always did.

msgspec is imported when the first row is decoded, not with this module.
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["decode_lines", "row_reader"]

#: The row types by kind, made with msgspec on first use (empty until then).
ROWS: dict[str, type] = {}
_decode_lines: Callable[[Any], list[Any]] | None = None
#: What an unset or empty ``changes`` or ``sections`` (``EMPTY_LIST``), or ``without``
#: (``EMPTY_DICT``), is in a row (set with `ROWS`).
EMPTY_LIST: Any = None
EMPTY_DICT: Any = None

#: The fields of each kind's row the fold reads, decoded (None when absent); a record of any other
#: known kind is a row with none (the fold reads it again whole). What a turn ran with is kept as
#: raw JSON (read by a resume only), and so is a reply (read again only when its turn resumes,
#: see `TurnData.replies`), and so are ``changes``, ``without`` and
#: ``sections`` (only ever compared with the empty value here; decoded, each empty list would be
#: one more object per turn for the collector to walk). A turn's lease (its owner, ``t`` and
#: ``ttl``) is not in the row: only a turn still running when the fold ends keeps one, and that
#: one is read from the whole record (see `History.apply_all`).
_KINDS: dict[str, tuple[str, ...]] = {
    "turn": ("turn", "parent", "inputs", "shown", "context", "changes", "without", "sections", "at", "call",
             "claim", "fork", "ran_with"),
    "reply": ("turn", "reply"),
    "end": ("turn", "state", "outputs", "error"),
    **{kind: () for kind in ("conversation", "entry", "tool", "wait", "answer", "late_answer", "resume", "lease",
                                   "interrupt")},
}
_RAW = frozenset({"ran_with", "reply", "changes", "without", "sections"})
_UNSET: Any = None

_STRING = rb'"(?:[^"\\]++|\\.)*+"'
_SCALAR = rb'(?:-?[0-9][0-9.eE+-]*+|null|true|false|"[^"\\]*+")'
_FLAT = rb'\{(?:"[^"\\]*+":' + _SCALAR + rb'(?:,"[^"\\]*+":' + _SCALAR + rb')*+)?\}'
#: A plain final answer as this version writes it: text (or null), no tool calls, a flat usage
#: object, a finish reason (or null), nothing else. In JSON already checked as JSON (by the
#: decode of the row) this says exactly that the reply is sound (`checks.QUICK`); any other reply is
#: decoded and checked field by field.
PLAIN_REPLY = re.compile(rb'\{"text":(?:' + _STRING + rb'|null),"tool_calls":\[\],"usage":' + _FLAT
                          + rb',"finish_reason":(?:"[^"\\]*+"|null)\}')


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
    _decode_lines = msgspec.json.Decoder(Union[tuple(ROWS.values())]).decode_lines  # type: ignore[misc]
    return _decode_lines


def decode_lines(data: bytes | str) -> list[Any]:
    """Every line of a JSON-lines buffer as a row; ``ValueError`` when any value is not a JSON
    object of a known kind (or not JSON), for the caller to decode as dicts instead."""
    return (_decode_lines or _load())(data)


_readers: dict[type, bool] = {}


def row_reader(store: Any) -> Callable[[str, int], tuple[list[Any], Callable[[int], dict[str, Any]]]] | None:
    """The store's ``read_rows``, when it reads what its ``read`` reads: a subclass that
    overrides ``read`` (to filter or count records, say) and not ``read_rows`` is read by ``read``."""
    own = getattr(store, "__dict__", None)
    if own and ("read" in own or "read_rows" in own):  # set on the object itself (a wrapper, a test's spy)
        return store.read_rows if "read" in own and "read_rows" in own else None
    cls = type(store)
    known = _readers.get(cls)
    if known is None:
        def owner(name: str) -> type | None:
            return next((c for c in cls.__mro__ if name in c.__dict__), None)

        known = _readers[cls] = owner("read_rows") is not None and owner("read_rows") is owner("read")
    return store.read_rows if known else None
