"""What the records say of one turn (`TurnData`), and the states a turn can be in."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Generic, Mapping, Sequence, TypeVar

T = TypeVar("T")

#: The record format version every record carries.
FORMAT = 1

DONE, FAILED, STOPPED, WAITING, RUNNING = "done", "failed", "stopped", "waiting", "running"
#: A running turn whose owner is gone (its lease expired); it can be resumed or abandoned.
INTERRUPTED = "interrupted"
#: A waiting or interrupted turn given up on: it ended, and it is never a parent.
ABANDONED = "abandoned"
#: The states a turn leaves only by being resumed (or abandoned): the branch waits on it.
HELD = (WAITING, INTERRUPTED)
#: The record kind of an answer given after its approval was answered the other way:
#: kept (who tried, and when), never applied — the first answer holds.
LATE_ANSWER = "late_answer"


#: What a turn holds where its records hold nothing: one shared, read-only empty mapping
#: (a long conversation's turns mostly have no approvals, answers, tools or changes).
NOTHING: Mapping[str, Any] = MappingProxyType({})


class _Recorded(Generic[T]):
    """A field of `TurnData` only the turn's own record says (see `TurnData._read`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, turn: TurnData, owner: type) -> T:
        if turn._row is not None:
            turn._read()
        return getattr(turn, self.slot)  # type: ignore[no-any-return]


class TurnData:
    """What the records say of one turn; none of it is ever changed in place.

    What only the turn's own record says (inputs, what it was shown, ...) is read from its
    row when first asked for: a long conversation's open reads it for the few turns it shows.
    """

    __slots__ = (
        "id", "parent", "order", "state", "outputs", "_replies", "error", "fork", "forked", "base", "claim",
        "lease", "messages", "_row", "_inputs", "_changes", "_context", "_shown", "_without", "_sections", "_at",
        "_call", "_ran_with", "__dict__",
    )

    # What most turns never get, shared by the class until a record gives a turn its own (in
    # its ``__dict__``): a turn is made with fewer fields.
    approvals: Sequence[dict[str, Any]] = ()
    answers: Mapping[str, tuple[bool, str | None]] = NOTHING
    tools: Mapping[str, dict[str, Any]] = NOTHING
    resumes = 0
    #: What the turn ran with when it waited: ``{"approve": rule, "plugins": [names]}``.
    waited_with: Mapping[str, Any] = NOTHING
    #: Why the turn was interrupted (its owner was gone), when it was.
    why: str | None = None
    #: Each wait: ``{"approvals", "at", "started"}``; answers are in ``answers``/``answered``.
    waits: Sequence[dict[str, Any]] = ()
    #: The recorded parent when its record is missing (damaged): the turn then starts a branch.
    lost_parent: str | None = None
    #: The key it was sent with (``chat.send(..., key=...)``): it is the turn made under that key.
    key: str | None = None

    def __init__(self, turn_id: str, parent: str | None, order: int, record: Any, base: int = 0,
                 forked: bool = False) -> None:
        """``record``: a dict, or a row the fold took as sound (no changes, ``without`` or sections)."""
        self.id = turn_id
        self.parent = parent
        self.order = order
        self.state = RUNNING
        self.outputs: Mapping[str, Any] = NOTHING
        self._replies: tuple[Any, ...] = ()  # dicts, or JSON to decode (see `replies`)
        self.error: dict[str, Any] | None = None
        #: How many done turns the branch held above this turn when it was recorded.
        self.base = base
        #: The turn as prior messages (a done turn's, rendered once).
        self.messages: tuple[Mapping[str, Any], ...] | None = None
        #: The turn's row, until what it says is read (`_read`): a dict is read at once.
        self._row: Any = record
        if type(record) is dict:
            self.fork: bool = bool(record.get("fork"))
            #: The claim of the process that runs it now (see `functai._conversations.leases`).
            self.claim: str | None = record.get("claim")
            #: Its lease, while it runs (a turn that ended needs none).
            self.lease: dict[str, Any] | None = lease_of(record)
            self._read()
        else:  # a row holds no lease: `History.apply_all` reads it from the whole record when the turn still runs
            self.fork, self.claim, self.lease = bool(record.fork), record.claim, None
        #: Whether this turn or one above it was made with ``continue_from``: views that follow
        #: the conversation forward never follow into it.
        self.forked = self.fork or forked

    #: What the turn's fields are called.
    FIELDS = (
        "id", "parent", "inputs", "outputs", "state", "order", "changes", "context", "shown", "without",
        "sections", "approvals", "answers", "replies", "tools", "error", "at", "resumes", "fork", "waited_with",
        "claim", "lease", "why", "call", "ran_with", "waits", "base", "lost_parent", "messages", "forked", "key",
    )

    def _read(self) -> None:
        """Set what the turn's record says (no lock: two threads reading it at once set the same)."""
        record = self._row
        if type(record) is dict:
            get = record.get
            shown, ran_with = get("shown"), get("ran_with")
            self._inputs, self._changes, self._context = get("inputs") or NOTHING, get("changes") or (), get("context")
            self._shown = shown if isinstance(shown, dict) else list(shown or [])
            self._without, self._sections = get("without") or NOTHING, get("sections") or ()
            self._at, self._call = get("at"), get("call")
            self._ran_with = ran_with if isinstance(ran_with, dict) else NOTHING
        elif record is not None:
            self._inputs, self._changes, self._context = record.inputs or NOTHING, (), record.context
            self._shown = record.shown
            self._without, self._sections, self._at, self._call = NOTHING, (), record.at, record.call
            self._ran_with = _ran_with(record.ran_with)
        self._row = None

    inputs: _Recorded[Mapping[str, Any]] = _Recorded()
    changes: _Recorded[Sequence[dict[str, Any]]] = _Recorded()
    context: _Recorded[dict[str, Any] | None] = _Recorded()
    #: What the turn was shown, as recorded (see `functai._conversations.history`).
    shown: _Recorded[dict[str, Any] | list[str]] = _Recorded()
    without: _Recorded[Mapping[str, list[str]]] = _Recorded()
    sections: _Recorded[Sequence[str]] = _Recorded()
    at: _Recorded[str | None] = _Recorded()
    #: The id of the turn's own call record (one record, however often the turn waits).
    call: _Recorded[str | None] = _Recorded()
    #: What the turn started with: ``{"approve": rule, "plugins": [names]}`` (empty before leases).
    ran_with: _Recorded[Mapping[str, Any]] = _Recorded()

    @property
    def replies(self) -> Sequence[dict[str, Any]]:
        """The model replies the turn paid for, in order; an open keeps them as JSON, decoded
        when first asked for (only a resuming turn asks)."""
        replies = self._replies
        if any(type(reply) is not dict for reply in replies):
            from .. import _codec as codec

            replies = self._replies = tuple(
                reply if type(reply) is dict else codec.loads(bytes(reply)) for reply in replies)
        return replies


def lease_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
    if "owner" not in record:
        return None
    return {"owner": record.get("owner"), "t": record.get("t"), "ttl": record.get("ttl")}


def _ran_with(raw: Any) -> Mapping[str, Any]:
    """What a row says a turn ran with (its JSON, or unset: falsy)."""
    if not raw:
        return NOTHING
    from .. import _codec as codec

    value = codec.loads(bytes(raw))
    return value if type(value) is dict else NOTHING
