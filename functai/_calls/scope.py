"""The seam between a call and the conversation turn it runs in (`current_turn`, None outside
a turn): what the turn shows, what it recorded (so a resumed turn never pays or runs twice),
and answers to approvals."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Mapping, Protocol, Sequence

from .._models.request import Client, Reply, Request


class TurnScope(Protocol):
    """What a running turn offers the calls inside it."""

    program: Any
    layer: Any
    conversation: str | None
    turn: str | None
    parent: str | None
    #: How the call record names the store (see `functai._stores.opening.store_reference`).
    store: str | None
    #: Whether an approval with nobody to decide makes the turn wait (else: approval-required).
    waits: bool
    #: Set by the pipeline when the turn's own call starts (the first call of `program`).
    claimed: bool
    #: Whether the turn's inputs were checked before its call (when sent, or as read back from a
    #: record, where a type JSON cannot give back stays its recorded text): not checked again.
    inputs_checked: bool
    #: The turn's turn_start and context changes, first in its call's record.
    changes: Sequence[Mapping[str, Any]]
    #: The context sections the turn is shown.
    sections: Sequence[str]
    #: The earlier turns as prior user/assistant messages.
    history: Sequence[Mapping[str, Any]]
    memory: Any
    #: The id of the turn's call record (the same after every resume), or None for a fresh one.
    call_id: str | None
    #: When the turn's call first started (kept by a resumed turn); set by the pipeline when None.
    call_started: str | None
    #: What the turn waited for before, with the answers given: kept in its one call record.
    waited: Sequence[Mapping[str, Any]]
    #: Tools a resume runs again when they started with no recorded result (``resume(rerun=...)``).
    rerun: Sequence[str]
    #: Whether the turn keeps each reply to read back when it is resumed (a conversation's turn);
    #: a turn that records nothing (a replayed one) answers every request through `complete`.
    records: bool
    #: What the turn was shown, as its call record keeps it (``{"last": n}`` or turn ids), and the
    #: messages left out of shown turns; None and empty where it keeps none.
    shown: Mapping[str, Any] | Sequence[str] | None
    without: Mapping[str, Any]
    #: What the plugins did for the next reply kept (`keep`), and as recorded with the reply `replay` read.
    acts: dict[str, Any] | None
    replayed: dict[str, Any] | None
    #: Approve rules the turn started with that this process's rule does not cover: checked too.
    also_approve: Sequence[Any]

    def begin_call(self) -> int:
        """The ordinal of a call inside the turn (1, 2, …; stable when resumed)."""

    def next_request(self) -> tuple[int, bool]:
        """The next model request's ordinal in the turn (1, 2, …; stable when resumed), and whether
        its reply is recorded (a resumed turn reads it back: nothing is paid for it)."""

    def complete(self, client: Client, request: Request) -> Reply:
        """Answer from a recorded reply when there is one, else ask and record."""

    def replay(self, request: Request) -> Reply | None:
        """The reply recorded for the next request, or None (ask the model, then `keep` its reply)."""

    def keep(self, reply: Reply) -> None:
        """Record a new reply, so a resumed turn never pays for it twice."""

    def skip_past(self, recorded: Mapping[str, Any]) -> None:
        """A finished tool reused on resume: the calls and requests made inside it keep their places."""

    def recorded_tool(self, site: str) -> Mapping[str, Any] | None:
        """The recorded run of the tool call at ``site``, if it ran (or started) before."""

    def tool_started(self, site: str, entry: Mapping[str, Any], changes: Sequence[Mapping[str, Any]] = ()) -> None:
        """Record that a tool that changes things is about to run, with the changes that shaped its input
        (a run settled after a crash keeps them)."""

    def tool_suspended(self, site: str, entry: Mapping[str, Any]) -> None:
        """Record that a call inside the tool made the turn wait: resuming runs the tool again
        (the calls inside it reuse what they recorded)."""

    def tool_done(self, site: str, entry: Mapping[str, Any], changes: Sequence[Mapping[str, Any]]) -> None:
        """Record a tool call's outcome (what the model was shown, and the changes made)."""

    def answers(self, prefix: str) -> dict[str, dict[str, Any]] | None:
        """The recorded answers to approvals asked at ``prefix`` (a tool call's site, or its site and
        plugin), by key: ``{"allow", "reason", "digest", "inputs", "by", "approval"}``."""

    def refusal(self, site: str) -> tuple[str, str | None] | None:
        """A recorded refusal of the tool call at ``site``: (plugin, reason), even if this process would not ask."""


current_turn: ContextVar[TurnScope | None] = ContextVar("functai_turn", default=None)
