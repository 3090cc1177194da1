"""Layouts: how a call's instruction and inputs become messages.

By default the instruction (plus sections) is the system message and the inputs
the user message; a `Template` writes them by hand; a baked student
(``lm=baked("model")``) reads only its inputs message. A layout that would drop
the instruction refuses a call whose instruction a plugin changed (docs/plugins.md, *Layouts*).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from .._models.request import Frozen, frozen_messages
from .outputs import to_jsonable

if TYPE_CHECKING:
    from .template import Template


class Baked(str):
    """A model name for a baked student: it reads only its trained message."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"baked({str.__repr__(self)})"


def baked(model: str) -> Baked:
    """Name a student model that was trained on the inputs message alone."""
    if not isinstance(model, str) or not model.strip():
        raise TypeError(f"baked() needs a model name, not {model!r}")
    return Baked(model)


def render_value(value: Any) -> str:
    """An input (or a tool's result) as the model reads it: text as-is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable(value), ensure_ascii=False)


def inputs_message(inputs: Mapping[str, Any]) -> str:
    """The default user message: one ``name: value`` line per input."""
    return "\n".join(f"{name}: {render_value(value)}" for name, value in inputs.items())


def full_instruction(instruction: str, sections: Iterable[str]) -> str:
    """The instruction followed by the sections, joined by blank lines."""
    return "\n\n".join((instruction, *sections))


def drops_instruction(layout: Template | None, lm: str | None) -> str | None:
    """Why this layout would drop the instruction, or None if it writes it."""
    if isinstance(lm, Baked):
        return f"the baked student {str(lm)!r} reads only its trained inputs message"
    if layout is not None and not layout.writes_instruction():
        return "the function's Template never writes {instruction}"
    return None


def messages(
    layout: Template | None,
    lm: str | None,
    instruction: str,
    inputs: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]] = (),
) -> list[Mapping[str, Any]]:
    """The messages of a call, before any tool steps or re-asks; ``history`` (earlier turns) goes
    before its own user message, and when it is `Frozen` the result is too."""
    if type(history) is Frozen:  # every layout puts the history just before the call's own message
        own = messages(layout, lm, instruction, inputs)
        return frozen_messages(own[:-1]) + history + own[-1:]  # type: ignore[return-value]
    if isinstance(lm, Baked):
        return [*history, {"role": "user", "content": inputs_message(inputs)}]
    if layout is None:
        return [
            {"role": "system", "content": instruction},
            *history,
            {"role": "user", "content": inputs_message(inputs)},
        ]
    slots = {name: render_value(value) for name, value in inputs.items()}
    slots["instruction"] = instruction
    out: list[Mapping[str, Any]] = []
    if layout.system is not None:
        out.append({"role": "system", "content": layout.system.format_map(slots)})
    out.extend(history)
    out.append({"role": "user", "content": layout.user.format_map(slots)})
    return out

