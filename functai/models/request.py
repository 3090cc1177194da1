"""Provider-neutral requests and replies.

A client turns a `Request` into its wire format and its answer into a
`Reply`; nothing above the client knows a provider's format. Messages are
plain dicts so a `request` hook can rewrite them with `attrs.evolve`:

- ``{"role": "system" | "user" | "assistant", "content": str}``
- an assistant turn that asked for tools:
  ``{"role": "assistant", "content": str | None, "tool_calls": [{"id", "name", "input"}]}``
- a tool's result: ``{"role": "tool", "tool_call_id": str, "name": str, "content": str}``
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import attrs


def _tuple(items: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    if type(items) is tuple:
        return items  # type: ignore[return-value]
    return tuple(items)  # type: ignore[arg-type]


def _dict(value: Mapping[str, Any]) -> dict[str, Any]:
    return value if type(value) is dict else dict(value)  # type: ignore[return-value]


@attrs.frozen
class ToolCall:
    """One tool the model asked for."""

    id: str
    name: str
    input: dict[str, Any] = attrs.field(factory=dict, converter=dict)


def _tool_calls(items: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    if not items:
        return ()
    for item in items:
        if not isinstance(item, ToolCall):
            raise TypeError(f"tool_calls must hold ToolCall objects, got {type(item).__name__}")
    return tuple(items)


@attrs.frozen
class Request:
    """What is sent to a model: the same shape whatever the provider."""

    model: str
    messages: tuple[dict[str, Any], ...] = attrs.field(converter=_tuple)
    #: Tools offered, each ``{"name", "description", "parameters"}`` (a JSON schema).
    tools: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_tuple)
    #: Model settings: temperature, max_tokens, top_p, seed, stop, …
    settings: dict[str, Any] = attrs.field(factory=dict, converter=_dict)
    #: JSON schema of the answer, or None for plain text.
    output_schema: dict[str, Any] | None = None


@attrs.frozen
class Reply:
    """What a model answered."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    #: Token counts: ``{"input_tokens": n, "output_tokens": n}`` when known.
    usage: dict[str, int] = attrs.field(factory=dict, converter=_dict)
    finish_reason: str | None = None


@runtime_checkable
class Client(Protocol):
    """Anything that can answer a `Request`."""

    def complete(self, request: Request) -> Reply: ...


#: Settings that are passed to the model with each request (``Request.settings``)
#: and that a ``before_call`` change may set.
MODEL_SETTINGS: frozenset[str] = frozenset(
    {
        "temperature",
        "max_tokens",
        "top_p",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
    }
)
