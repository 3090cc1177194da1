"""functai's delegate, written with functai's public API only.

A delegate is a tool whose body is another AI function. Inside a turn it
answers in a sub-conversation, ``<conversation id>.<tool name>``, continuing
from the sub-turn the asking branch last delegated to (kept as an entry of
the plugin ``delegate``), so each branch has its own memory of it; a turn
that failed off the branch is no part of it.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import re
import typing
from typing import Any

import functai

__version__ = "0.1.0"

log = logging.getLogger("functai.delegate")

#: The plugin name its entries are kept under, and their kind.
ENTRIES = "delegate"

#: What a conversation id may be (functai's stores refuse anything else).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")
ID_LIMIT = 200


def sub_conversation_id(conversation: str, tool: str) -> str:
    """``<conversation>.<tool>``, or — when that would be too long or hold characters an
    id may not — the same start cut short and a hash of the whole, so it stays unique
    and the same every time it is asked for."""
    plain = f"{conversation}.{tool}"
    if _ID.match(plain):
        return plain
    digest = hashlib.sha256(plain.encode()).hexdigest()[:20]
    name = re.sub(r"[^A-Za-z0-9_-]", "_", tool)[:40]
    tail = f".{name}-{digest}"
    return conversation[: ID_LIMIT - len(tail)] + tail


class Delegate(functai.Tool):
    """An AI function as a tool that remembers, per branch, what it was asked."""

    def __init__(
        self,
        program: functai.AIFunction[..., Any],
        name: str | None = None,
        description: str | None = None,
        effects: str | None = None,
    ) -> None:
        if not isinstance(program, functai.AIFunction):
            raise TypeError(f"delegate() takes an AI function (made with @functai.ai), not {program!r}")

        def ask(**inputs: Any) -> Any:
            return self.answer(inputs)

        ask.__name__ = name or program.name
        ask.__doc__ = description or program.instruction
        ask.__signature__ = inspect.signature(program.fn).replace(return_annotation=inspect.Signature.empty)  # type: ignore[attr-defined]
        # Typed as the program's inputs: what the model gives is read, and refused, by their types.
        ask.__annotations__ = {k: v for k, v in typing.get_type_hints(program.fn).items() if k != "return"}
        # Undeclared, its effects are the program's own (derived from the program's tools).
        super().__init__(ask, effects=effects if effects is not None else program.effects)
        self.program = program

    def answer(self, inputs: dict[str, Any]) -> Any:
        turn = functai.current_turn()
        if turn is None:
            return self.program(**inputs)  # outside a conversation: a plain call
        chat = turn.conversation
        sub_id = sub_conversation_id(chat.id, self.name)
        sub = self.program.conversation(sub_id, store=chat.store)
        waiting = self._waiting_sub_turn(turn, sub_id, sub)
        try:
            if waiting is not None:  # the asking turn was resumed: answer and resume the sub-turn it waited on
                sub_turn = sub.turn(waiting)
                for approval in sub_turn.approvals:
                    given = turn.answers[f"{sub_id}/{waiting}/{approval['key']}"]
                    if given["allow"]:  # as given: a person's edit, the extension granted a budget's question
                        sub_turn.approve(approval, inputs=given.get("inputs"), extend=given.get("extend"),
                                         by=given.get("by"))
                    else:
                        sub_turn.deny(approval, reason=given["reason"], by=given.get("by"))
                value, asked = sub_turn.resume(), waiting
            else:
                view = self._memory(turn, sub)
                value = view(**inputs)
                asked = typing.cast(functai.Turn, view.head).id  # the turn it made just now
        except functai.Waiting as wait:  # the asking turn waits too; its answers come back here on resume
            prefix = f"{sub_id}/{wait.turn.id}/"
            raise functai.Waiting(
                f"{self.name} (delegated) waits: {wait.message}",
                approvals=[{**approval, "key": prefix + approval["key"]} for approval in wait.approvals],
            ) from None
        chat.remember(ENTRIES, ENTRIES, {"tool": self.name, "conversation": sub_id, "turn": asked}, turn=turn)
        return value

    def _memory(self, turn: Any, sub: functai.Conversation) -> functai.Conversation:
        """The sub-conversation continued from the sub-turn this branch last delegated to: kept at a
        turn of the branch itself (a turn that failed off it is not its memory), whole and still there,
        else from nothing, said in a warning."""
        chat = turn.conversation
        on_branch = {t.id for t in chat.turns} | {turn.id}
        mine = [e["data"] for e in chat.entries(ENTRIES, ENTRIES) if e["turn"] in on_branch
                and isinstance(e["data"], dict) and e["data"].get("tool") == self.name]
        if not mine:
            return sub.continue_from(None)
        try:
            return sub.continue_from(mine[-1]["turn"])
        except functai.FunctAIError as lost:  # its sub-turn is gone (the store edited): memory starts afresh
            log.warning("delegate %r of conversation %r starts afresh: %s", self.name, chat.id, lost.message)
            return sub.continue_from(None)

    @staticmethod
    def _waiting_sub_turn(turn: Any, sub_id: str, sub: functai.Conversation) -> str | None:
        """The sub-turn the asking turn waited on and that still waits, if it is being resumed after
        such a wait (a later delegation of the same turn asks anew)."""
        for approval in turn.approvals:
            key: str = approval["key"]
            head, _, rest = key.partition("/")
            if head == sub_id and turn.answers.get(key) is not None:
                waited = rest.partition("/")[0]
                try:
                    if sub.turn(waited).state == "waiting":
                        return waited
                except functai.FunctAIError:  # gone: nothing to resume
                    pass
        return None


def delegate(
    program: functai.AIFunction[..., Any], name: str | None = None, description: str | None = None,
    effects: str | None = None,
) -> Delegate:
    """Another AI function as a tool; see the module docstring.

    ``effects`` ("reads" or "changes") declares what the tool does; left out,
    it is derived from the program (`functai.AIFunction.effects`).
    """
    return Delegate(program, name=name, description=description, effects=effects)
