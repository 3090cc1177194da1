"""functai-otel: OpenTelemetry spans for functai calls, following the GenAI semantic conventions.

Installed, it is the plugin ``otel`` of every AI function call in the
environment. It uses ``opentelemetry-api`` only: the application configures
the SDK and its exporter, and without one every span is the API's no-op.

- ``functai.call <function>``: one span per AI function call. Its parent is
  the tool span of the enclosing call that ran it, else the application's
  current span. The call's plugin changes are its events.
- ``chat <model>``: one child span per model request (every attempt and
  tool step), with ``gen_ai.operation.name``, ``gen_ai.request.model``,
  ``gen_ai.response.finish_reasons`` and ``gen_ai.usage.*``.
- ``execute_tool <name>``: one child span per tool the model asked for,
  with ``gen_ai.tool.name``; AI functions the tool calls are its children.

Content — inputs, outputs, instructions, what a change said — is never put
on a span except the change itself, and only while the call's record keeps
content (``log_content``, on by default). Settings are never read, so no API
key can reach a span.
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from contextvars import ContextVar
from typing import Any, Callable, Mapping

import functai
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

__version__ = "0.1.0"

__all__ = ["otel", "plugin", "__version__"]

#: Model settings that have a ``gen_ai.request.*`` attribute of the same name.
_REQUEST_SETTINGS = ("temperature", "max_tokens", "top_p", "seed", "presence_penalty", "frequency_penalty")


class _Open:
    """A span this plugin started and has not ended yet."""

    __slots__ = ("kind", "key", "span", "token", "lm", "tools", "id", "end", "content")

    def __init__(self, kind: str, key: Any, span: Any, token: object, **extra: Any) -> None:
        self.kind = kind  # "call" or "tool"
        self.key = key  # a call's path; a tool's (path, invocation)
        self.span = span
        self.token = token
        self.lm: str | None = extra.get("lm")
        #: A call's tool spans, ended with what its record says about each once it ends.
        self.tools: list[_Open] = []
        self.id: str | None = extra.get("id")
        self.end: int | None = None
        self.content: bool = extra.get("content", True)


class _Tracing:
    """The handlers of one ``otel`` plugin, and the spans it has open in this context."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self._provider = tracer_provider
        self._tracer: Any = None
        self._open: ContextVar[tuple[_Open, ...]] = ContextVar(f"functai_otel_{id(self)}", default=())

    @property
    def tracer(self) -> Any:
        if self._tracer is None:  # the API's proxy tracer follows a provider set later
            self._tracer = trace.get_tracer("functai_otel", __version__, tracer_provider=self._provider)
        return self._tracer

    # -- the stack of open spans -----------------------------------------------------

    def _push(self, entry: _Open) -> None:
        self._open.set(self._open.get() + (entry,))

    def _settle(self, path: str) -> _Open | None:
        """End this call's tool spans left open (a tool that never ran); its open call span, if any."""
        stack = self._open.get()
        while stack and stack[-1].kind == "tool" and stack[-1].key[0].rpartition("/")[0] == path:
            tool = stack[-1]
            stack = stack[:-1]
            self._close_tool(tool, stack)
        self._open.set(stack)
        if stack and stack[-1].kind == "call" and stack[-1].key == path:
            return stack[-1]
        return None

    def _close_tool(self, tool: _Open, below: tuple[_Open, ...]) -> None:
        otel_context.detach(tool.token)
        tool.end = time.time_ns()
        if below and below[-1].kind == "call":
            below[-1].tools.append(tool)
        else:  # no call span to wait for: end it now
            tool.span.end(end_time=tool.end)

    # -- handlers ---------------------------------------------------------------------

    def before_call(self, call: Any) -> None:
        attributes: dict[str, Any] = {"functai.function": call.function, "functai.path": call.path}
        if call.lm:
            attributes["gen_ai.request.model"] = str(call.lm)
        if call.conversation is not None:
            attributes["gen_ai.conversation.id"] = call.conversation
            attributes["functai.turn"] = call.turn
        span = self.tracer.start_span(f"functai.call {call.function}", kind=SpanKind.INTERNAL, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        self._push(_Open("call", call.path, span, token, lm=str(call.lm) if call.lm else None))

    def reply(self, event: Any) -> None:
        call = self._settle(event.path)
        request, answer = event.request, event.reply
        now = time.time_ns()
        model, provider = request.model, None
        if call is not None and call.lm and "/" in call.lm:  # "openai/gpt-4.1": the provider, then the model
            provider = call.lm.partition("/")[0]
            model = model.removeprefix(provider + "/")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "functai.path": event.path,
            "functai.attempt": event.attempt,
        }
        if provider:
            attributes["gen_ai.provider.name"] = provider
        settings: Mapping[str, Any] = request.settings
        for name in _REQUEST_SETTINGS:
            if name in settings:
                attributes[f"gen_ai.request.{name}"] = settings[name]
        if answer.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = (answer.finish_reason,)
        _usage(attributes, answer.usage)
        if answer.tool_calls:
            attributes["functai.tool_calls"] = len(answer.tool_calls)
        span = self.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes,
                                      start_time=now - int(event.seconds * 1e9))
        span.end(end_time=now)

    def tool_call(self, tool: Any) -> None:
        self._settle(tool.path.rpartition("/")[0])
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.name,
            "gen_ai.tool.call.id": tool.id,
            "functai.path": tool.path,
            "functai.invocation": tool.invocation,
        }
        if tool.effects:
            attributes["functai.tool.effects"] = tool.effects
        span = self.tracer.start_span(f"execute_tool {tool.name}", kind=SpanKind.INTERNAL, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        content = tool.settings.get("log_content", True) is not False
        self._push(_Open("tool", (tool.path, tool.invocation), span, token, id=tool.id, content=content))

    def tool_result(self, result: Any) -> None:
        stack = self._open.get()
        if stack and stack[-1].kind == "tool" and stack[-1].key == (result.path, result.invocation):
            self._open.set(stack[:-1])
            self._close_tool(stack[-1], stack[:-1])

    def call_end(self, call: Any) -> None:
        entry = self._settle(call.path)
        record = call.record
        now = time.time_ns()
        if entry is None:  # the call ended before this plugin's before_call ran
            span = self.tracer.start_span(f"functai.call {call.function}", kind=SpanKind.INTERNAL,
                                          attributes={"functai.function": call.function, "functai.path": call.path},
                                          start_time=now - int((call.seconds or 0) * 1e9))
            tools: list[_Open] = []
        else:
            self._open.set(self._open.get()[:-1])
            otel_context.detach(entry.token)
            span, tools = entry.span, entry.tools
        attributes: dict[str, Any] = {
            "functai.call.id": record.id,
            "functai.function.version": record.version,
            "functai.attempts": record.attempts,
        }
        if record.model:
            attributes["gen_ai.request.model"] = record.model
        _usage(attributes, call.usage)
        span.set_attributes(attributes)
        for item in record.changes:
            data = {"functai.plugin": item["plugin"], "functai.plugin.version": item["version"],
                    "functai.hook": item["hook"]}
            if "change" in item:  # present only while the record keeps content
                data["functai.change"] = json.dumps(_plain(item["change"]), ensure_ascii=False, default=str)
            span.add_event("functai.change", data, timestamp=now)
        self._end_tools(span, tools, record.tool_calls, now)
        if call.error is not None:
            span.set_attribute("error.type", call.error)
            span.set_status(Status(StatusCode.ERROR, call.error))
        span.end(end_time=now)

    def _end_tools(self, parent: Any, tools: list[_Open], recorded: Any, now: int) -> None:
        """End the call's tool spans with what the record says; add spans for tool calls no hook saw."""
        by_id = {entry.get("id"): entry for entry in recorded}
        seen = set()
        for tool in tools:
            seen.add(tool.id)
            _tool_outcome(tool.span, by_id.get(tool.id), tool.content)
            tool.span.end(end_time=tool.end)
        context = trace.set_span_in_context(parent)
        for entry in recorded:  # blocked before this plugin ran, no such tool, or reused on resume
            if entry.get("id") in seen:
                continue
            span = self.tracer.start_span(
                f"execute_tool {entry.get('name')}", context=context, kind=SpanKind.INTERNAL, start_time=now,
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": str(entry.get("name")),
                            "gen_ai.tool.call.id": str(entry.get("id"))},
            )
            _tool_outcome(span, entry, not isinstance(entry.get("input"), Mapping) or "chars" not in entry["input"])
            span.end(end_time=now)


