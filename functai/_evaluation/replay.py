"""Asking a rated call again exactly as it was shown (docs/evaluating.md, *Exactly what is asked again*).

A call is rebuilt from its record: its inputs, the earlier turns it was shown
and its context ``sections``. No recorded change comes back, so the evaluating
process's own plugins and settings shape the new call; no conversation hook
runs, and nothing is written to any conversation.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from .._calls.records import CallRecord
from .._conversations.history import History
from .._errors import FunctAIError
from .._layers import EMPTY
from .._models.request import Client, Reply, Request
from .._stores.opening import open_reference


class NotReplayable(FunctAIError):
    """A record whose call cannot be rebuilt as it was shown."""

    code = "not-replayable"


class ReplayedTurn:
    """What a rebuilt call is shown of its conversation (a `TurnScope` that records nothing)."""

    layer = EMPTY
    conversation = None
    turn = None
    parent: str | None = None
    store: str | None = None
    waits = False  # an approval with nobody to decide refuses, as in a plain call
    memory = None
    records = False  # every request is asked (`complete`): nothing is kept to read back
    shown: Mapping[str, Any] | Sequence[str] | None = None
    without: Mapping[str, Any] = {}
    acts: dict[str, Any] | None = None
    replayed: dict[str, Any] | None = None
    call_id: str | None = None
    call_started: str | None = None
    waited: Sequence[Mapping[str, Any]] = ()
    also_approve: Sequence[Any] = ()
    inputs_checked = False

    def __init__(self, program: Any, history: Sequence[Mapping[str, Any]], sections: Sequence[str],
                 conversation: str | None = None, turn: str | None = None) -> None:
        if conversation is not None:  # a what-if replay's before_call event names the turn it rebuilds
            self.conversation, self.turn = conversation, turn
        self.program = program
        self.history: Sequence[Mapping[str, Any]] = list(history)
        self.sections: Sequence[str] = list(sections)
        self.changes: Sequence[Mapping[str, Any]] = []  # recorded changes never come back
        self.claimed = False
        self.calls = 0
        self.rerun: Sequence[str] = ()

    def begin_call(self) -> int:
        self.calls += 1
        return self.calls

    def next_request(self) -> tuple[int, bool]:
        return 0, False  # nothing is recorded: every request is asked

    def complete(self, client: Client, request: Request) -> Reply:
        return client.complete(request)

    def _nothing(self, *args: Any) -> None:
        """Nothing was recorded before, and nothing is now."""

    recorded_tool = tool_started = tool_suspended = tool_done = answers = refusal = replay = keep = skip_past = _nothing


def turn_calls(records: Iterable[CallRecord]) -> dict[tuple[str, str], CallRecord]:
    """Each turn's own call record in a call log, by (conversation id, turn id), for `shown`."""
    found: dict[tuple[str, str], CallRecord] = {}
    for record in records:
        conversation = record.conversation
        if conversation and "parent" in conversation and record.error is None:
            found[(conversation["id"], conversation["turn"])] = record
    return found


def _without_content(record: CallRecord) -> bool:
    return isinstance(record.instruction, dict) or any(isinstance(s, dict) for s in record.sections) or any(
        isinstance(v, dict) and set(v) == {"chars"} for v in record.inputs.values()
    )


class _LoggedTurn:
    """A shown turn as its own call record tells it: the inputs and outputs it was shown with."""

    __slots__ = ("inputs", "outputs", "messages")

    def __init__(self, record: CallRecord) -> None:
        self.inputs = dict(record.inputs)
        fields = bool((record.conversation or {}).get("fields")) and isinstance(record.output, dict)
        self.outputs = dict(record.output) if fields else {"output": record.output}
        self.messages = None  # rendered once by History.turn_messages


def _from_log(record: CallRecord, calls: Mapping[tuple[str, str], CallRecord]) -> list[dict[str, Any]] | None:
    """The shown turns rebuilt from their own call records; None when the log lacks one.
    (``{"last": n}`` is ``n`` parent steps: every parent is a done turn.)"""
    conversation = record.conversation or {}
    name, raw = conversation["id"], conversation["shown"]
    if isinstance(raw, list):
        ids = [str(turn_id) for turn_id in raw]
    else:
        ids, turn_id = [], conversation.get("parent")
        for _ in range(int(raw.get("last", 0))):
            if turn_id is None or (name, turn_id) not in calls:
                return None
            ids.insert(0, turn_id)
            turn_id = (calls[(name, turn_id)].conversation or {}).get("parent")
        drop = set(raw.get("drop") or ())
        ids = [t for t in ids if t not in drop]
    logged = [calls[(name, turn_id)] for turn_id in ids if (name, turn_id) in calls]
    if len(logged) < len(ids):
        return None
    history = History()
    for turn_id, item in zip(ids, logged):
        if _without_content(item) or (isinstance(item.output, dict) and set(item.output) == {"chars"}):
            raise NotReplayable(f"call {record.id}: the turn {turn_id} it was shown was logged without content "
                                "(log_content=False)")
        history.turns[turn_id] = _LoggedTurn(item)  # type: ignore[assignment]
    return [dict(m) for m in history.messages(ids, conversation.get("without") or {})]


def shown(
    record: CallRecord, calls: Mapping[tuple[str, str], CallRecord] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The earlier turns (as messages) and context sections ``record``'s call was shown: from
    their own call records in the log (``calls``, from `turn_calls`), else from the
    conversation's store; `NotReplayable` when they cannot be rebuilt exactly."""
    if _without_content(record):
        raise NotReplayable(f"call {record.id} was logged without content (log_content=False)")
    conversation = record.conversation
    if not conversation or "parent" not in conversation:
        return [], list(record.sections or [])  # not a turn's own call: it was shown no conversation
    if calls is not None and "shown" in conversation:
        messages = _from_log(record, calls)
        if messages is not None:
            return messages, list(record.sections or [])
    reference = conversation.get("store")
    if not reference:
        raise NotReplayable(f"call {record.id}: its conversation's store cannot be opened again")
    history = History()
    history.apply_all(open_reference(reference).read(conversation["id"]))
    turn = history.turns.get(conversation["turn"])
    if turn is None:
        raise NotReplayable(
            f"call {record.id}: turn {conversation['turn']!r} is not in conversation {conversation['id']!r} "
            f"of {reference}"
        )
    ids, inexact = history.shown(turn)  # the recorded form: a rule's window, or ids for old records
    if inexact is not None:
        raise NotReplayable(
            f"call {record.id}: {inexact} in conversation {conversation['id']!r}; it cannot be asked again as it was"
        )
    return [dict(m) for m in history.messages(ids, turn.without)], list(record.sections or [])
