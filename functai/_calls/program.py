"""What an AI function is to the code that runs it and uses it as a tool: `Program`.

The call pipeline (`run`, `asking`, `toolrun`, `toolasks`, `limits`) and the tools read an AI
function through `Program`; `functai._calls.function.AIFunction` is the one kind of it. Declared
here, below them, so none of them imports the front door that calls them. What a function and a
tool are both declared with — their effects, their named inputs — is checked here too.
"""

from __future__ import annotations

import inspect
import typing
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from .._layers import Layer
    from .template import Template

#: What a function or a tool may do: declared by ``@ai(effects=...)`` and ``@tool(effects=...)``.
EFFECTS = ("reads", "changes")


def check_effects(effects: str | None) -> None:
    if effects is not None and effects not in EFFECTS:
        raise ValueError(f"effects must be 'reads' or 'changes' (or left out), not {effects!r}")


def signature_of(fn: Callable[..., Any], what: str) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature and resolved annotations of a function whose inputs must be named (``what`` in errors)."""
    signature = inspect.signature(fn)
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"{what}: inputs must be named; {param} is not supported")
    try:
        hints = typing.get_type_hints(fn)
    except Exception as error:
        raise TypeError(f"{what}: cannot resolve its annotations: {error}") from error
    return signature, hints


class Program:
    """An AI function as the pipeline and the tools read it (see the module): made by ``@ai``."""

    #: The decorated function, its name and module, and its docstring (the instruction).
    fn: Callable[..., Any]
    name: str
    module: str
    instruction: str
    #: Its named inputs and their resolved annotations (``return``: the output's).
    signature: inspect.Signature
    _hints: dict[str, Any]
    input_names: tuple[str, ...]
    output_type: Any
    output_schema: dict[str, Any] | None
    layout: Template | None
    #: Its tools as given, and their names.
    tools: tuple[Any, ...]
    tool_names: tuple[str, ...]
    #: What ``@ai(effects=...)`` declared; None means derived from the tools.
    declared_effects: str | None
    #: Its own settings layer (``@ai(**settings)``).
    own: Layer
    #: A hash of what defines it, stable across processes.
    version: str
    #: The function as a tool of another, with what it was made from (kept by `functai._calls.tools`).
    _as_tool: tuple[tuple[Any, ...], Any]

    if TYPE_CHECKING:  # defined by `AIFunction`; declared here for a type checker only
        def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            """Inputs by name, in signature order, defaults filled in — as Python binds them."""

        def read_inputs(self, data: Mapping[str, Any], check: bool = True) -> dict[str, Any]:
            """Recorded inputs (JSON data) as the values a call takes."""

        def check_inputs(self, inputs: dict[str, Any]) -> None:
            """Refuse ``input-invalid`` for an input that does not fit its annotation."""

        def tool_schemas(self, offered: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
            """The JSON schemas of the tools offered to the model."""

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            """The value of a call (a tool's run, for an AI function used as one)."""

        async def acall(self, *args: Any, **kwargs: Any) -> Any:
            """The value of a call, awaited."""
