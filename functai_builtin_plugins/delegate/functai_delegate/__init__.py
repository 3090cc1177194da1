"""functai's delegate, written with functai's public API only.

A delegate is a tool whose body is another AI function. Inside a turn it
answers in a sub-conversation, ``<conversation id>.<tool name>``, continuing
from the sub-turn the asking branch last delegated to (kept as an entry of
the plugin ``delegate``), so each branch has its own memory of it.
"""

from __future__ import annotations

import inspect
from typing import Any

import functai

__version__ = "0.1.0"

#: The plugin name its entries are kept under, and their kind.
ENTRIES = "delegate"


class Delegate(functai.Tool):
    """An AI function as a tool that remembers, per branch, what it was asked."""

    def __init__(self, program: functai.AIFunction, name: str | None = None, description: str | None = None) -> None:
        if not isinstance(program, functai.AIFunction):
            raise TypeError(f"delegate() takes an AI function (made with @functai.ai), not {program!r}")

        def ask(**inputs: Any) -> Any:
            return self.answer(inputs)

        ask.__name__ = name or program.name
        ask.__doc__ = description or program.instruction
        ask.__signature__ = inspect.signature(program.fn).replace(return_annotation=inspect.Signature.empty)  # type: ignore[attr-defined]
        super().__init__(ask)
        self.parameters = functai.Tool(program.fn).parameters  # typed as the program's inputs
        self.program = program

    def answer(self, inputs: dict[str, Any]) -> Any:
        turn = functai.current_turn()
        if turn is None:
            return self.program(**inputs)  # outside a conversation: a plain call
        chat = turn.conversation
        mine = [e["data"] for e in chat.entries(ENTRIES, ENTRIES) if e["data"].get("tool") == self.name]
        sub_id = f"{chat.id}.{self.name}"
        sub = self.program.conversation(sub_id, store=chat.store)
        view = sub.continue_from(mine[-1]["turn"] if mine else None)
        value = view(**inputs)
        chat.remember(ENTRIES, ENTRIES, {"tool": self.name, "conversation": sub_id, "turn": view.head.id}, turn=turn)
        return value


def delegate(program: functai.AIFunction, name: str | None = None, description: str | None = None) -> Delegate:
    """Another AI function as a tool; see the module docstring."""
    return Delegate(program, name=name, description=description)
