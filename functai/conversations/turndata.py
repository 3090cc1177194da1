"""What the records say of one turn (`TurnData`), and the states a turn can be in.

`functai.conversations.history` folds records into these; a view hands them
out as `Turn` objects.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Sequence

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


class TurnData:
    """What the records say of one turn.

    Records come from a store as fresh dicts that nothing else holds, so a turn keeps the
    parts of its record it needs (inputs, what it was shown, ...) as they are instead of
    copying them, and what most turns never have (approvals, replies, tool runs) is a shared
    empty value until a record gives it one: opening a long conversation then makes little
    beyond the decoded records themselves. None of these is ever changed in place.
    """

    __slots__ = (
        "id", "parent", "inputs", "outputs", "state", "order", "changes", "context", "shown",
        "without", "sections", "approvals", "answers", "_replies", "tools", "error", "at", "resumes", "fork",
        "waited_with", "claim", "lease", "why", "call", "ran_with", "waits",
        "base", "lost_parent", "messages", "forked", "_row",
    )

    def __init__(self, record: Mapping[str, Any], order: int) -> None:
        get = record.get
        self.id: str = record["turn"]
        self.parent: str | None = get("parent")
        self.inputs: Mapping[str, Any] = get("inputs") or NOTHING
        self.outputs: Mapping[str, Any] = NOTHING
        self.state: str = RUNNING
        self.order = order
        self.changes: Sequence[dict[str, Any]] = get("changes") or ()
        self.context: dict[str, Any] | None = get("context")
        #: What the turn was shown, as recorded (see the module docstring): `History.shown` reads it.
        shown = get("shown")
        self.shown: dict[str, Any] | list[str] = shown if isinstance(shown, dict) else list(shown or [])
        self.without: Mapping[str, list[str]] = get("without") or NOTHING
        self.sections: Sequence[str] = get("sections") or ()
        self.approvals: Sequence[dict[str, Any]] = ()
        self.answers: Mapping[str, tuple[bool, str | None]] = NOTHING
        self._replies: tuple[Any, ...] = ()  # dicts, or JSON to decode (see `replies`)
        self.tools: Mapping[str, dict[str, Any]] = NOTHING
        self.error: dict[str, Any] | None = None
        self.at: str | None = get("at")
        self.resumes = 0
        #: The first turn of a branch made with ``continue_from``: views that follow the
        #: conversation forward never follow into it.
        self.fork: bool = bool(get("fork"))
        #: What the turn ran with when it waited: ``{"approve": rule, "plugins": [names]}``.
        self.waited_with: Mapping[str, Any] = NOTHING
        #: The claim of the process that runs it now (see `functai.conversations.leases`) and its
        #: lease (while it runs: a turn that ended needs none).
        self.claim: str | None = get("claim")
        self.lease: dict[str, Any] | None = (
            {"owner": get("owner"), "t": get("t"), "ttl": get("ttl")} if "owner" in record else None)
        #: Why the turn was interrupted (its owner was gone), when it was.
        self.why: str | None = None
        #: The id of the turn's own call record (one record, however often the turn waits).
        self.call: str | None = get("call")
        #: What the turn started with: ``{"approve": rule, "plugins": [names]}`` (empty before leases).
        ran_with = get("ran_with")
        self.ran_with: Mapping[str, Any] = ran_with if isinstance(ran_with, dict) else NOTHING
        #: Each wait: ``{"approvals", "at", "started"}``; answers are in ``answers``/``answered``.
        self.waits: Sequence[dict[str, Any]] = ()
        #: How many done turns the branch held above this turn when it was recorded.
        self.base = 0
        #: The recorded parent when its record is missing (damaged): the turn then starts a branch.
        self.lost_parent: str | None = None
        #: Whether this turn or one above it was made with ``continue_from``.
        self.forked = self.fork
        #: The turn as prior messages (a done turn's, rendered once).
        self.messages: tuple[Mapping[str, Any], ...] | None = None
        #: The row a turn read by an open was made from, until its other fields are filled in.
        self._row: Any = None

    def __getattr__(self, name: str) -> Any:
        """A field of a turn an open made from a row (`functai.conversations.rows`) and that nobody
        asked for yet: every such field is filled in from the row now, once."""
        if name in LAZY:
            self.ready()
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def ready(self) -> None:
        """Fill in what a row-made turn left for later (before anything changes it)."""
        if self._row is not None:
            from .rows import fill

            fill(self)

    #: What the turn's fields are called (``replies`` is kept as ``_replies``, see `replies`).
    FIELDS: tuple[str, ...] = ()

    @property
    def replies(self) -> Sequence[dict[str, Any]]:
        """The model replies the turn paid for, in order (each a fresh dict, as its record holds it).

        An open keeps a sound plain reply as its record's JSON text (`functai.conversations.rows`):
        only a turn that resumes ever reads its replies, so they are decoded when first asked for.
        """
        replies = self._replies
        if any(type(reply) is not dict for reply in replies):
            from .. import codec

            replies = self._replies = tuple(
                reply if type(reply) is dict else codec.loads(bytes(reply)) for reply in replies)
        return replies  # type: ignore[return-value]

    @replies.setter
    def replies(self, value: Sequence[dict[str, Any]]) -> None:
        self._replies = tuple(value)


TurnData.FIELDS = tuple("replies" if name == "_replies" else name for name in TurnData.__slots__ if name != "_row")

#: The fields an open leaves unset on a turn made from a row until one of them is asked for
#: (`TurnData.__getattr__`); the others it sets at once (what the fold and a branch walk read).
LAZY = frozenset({
    "inputs", "changes", "context", "shown", "without", "sections", "approvals", "answers", "tools", "at",
    "resumes", "waited_with", "claim", "why", "call", "ran_with", "waits", "lost_parent",
})


def _lease(record: Mapping[str, Any]) -> dict[str, Any] | None:
    if "owner" not in record:
        return None
    return {"owner": record.get("owner"), "t": record.get("t"), "ttl": record.get("ttl")}