def _tool_outcome(span: Any, entry: Mapping[str, Any] | None, content: bool) -> None:
    if entry is None:
        return
    if entry.get("blocked"):
        span.set_attribute("functai.tool.blocked", entry["blocked"])
    if entry.get("refused"):
        span.set_attribute("functai.tool.refused", entry["refused"])
    error = entry.get("error")
    if error:
        kind = str(error).partition(":")[0]
        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, str(error) if content else kind))


def _usage(attributes: dict[str, Any], usage: Mapping[str, Any]) -> None:
    for key in ("input_tokens", "output_tokens"):
        if key in usage:
            attributes[f"gen_ai.usage.{key}"] = usage[key]


def _plain(value: Any) -> Any:
    """Read-only views (mapping proxies, tuples) as plain JSON data."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _never_raises(name: str, hook: str, handler: Callable[[Any], None]) -> Callable[[Any], None]:
    """In a changing hook a raising handler would stop the call (or block a tool):
    tracing must never do that, so a failure is reported and the call goes on."""

    @functools.wraps(handler)
    def guarded(event: Any) -> None:
        try:
            handler(event)
        except Exception as error:
            warnings.warn(f"functai: hook failed: plugin={name} hook={hook} error={type(error).__name__}: {error}",
                          RuntimeWarning, stacklevel=2)

    return guarded


def otel(tracer_provider: Any = None, *, name: str = "otel") -> functai.Plugin:
    """An ``otel`` plugin: spans from ``tracer_provider``, or from the global one when None.

    The installed plugin is ``otel()``; give your own (``plugins=[otel(provider)]``)
    to send one program's spans to a provider of its own.
    """
    tracing = _Tracing(tracer_provider)
    return functai.Plugin(
        name,
        version=__version__,
        description="OpenTelemetry spans for calls, model requests and tools (GenAI semantic conventions)",
        before_call=_never_raises(name, "before_call", tracing.before_call),
        reply=tracing.reply,
        tool_call=_never_raises(name, "tool_call", tracing.tool_call),
        tool_result=_never_raises(name, "tool_result", tracing.tool_result),
        call_end=tracing.call_end,
    )


#: The installed plugin (entry point ``otel`` in the group ``functai``).
plugin = otel()
