"""Asking a rated call again exactly as it was shown (``spec/plugins.md`` §8).

A call is rebuilt from its record: its inputs, the earlier turns it was
shown (after ``keep``/``without``, read back from its conversation's store)
and its context ``sections``. Nothing of the host's shaping comes back — no
recorded ``before_call`` or ``request`` change — so the evaluating process's
own plugins and settings shape the new call. No ``turn_start`` or
``context`` hook runs, no summarizer runs, and nothing is written to any
conversation.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..calls.records import CallRecord
from ..errors import FunctAIError
from ..layers import EMPTY
from ..models.request import Client, Reply, Request


class NotReplayable(FunctAIError):
    """A record whose call cannot be rebuilt as it was shown."""

    code = "not-replayable"


class ReplayedTurn:
    """What a rebuilt call is shown of its conversation (a `TurnScope` that records nothing)."""

    layer = EMPTY
    conversation = None
    turn = None
    parent = None
    store = None
    waits = False  # an approval with nobody to decide refuses, as in a plain call
    memory = None

    def __init__(self, program: Any, history: Sequence[Mapping[str, Any]], sections: Sequence[str]) -> None:
        self.program = program
        self.history = list(history)
        self.sections = list(sections)
        self.changes: list[dict[str, Any]] = []  # recorded changes never come back
        self.claimed = False
        self.calls = 0

    def begin_call(self) -> int:
        self.calls += 1
        return self.calls

    def complete(self, client: Client, request: Request) -> Reply:
        return client.complete(request)

    def recorded_tool(self, site: str) -> None:
        return None

    def tool_started(self, site: str, entry: Mapping[str, Any]) -> None:
        return None

    def tool_suspended(self, site: str, entry: Mapping[str, Any]) -> None:
        return None

    def tool_done(self, site: str, entry: Mapping[str, Any], changes: Sequence[Mapping[str, Any]]) -> None:
        return None

    def answer(self, key: str) -> None:
        return None

    def refusal(self, site: str) -> None:
        return None


def shown(record: CallRecord) -> tuple[list[dict[str, Any]], list[str]]:
    """The earlier turns (as messages) and context sections ``record``'s call was shown.

    Raises `NotReplayable` when they cannot be rebuilt exactly.
    """
    if isinstance(record.instruction, dict) or any(
        isinstance(v, dict) and set(v) == {"chars"} for v in record.inputs.values()
    ):
        raise NotReplayable(f"call {record.id} was logged without content (log_content=False)")
    conversation = record.conversation
    if not conversation or "parent" not in conversation:
        return [], list(record.sections or [])  # not a turn's own call: it was shown no conversation
    from ..conversations.history import History
    from ..conversations.store import open_reference

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
