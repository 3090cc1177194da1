"""Provider-neutral requests and replies: nothing above a client knows a provider's format.
Messages are plain dicts, so a `request` hook can rewrite them with `attrs.evolve`:

- ``{"role": "system" | "user" | "assistant", "content": str}``
- an assistant turn that asked for tools:
  ``{"role": "assistant", "content": str | None, "tool_calls": [{"id", "name", "input"}]}``
- a tool's result: ``{"role": "tool", "tool_call_id": str, "name": str, "content": str}``
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import attrs

from .._errors import NonAnswerError

if TYPE_CHECKING:
    from .toolcall import ToolCall


def _frozen(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only view of one message or tool: a request is changed only by replacing it."""
    if type(item) is MappingProxyType:
        return item
    calls = item.get("tool_calls")
    if calls is not None:
        item = {**item, "tool_calls": tuple(_frozen(call) for call in calls)}
    return MappingProxyType(dict(item))


class Frozen(tuple):  # type: ignore[type-arg]
    """Messages already read-only, taken as they are: a long conversation's earlier messages
    are frozen once, when read, so a request costs what is new in it, not every turn shown."""

    __slots__ = ()

    def __add__(self, other: Sequence[Mapping[str, Any]]) -> "Frozen":  # type: ignore[override]
        return Frozen(tuple.__add__(self, frozen_messages(other)))


def frozen_messages(items: Sequence[Mapping[str, Any]]) -> Frozen:
    """``items`` as a `Frozen` tuple of read-only messages (as they are when already one)."""
    if type(items) is Frozen:
        return items
    return Frozen(map(_frozen, items))


def _view(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return value if type(value) is MappingProxyType else MappingProxyType(dict(value))


def _dict(value: Mapping[str, Any]) -> dict[str, Any]:
    return value if type(value) is dict else dict(value)


_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _tool_calls(items: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    if not items:
        return ()
    from .toolcall import ToolCall

    for item in items:
        if not isinstance(item, ToolCall):
            raise TypeError(f"tool_calls must hold ToolCall objects, got {type(item).__name__}")
    return tuple(items)


@attrs.frozen
class Request:
    """What is sent to a model, whatever the provider. Messages, tools and settings are read-only:
    a ``request`` hook returns a new request (``attrs.evolve``), which is recorded."""

    model: str
    messages: tuple[Mapping[str, Any], ...] = attrs.field(converter=frozen_messages)
    #: Tools offered, each ``{"name", "description", "parameters"}`` (a JSON schema).
    tools: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=frozen_messages)
    #: Model settings: temperature, max_tokens, top_p, seed, stop, …
    settings: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_view)
    #: JSON schema of the answer, or None for plain text.
    output_schema: dict[str, Any] | None = None


@attrs.frozen
class Reply:
    """What a model answered."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    #: Token counts when known: ``input_tokens``, ``output_tokens``, and where the server sends
    #: them ``total_tokens``, ``cached_tokens`` (input read from cache), ``reasoning_tokens``.
    usage: dict[str, int] = attrs.field(factory=dict, converter=_dict)
    finish_reason: str | None = None
    #: The model's own words when it declined to answer (OpenAI's ``message.refusal``).
    refusal: str | None = None
    #: What a reasoning model thought before answering, kept out of ``text``.
    reasoning: str | None = None
    #: The server's id for this response (``chatcmpl-…``), when sent; not compared, like ``model``.
    id: str | None = attrs.field(default=None, eq=False)
    #: The model that answered, as the server names it (it may differ from the one asked).
    model: str | None = attrs.field(default=None, eq=False)
    #: A plugin's answer: where it came from (at most 200 characters), kept beside it in the record.
    note: str | None = attrs.field(default=None, eq=False)


@runtime_checkable
class Client(Protocol):
    """Anything that can answer a `Request`. It may also offer ``async def acomplete(request)``, and
    ``stream``/``astream`` (the reply's text in pieces, then the whole `Reply`); without them, async
    calls run ``complete`` in a worker thread and a stream is the whole reply as one text event."""

    def complete(self, request: Request) -> Reply: ...


def non_answer(reply: Reply, typed: bool) -> NonAnswerError | None:
    """The error for a reply that is not an answer, or None. ``typed``: the function's output is
    not ``str``, so a cut reply cannot be read."""
    finish = reply.finish_reason
    if finish == "content_filter":
        return NonAnswerError(
            "the server's content filter stopped the reply (finish_reason 'content_filter'); asking again the "
            "same way is stopped again: change the inputs or the instruction, or see the provider's content policy",
            code="model-filtered",
        )
    if reply.tool_calls:
        return None
    if reply.refusal:
        return NonAnswerError(
            f"the model refused to answer: {reply.refusal!r}; asking again the same way gets the same refusal: "
            "change the request or the instruction",
            code="model-refused",
        )
    if reply.text is None or (not reply.text.strip() and reply.reasoning):
        if reply.reasoning:
            why = f"it only reasoned ({len(reply.reasoning)} characters of reasoning, no answer)"
            fix = "raise max_completion_tokens (or max_tokens) or lower reasoning_effort"
        else:
            why = "no text and no tool call"
            fix = "check the model and the server (some servers answer null when the prompt is too long)"
        if finish == "length":
            why += ", cut at the token limit"
        return NonAnswerError(f"the model's reply is empty: {why}; {fix}", code="model-empty")
    if finish == "length" and typed:
        return NonAnswerError(
            "the reply was cut at the token limit (finish_reason 'length') before the value was complete; "
            "raise max_completion_tokens (or max_tokens): asking again would cut it at the same place",
            code="model-truncated",
        )
    return None


def _kind(fits: Callable[[Any], bool], wanted: str) -> Callable[[str, Any], None]:
    """A check that a setting's value passes ``fits``, else a `TypeError` saying it must be ``wanted``."""

    def check(name: str, value: Any) -> None:
        if not fits(value):
            raise TypeError(f"{name} must be {wanted}, not {value!r}")

    return check


def whole(minimum: int) -> Callable[[str, Any], None]:
    """A check that a setting is an int of at least ``minimum``."""

    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {value!r}")
        if value < minimum:
            raise ValueError(f"{name} must be at least {minimum}, not {value}")

    return check


def _is_word(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


_number = _kind(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
_word = _kind(_is_word, "a non-empty string")
_stop = _kind(
    lambda v: isinstance(v, str) or (isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v)),
    "a string or a list of strings",
)
#: "auto", "none", "required", a tool's name, or the wire form (sent as is).
_tool_choice = _kind(
    lambda v: _is_word(v) or (isinstance(v, Mapping) and v.get("type") == "function"),
    "'auto', 'none', 'required', a tool's name, or {'type': 'function', 'function': {'name': ...}}",
)

#: Settings that are passed to the model with each request (``Request.settings``)
#: and that a ``before_call`` change may set, with the check each value must pass.
MODEL_SETTING_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "temperature": _number,
    "max_tokens": whole(1),
    "top_p": _number,
    "seed": whole(-(2**63)),
    "stop": _stop,
    "presence_penalty": _number,
    "frequency_penalty": _number,
    "reasoning_effort": _word,
    "max_completion_tokens": whole(1),
    "tool_choice": _tool_choice,
    "parallel_tool_calls": _kind(lambda v: isinstance(v, bool), "True or False"),
    "user": _word,
}

MODEL_SETTINGS: frozenset[str] = frozenset(MODEL_SETTING_CHECKS)

