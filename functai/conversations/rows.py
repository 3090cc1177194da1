"""Records as an open reads them: only the fields the fold needs, decoded in one go.

`Store.read` gives each record as a dict of everything in it; opening a long
conversation builds tens of thousands of them only to drop most of their
parts again (a turn's lease owner, its record's format number and kind, a
reply's count), and freeing them costs about as much as making them. A
**row** is a record decoded into a small msgspec Struct that holds only the
fields the fold reads, the rest skipped by the decoder (still checked as
JSON); the lease owner, needed only for a turn still running when the fold
ends, is kept as its raw JSON until then. The fold takes a row exactly as
it takes the record's dict: the quick path of `History` written for rows,
and any row it does not take (another kind, a damaged shape) read again
from its line as the whole dict and applied field by field as before — a
test folds conversations both ways and compares every field of every turn.

msgspec is imported when the first row is decoded, not with this module.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from .bulk import BULK_RECORDS, paused_gc
from .checks import END_STATES, sound_reply
from .history import DONE, FORMAT, NOTHING, RUNNING, History, TurnData, _lease

__all__ = ["decode_lines", "fold", "row_reader"]

#: The row types by kind, made with msgspec on first use (empty until then).
ROWS: dict[str, type] = {}
_decode_lines: Callable[[Any], list[Any]] | None = None
_UNSET: Any = None

#: The fields of each kind's row the fold reads, decoded (None when absent); a record of any other
#: known kind is a row with none (the fold reads it again whole). What a turn ran with is kept as
#: raw JSON (the same for most turns: decoded once per text, see `_ran_with`), and so is a reply
#: (read again only when its turn resumes, see `_reply`). A turn's lease (its owner, ``t`` and
#: ``ttl``) is not in the row: only a turn still running when the fold ends keeps one, and that
#: one is read from the whole record (see `fold`).
_KINDS: dict[str, tuple[str, ...]] = {
    "turn": ("turn", "parent", "inputs", "shown", "context", "changes", "without", "sections", "at", "call",
             "claim", "fork", "ran_with"),
    "reply": ("turn", "reply"),
    "end": ("turn", "state", "outputs", "error"),
    **{kind: () for kind in ("conversation", "entry", "tool", "wait", "answer", "resume", "lease", "interrupt")},
}
_RAW = frozenset({"ran_with", "reply"})

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
    global _decode_lines, _UNSET
    from typing import Union

    import msgspec

    _UNSET = msgspec.UNSET
    # Tagged by ``kind``; no cycles go through a row, so the collector never needs to see one.
    base = msgspec.defstruct("Row", [("functai_conversation", Any, None)], tag_field="kind", gc=False)
    for kind, names in _KINDS.items():
        fields = [(name, msgspec.Raw, _UNSET) if name in _RAW else (name, Any, None) for name in names]
        ROWS[kind] = msgspec.defstruct(f"{kind.title()}Row", fields, bases=(base,), tag=kind, gc=False)
    _decode_lines = msgspec.json.Decoder(Union[tuple(ROWS.values())]).decode_lines  # type: ignore[misc]
    _QUICK.update({ROWS["turn"]: _turn, ROWS["reply"]: _reply, ROWS["end"]: _end})
    _QUICK.update({row: _whole for kind, row in ROWS.items() if kind not in ("turn", "reply", "end")})
    return _decode_lines


def decode_lines(data: bytes | str) -> list[Any]:
    """Every line of a JSON-lines buffer as a row; ``ValueError`` when any value is not a JSON
    object of a known kind (or not JSON), for the caller to decode as dicts instead."""
    return (_decode_lines or _load())(data)


_readers: dict[type, bool] = {}


def row_reader(store: Any) -> Callable[[str, int], tuple[list[Any], Callable[[int], dict[str, Any]]]] | None:
    """The store's ``read_rows``, when it reads what its ``read`` reads: a subclass that
    overrides ``read`` (to filter or count records, say) and not ``read_rows`` is read by ``read``."""
    cls = type(store)
    known = _readers.get(cls)
    if known is None:
        def owner(name: str) -> type | None:
            return next((c for c in cls.__mro__ if name in c.__dict__), None)

        known = _readers[cls] = owner("read_rows") is not None and owner("read_rows") is owner("read")
    return store.read_rows if known else None


def fold(history: History, items: list[Any], full: Callable[[int], dict[str, Any]]) -> None:
    """Apply what `read_rows` gave: rows through the quick path when sound, anything else as
    its whole record (``full(position)``) through `History.apply`, each at its place."""
    quick = _QUICK
    #: Turns not ended yet, by id: ``(turn, position of its record)``. Their leases are read from
    #: their whole records before anything else may look at them (a record the quick path does not
    #: take; the end of the fold).
    pending: dict[str, tuple[TurnData, int]] = {}
    with paused_gc(len(items), BULK_RECORDS):
        for position, item in enumerate(items):
            handler = quick.get(type(item))
            if handler is not None:  # a row
                if item.functai_conversation != FORMAT:
                    history.count += 1  # a format this version does not read (as `apply` skips it)
                    continue
                if handler(history, item, pending, position):
                    history.count += 1
                    continue
                item = full(position)
            if pending:
                _settle(pending, full)
            history.apply(item)
        if pending:
            _settle(pending, full)


def _settle(pending: dict[str, tuple[TurnData, int]], full: Callable[[int], dict[str, Any]]) -> None:
    for turn, position in pending.values():
        turn.lease = _lease(full(position))
    pending.clear()


def _whole(history: History, row: Any, pending: dict[str, Any], position: int) -> bool:
    return False  # another kind: read whole


def _turn(history: History, row: Any, pending: dict[str, Any], position: int) -> bool:
    """`History._quick_turn` for a row."""
    turn_id, parent_id, inputs, shown, context = row.turn, row.parent, row.inputs, row.shown, row.context
    if (type(turn_id) is not str or not turn_id or turn_id in history.turns
            or (inputs is not None and type(inputs) is not dict)
            or (context is not None and type(context) is not dict)
            or type(shown) is not dict or len(shown) != 1 or type(shown.get("last")) is not int
            or shown["last"] < 0 or row.changes or row.without or row.sections):
        return False
    if parent_id is None:
        parent = None
    elif type(parent_id) is not str or (parent := history.turns.get(parent_id)) is None:
        return False
    turn = _turn_data(row, len(history.order))
    if parent is not None:
        turn.base = parent.base + (parent.state == DONE)
        turn.forked = turn.fork or parent.forked
    history.turns[turn_id] = turn
    history.order.append(turn_id)
    history.running.add(turn_id)
    pending[turn_id] = (turn, position)
    return True


def _turn_data(row: Any, order: int) -> TurnData:
    """`TurnData(record, order)` for a row that passed `_turn`'s checks (changes, without
    and sections empty, shown a dict); its lease is set by `fold` (see ``pending``)."""
    turn = TurnData.__new__(TurnData)
    turn.id = row.turn
    turn.parent = row.parent
    turn.inputs = row.inputs or NOTHING
    turn.outputs = NOTHING
    turn.state = RUNNING
    turn.order = order
    turn.changes = ()
    turn.context = row.context
    turn.shown = row.shown
    turn.without = NOTHING
    turn.sections = ()
    turn.approvals = ()
    turn.answers = NOTHING
    turn._replies = ()
    turn.tools = NOTHING
    turn.error = None
    turn.at = row.at
    turn.resumes = 0
    turn.fork = turn.forked = bool(row.fork)
    turn.waited_with = NOTHING
    turn.claim = row.claim
    turn.lease = None  # see `fold`
    turn.why = None
    turn.call = row.call
    turn.ran_with = NOTHING if row.ran_with is _UNSET else _ran_with(bytes(row.ran_with))
    turn.waits = ()
    turn.base = 0
    turn.lost_parent = None
    turn.messages = None
    return turn


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


def _reply(history: History, row: Any, pending: dict[str, Any], position: int) -> bool:
    """`History._quick_reply` for a row: a plain reply is kept as its text (`TurnData.replies`
    decodes it when a resumed turn asks), any other decoded and checked as the dict path does."""
    turn_id, raw = row.turn, row.reply
    if type(turn_id) is not str or raw is _UNSET:
        return False
    if _PLAIN_REPLY.fullmatch(raw):
        turn = history.turns.get(turn_id)
        if turn is None:
            return False
        turn._replies = (*turn._replies, raw)  # its JSON, decoded when asked for (`TurnData.replies`)
        return True
    from .. import codec

    reply = codec.loads(bytes(raw))
    if type(reply) is not dict:
        return False
    get = reply.get
    if ((get("tool_calls", ()) == [] or "tool_calls" not in reply)
            and "refusal" not in reply and "reasoning" not in reply):  # a plain final answer: a few scalars
        text, usage, finish = get("text"), get("usage"), get("finish_reason")
        if ((text is not None and type(text) is not str) or (usage and type(usage) is not dict)
                or (finish is not None and type(finish) is not str)):
            return False
    elif not sound_reply(reply):
        return False
    turn = history.turns.get(turn_id)
    if turn is None:
        return False
    turn._replies = (*turn._replies, reply)
    return True


def _end(history: History, row: Any, pending: dict[str, Any], position: int) -> bool:
    """`History._quick_end` for a row."""
    turn_id, state, outputs, error = row.turn, row.state, row.outputs, row.error
    if (type(turn_id) is not str or type(state) is not str or state not in END_STATES
            or (outputs is not None and type(outputs) is not dict)
            or (error is not None and type(error) is not dict)):
        return False
    turn = history.turns.get(turn_id)
    if turn is None or turn.state == DONE:
        return False
    history._end(turn, state, outputs, error)
    pending.pop(turn_id, None)  # an ended turn keeps no lease
    return True


#: What the fold does with each row type (filled in with the types, by `_load`).
_QUICK: dict[type, Callable[[History, Any, dict[str, Any], int], bool]] = {}
