"""Records as an open reads them: only the fields the fold needs, decoded in one go.

`Store.read` gives each record as a dict of everything in it; opening a long
conversation builds tens of thousands of them only to drop most of their
parts again (a turn's lease owner, its record's format number and kind, a
reply's count), and freeing them costs about as much as making them. A
**row** is a record decoded into a small msgspec Struct (one type per kind,
tagged by ``kind``) holding only the fields the fold reads; the decoder
skips the rest (still checking it as JSON). The fold takes a sound row as
`History`'s quick path takes the record's dict and builds the same turn; a
row it does not take (another kind, a damaged or unusual shape) is read
again from its line as the whole dict and applied field by field, as
before. A file with a kind rows do not know (a newer writer's) is read as
dicts. A turn made from a row gets at once only what the fold and a branch
walk read (id, parent, state, order, fork, outputs ...); the rest (`LAZY`:
inputs, what it was shown, when it started ...) is filled in from its row
when first asked for, under a lock, and before any later record changes it.
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
import threading
from typing import Any, Callable, Mapping

from .checks import END_STATES
from .history import DONE, FORMAT, NOTHING, RUNNING, History, TurnData, _lease

__all__ = ["decode_lines", "fold", "row_reader"]

#: The row types by kind, made with msgspec on first use (empty until then).
ROWS: dict[str, type] = {}
_decode_lines: Callable[[Any], list[Any]] | None = None
_UNSET: Any = None
_NO_LIST: Any = None
_NO_DICT: Any = None

#: The fields of each kind's row the fold reads, decoded (None when absent); a record of any other
#: known kind is a row with none (the fold reads it again whole). What a turn ran with is kept as
#: raw JSON (the same for most turns: decoded once per text, see `_ran_with`), and so is a reply
#: (read again only when its turn resumes, see `_reply`), and so are ``changes``, ``without`` and
#: ``sections`` (only ever compared with the empty value here; decoded, each empty list would be
#: one more object per turn for the collector to walk). A turn's lease (its owner, ``t`` and
#: ``ttl``) is not in the row: only a turn still running when the fold ends keeps one, and that
#: one is read from the whole record (see `fold`).
_KINDS: dict[str, tuple[str, ...]] = {
    "turn": ("turn", "parent", "inputs", "shown", "context", "changes", "without", "sections", "at", "call",
             "claim", "fork", "ran_with"),
    "reply": ("turn", "reply"),
    "end": ("turn", "state", "outputs", "error"),
    **{kind: () for kind in ("conversation", "entry", "tool", "wait", "answer", "late_answer", "resume", "lease",
                                   "interrupt")},
}
_RAW = frozenset({"ran_with", "reply", "changes", "without", "sections"})

_STRING = rb'"(?:[^"\\]++|\\.)*+"'
_SCALAR = rb'(?:-?[0-9][0-9.eE+-]*+|null|true|false|"[^"\\]*+")'
_FLAT = rb'\{(?:"[^"\\]*+":' + _SCALAR + rb'(?:,"[^"\\]*+":' + _SCALAR + rb')*+)?\}'
#: A plain final answer as this version writes it: text (or null), no tool calls, a flat usage
#: object, a finish reason (or null), nothing else. In JSON already checked as JSON (by the
#: decode of the row) this says exactly that `History._quick_reply` takes it; any other reply is
#: decoded and checked as the dict path checks it.
_PLAIN_REPLY = re.compile(rb'\{"text":(?:' + _STRING + rb'|null),"tool_calls":\[\],"usage":' + _FLAT
                          + rb',"finish_reason":(?:"[^"\\]*+"|null)\}')


def _load() -> Callable[[Any], list[Any]]:
    global _decode_lines, _UNSET, _NO_LIST, _NO_DICT
    from typing import Union

    import msgspec

    _UNSET, _NO_LIST, _NO_DICT = msgspec.UNSET, msgspec.Raw(b"[]"), msgspec.Raw(b"{}")
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


def fold(history: History, items: list[Any], full: Callable[[int], dict[str, Any]]) -> None:
    """Apply what `read_rows` gave, each at its place: a sound ``turn``, plain ``reply`` or
    ``end`` row at once (`History`'s quick path, written out here for rows: an open runs it per
    record), anything else as its whole record (``full(position)``) through `History.apply`."""
    if not ROWS:
        _load()
    turn_row, reply_row, end_row = ROWS["turn"], ROWS["reply"], ROWS["end"]
    turns, order, running = history.turns, history.order, history.running
    plain, unset, no_list, no_dict, new = _PLAIN_REPLY.fullmatch, _UNSET, _NO_LIST, _NO_DICT, TurnData.__new__
    start = history.count
    #: Turns not ended yet: their record's position by id. Their leases are read from their whole
    #: records before anything else may look at them (a record taken whole; the end).
    pending: dict[str, int] = {}
    for position, item in enumerate(items):
        kind = type(item)
        if kind is turn_row:
            turn_id, parent_id, inputs, shown, context = item.turn, item.parent, item.inputs, item.shown, item.context
            if (item.functai_conversation == FORMAT and type(turn_id) is str and turn_id and turn_id not in turns
                    and (inputs is None or type(inputs) is dict) and (context is None or type(context) is dict)
                    and type(shown) is dict and len(shown) == 1 and type(shown.get("last")) is int
                    and shown["last"] >= 0 and item.changes in (unset, no_list) and item.sections in (unset, no_list)
                    and item.without in (unset, no_dict)
                    and (parent_id is None or (type(parent_id) is str and parent_id in turns))):
                # What TurnData(record) makes of such a record: the fields the fold and branch
                # walks read now, the others (`LAZY`) from the row when first asked for (`fill`).
                turn = new(TurnData)
                turn.id, turn.parent, turn.state, turn.order = turn_id, parent_id, RUNNING, len(order)
                turn.outputs, turn._replies, turn.error, turn.messages = NOTHING, (), None, None
                turn.lease, turn._row = None, item  # the lease: see pending
                fork = turn.fork = bool(item.fork)
                if parent_id is None:
                    turn.base, turn.forked = 0, fork
                else:
                    parent = turns[parent_id]
                    turn.base, turn.forked = parent.base + (parent.state == DONE), fork or parent.forked
                turns[turn_id] = turn
                order.append(turn_id)
                running.add(turn_id)
                pending[turn_id] = position
                continue
        elif kind is reply_row:
            turn_id, raw = item.turn, item.reply
            if (item.functai_conversation == FORMAT and type(turn_id) is str and raw is not unset and plain(raw)
                    and (turn := turns.get(turn_id)) is not None):
                turn._replies = (*turn._replies, raw)  # its JSON, decoded when asked for (`TurnData.replies`)
                continue
        elif kind is end_row:
            turn_id, state, outputs, error = item.turn, item.state, item.outputs, item.error
            if (item.functai_conversation == FORMAT and type(turn_id) is str and type(state) is str
                    and state in END_STATES and (outputs is None or type(outputs) is dict)
                    and (error is None or type(error) is dict)
                    and (turn := turns.get(turn_id)) is not None and turn.state != DONE):
                turn.state = state  # History._end
                running.discard(turn_id)
                turn.lease, turn.outputs, turn.error, turn.messages = None, outputs or NOTHING, error, None
                pending.pop(turn_id, None)  # an ended turn keeps no lease
                continue
        if kind is not dict:  # a row not taken above: the whole record, checked field by field
            item = full(position)
        if pending:
            _settle(turns, pending, full)
        history.count = start + position
        history.apply(item)
    if pending:
        _settle(turns, pending, full)
    history.count = start + len(items)


#: Held while a row-made turn is filled in, so a reader filling it never undoes what a fold
#: (which fills it first, under this lock too) then changes.
_filling = threading.Lock()


def fill(turn: TurnData) -> None:
    """Set the fields an open left unset on a turn made from a row (see `LAZY`), as
    ``TurnData(record)`` sets them for a record the quick path takes."""
    with _filling:
        row = turn._row
        if row is None:
            return
        turn.inputs, turn.changes, turn.context, turn.shown = row.inputs or NOTHING, (), row.context, row.shown
        turn.without, turn.sections, turn.approvals, turn.answers = NOTHING, (), (), NOTHING
        turn.tools, turn.at, turn.resumes, turn.waited_with = NOTHING, row.at, 0, NOTHING
        turn.claim, turn.why, turn.call, turn.waits, turn.lost_parent = row.claim, None, row.call, (), None
        turn.ran_with = NOTHING if row.ran_with is _UNSET else _ran_with(bytes(row.ran_with))
        turn._row = None


def _settle(turns: dict[str, TurnData], pending: dict[str, int], full: Callable[[int], dict[str, Any]]) -> None:
    for turn_id, position in pending.items():
        turns[turn_id].lease = _lease(full(position))
    pending.clear()


#: What turns ran with, by its JSON text: one read-only value shared by the turns that ran
#: with the same (`TurnData` never changes one in place).
_ran_withs: dict[bytes, Mapping[str, Any]] = {}


def _ran_with(text: bytes) -> Mapping[str, Any]:
    found = _ran_withs.get(text)
    if found is None:
        from .. import codec

        value = codec.loads(text)
        found = value if type(value) is dict else NOTHING
        if len(_ran_withs) >= 256:
            _ran_withs.clear()
        _ran_withs[text] = found
    return found
