"""One turn of a conversation, as a view hands it out: read-only, plus the actions
on a waiting or interrupted turn (answer, resume, abandon)."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .._calls.approvals import is_extension, named_key
from .._calls.toolinputs import check_edit
from .._calls.steps import drive
from .._calls.tools import tool_inputs
from .._errors import FunctAIError
from . import held
from .history import TurnData

if TYPE_CHECKING:
    from .conversation import Conversation

__all__ = ["Turn"]


class Turn:
    """One turn of a conversation: a call of its function."""

    def __init__(self, chat: "Conversation", data: TurnData) -> None:
        self._chat = chat
        self._data = data

    id = property(lambda self: self._data.id)
    parent = property(lambda self: self._data.parent)
    state = property(lambda self: self._data.state,
                     doc="done, failed, stopped, waiting, running, interrupted or abandoned")
    why = property(lambda self: self._data.why,
                   doc="why an interrupted turn was interrupted (its owner was gone, or a reconcile raised)")
    call = property(lambda self: self._data.call, doc="the id of the turn's call record")
    inputs = property(lambda self: MappingProxyType(self._data.inputs))
    outputs = property(lambda self: MappingProxyType(self._data.outputs))
    approvals = property(lambda self: list(self._data.approvals), doc="what a waiting turn waits for")
    at = property(lambda self: self._data.at, doc="when the turn started (ISO 8601)")
    shown = property(lambda self: copy.deepcopy(self._data.shown),
                     doc='what the turn was shown, as recorded: {"last": n}, with "drop": [ids], or [ids]')

    @property
    def waits(self) -> list[dict[str, Any]]:
        """Each time the turn waited: ``{"approvals", "at", "answers"}``, the answers that held by key
        with ``allow``, ``reason``, ``by`` and ``at`` (what its call record keeps as ``waited``)."""
        from .scope import waits_of

        return waits_of(self._chat._history, self._data)

    @property
    def answers(self) -> dict[str, dict[str, Any]]:
        """The answers given to this turn's approvals, by key: ``{"allow": bool, "reason": str | None}``,
        and ``"extend"`` where an approval granted an extension (a budget's question)."""
        details = self._chat._history.answered.get(self.id, {})
        found: dict[str, dict[str, Any]] = {}
        for key, (allow, reason) in self._data.answers.items():
            found[key] = {"allow": allow, "reason": reason}
            if details.get(key, {}).get("extend") is not None:
                found[key]["extend"] = details[key]["extend"]
        return found

    def approve(self, approval: Mapping[str, Any] | str | None = None, *, inputs: Mapping[str, Any] | None = None,
                by: str | None = None, extend: float | None = None) -> "Turn":
        """Allow a waiting approval (all of them when none is named); the first recorded answer
        holds, so approving one already denied raises ``approval-answered``.

        ``inputs`` approves the named approval with these inputs changed: on resume every
        ``tool_call`` handler and the approve rule see the edited call, which may then need
        another answer (``by`` is kept as who made the edit). ``extend`` grants this much more
        to a question a plugin asked before a request (a budget's), instead of what it offered."""
        if inputs is not None:
            inputs = self._edit(approval, inputs)
        if extend is not None:
            self._check_extend(approval, extend)
        held.answer(self._chat._history, self._chat.store, self._chat.id, self.id, approval, allow=True, reason=None,
                    by=by, inputs=inputs, extend=extend)
        return self

    def _check_extend(self, approval: Mapping[str, Any] | str | None, extend: Any) -> None:
        """``extend`` is a number from 0 up, for questions that offer an extension (``input-invalid``)."""
        if not is_extension(extend):
            raise FunctAIError(f"approve(extend=...) is a number from 0 up, not {extend!r}", code="input-invalid")
        key = named_key(approval)
        named = [a for a in self._data.approvals if key is None or a["key"] == key]
        if not any(a.get("kind") == "request" for a in named):
            raise FunctAIError(
                f"approve(extend=...) answers a question a plugin asked before a request (a budget's); turn "
                f"{self.id!r} waits for no such question{'' if key is None else ' at ' + repr(key)}",
                code="input-invalid")

    def _edit(self, approval: Mapping[str, Any] | str | None, inputs: Any) -> dict[str, Any]:
        """An edit on approving, checked against the tool it changes (``input-invalid``)."""
        key = named_key(approval)
        asked = next((a for a in self._data.approvals if a["key"] == key), None)
        if asked is not None and asked.get("kind") == "request":
            raise FunctAIError(f"approving with inputs= edits a tool call; {key!r} is a question asked before a "
                               "request (a budget's): answer it with extend= instead", code="input-invalid")
        if asked is None:
            keys = [a["key"] for a in self._data.approvals]
            raise FunctAIError(f"approving with inputs= names one approval of turn {self.id!r}: one of {keys}",
                               code="input-invalid" if key is None else "turn-not-waiting")
        program = self._chat.program
        found = None if program is None else tool_inputs(program, asked["path"])
        if found is not None:
            return check_edit(inputs, found, asked["name"])
        # Opened without its function (Conversation.open): the inputs and their schema the question kept.
        parameters = asked.get("parameters") or {}
        return check_edit(inputs, list(parameters.get("properties") or asked["input"]), asked["name"], parameters)

    def deny(
        self, approval: Mapping[str, Any] | str | None = None, *, reason: str | None = None, by: str | None = None
    ) -> "Turn":
        """Refuse a waiting approval (all of them when none is named); ``approval-answered``
        (naming who answered first) when it was already answered the other way."""
        held.answer(self._chat._history, self._chat.store, self._chat.id, self.id, approval, allow=False,
                    reason=reason, by=by)
        return self

    def resume(self, *, rerun: Sequence[str] | None = None) -> Any:
        """Go on with a waiting turn whose approvals are answered, or an interrupted one;
        returns the answer. A tool that started and never recorded a result is settled by
        its ``reconcile``, when it has one; else it is not run again (the model is told so)
        unless its name is in ``rerun``."""
        return drive(self._chat._resume(self.id, held.check_rerun(rerun))).value

    async def aresume(self, *, rerun: Sequence[str] | None = None) -> Any:
        """`resume` from async code."""
        return (await self._chat._alocked(self._chat._resume(self.id, held.check_rerun(rerun)))).value

    def abandon(self, *, reason: str | None = None, by: str | None = None) -> "Turn":
        """Give up on a waiting or interrupted turn: it ends ``abandoned`` and frees the branch
        (its call record, with the log set, is written now with error ``turn-abandoned``)."""
        self._chat._abandon(self.id, reason, by)
        return self

    @property
    def conversation(self) -> "Conversation":
        """The view this turn was read through (its store, entries, branches)."""
        return self._chat

    def __repr__(self) -> str:
        return f"Turn({self.id!r}, {self.state}, parent={self.parent!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Turn) and other.id == self.id and other._chat.id == self._chat.id

    def __hash__(self) -> int:
        return hash((self._chat.id, self.id))
