"""functai-otel: OpenTelemetry spans for functai calls, following the GenAI semantic conventions.

Installed, it is the plugin ``otel`` of every AI function call in the
environment. It uses ``opentelemetry-api`` only: the application configures
the SDK and its exporter. While no tracer provider is set (or a no-op one),
the plugin sits every call out (`functai.Plugin`'s ``active`` check): it
costs a call one identity comparison, and starts tracing with the first call
after a provider is set.

- ``functai.call <function>``: one span per AI function call. Its parent is
  the tool span of the enclosing call that ran it, else the application's
  current span. The call's plugin changes are its events.
- ``chat <model>``: one child span per model request (every attempt and
  tool step, and a request that failed), with the request's model, settings
  and server, and the response's id, model, finish reason and token counts.
  It is the current span while the request is sent, so an instrumented HTTP
  client's span (and its ``traceparent``) is its child.
- ``execute_tool <name>``: one child span per tool the model asked for,
  with ``gen_ai.tool.name``; AI functions the tool calls are its children.

Content — inputs, outputs, instructions, what a change said — is put on a
span only while the call's record keeps content (``log_content``, on by
default): the change itself, always; prompts and replies on ``chat`` spans
only when asked for (`functai_otel.content`). Settings other than the
model's are never read, so no API key can reach a span.
"""

from __future__ import annotations

import json
import logging
import os
import time
from contextvars import ContextVar
from typing import Any, Mapping
from urllib.parse import urlsplit

import functai
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .content import asked_by_environment, content_attributes
from .names import (
    AGENT_NAME, CALL_ID, CALL_PATH, CONVERSATION, ERROR_TYPE, FINISH_REASONS, FUNCTION, METRIC_ATTRIBUTES, MODEL,
    OPERATION, OUTPUT_TYPE, PROVIDER, RESPONSE_ID, RESPONSE_MODEL, SERVER_ADDRESS, SERVER_PORT, TOOL_CALL_ID,
    TOOL_NAME, TOOL_TYPE, USAGE, provider_name, setting_attributes,
)

__version__ = "0.1.0"
#: Where this plugin says what it survived: under functai's logger, silent until the application
#: configures logging.
log = logging.getLogger("functai.otel")

__all__ = ["otel", "plugin", "__version__"]

_INTERNAL, _CLIENT = SpanKind.INTERNAL, SpanKind.CLIENT
_time_ns = time.time_ns
#: Stands for "no provider looked at yet" (None is a provider state: none set).
_UNSEEN = object()


class _Call:
    """A call span this plugin started and has not ended yet: the top of a stack of open spans."""

    __slots__ = ("path", "span", "token", "below", "prefix", "model", "provider", "tools", "conversation", "turn",
                 "chat", "requests")

    def __init__(self, call: Any, span: Any, token: Any, below: Any, models: tuple[str, str | None, str | None]
                 ) -> None:
        self.path = call.path
        self.span = span
        self.token = token
        self.below = below
        #: What the model name sent starts with when the call names its provider ("openai/"),
        #: the model, the provider's name in the conventions (`_model_of`).
        self.prefix, self.model, self.provider = models
        #: The conversation the call is a turn of, or None: its chat spans say so too; and the turn.
        self.conversation, self.turn = call.conversation, call.turn
        #: The chat span of the request being sent, its context token and the attributes it started
        #: with (None between requests).
        self.chat: tuple[Any, Any, dict[str, Any]] | None = None
        #: Requests this plugin saw start: a failed one's ``functai.attempt``.
        self.requests = 0
        #: The call's tool spans, ended with what its record says about each once it ends.
        self.tools: list[_Tool] = []


class _Tool:
    """A tool span this plugin started and has not ended yet."""

    __slots__ = ("path", "invocation", "call_path", "span", "token", "below", "id", "end", "content")

    def __init__(self, tool: Any, span: Any, token: Any, below: Any) -> None:
        self.path = tool.path
        self.invocation = tool.invocation
        self.call_path = tool.path.rpartition("/")[0]
        self.span = span
        self.token = token
        self.below = below
        self.id = tool.id
        self.end = 0
        self.content = tool.settings.get("log_content", True) is not False


_models: dict[Any, tuple[str, str | None, str | None]] = {}


def _model_of(lm: Any) -> tuple[str, str | None, str | None]:
    """``"openai/gpt-4.1"`` → ("openai/", "gpt-4.1", "openai"): the prefix the model name sent may carry,
    the model, the provider's name in the conventions. Kept in `_models` (read there first) once made."""
    text = str(lm) if lm else ""
    provider, slash, model = text.partition("/")
    found = (provider + "/", model, provider_name(provider)) if slash else ("", text or None, None)
    if len(_models) < 256:
        _models[lm] = found
    return found


#: Where the API keeps the global tracer provider (None while none is set), read as it is:
#: ``trace.get_tracer_provider()`` reads ``os.environ`` on every call while none is set (about
#: 1.5 µs, most of what an idle plugin may cost a call). An API without it is asked the public way.
_GLOBAL = "_TRACER_PROVIDER" if hasattr(trace, "_TRACER_PROVIDER") else ""


class _Tracing:
    """The handlers of one ``otel`` plugin, and the spans it has open in this context."""

    def __init__(self, name: str, tracer_provider: Any = None, meter_provider: Any = None,
                 capture_content: bool | None = None) -> None:
        self._name = name
        self._given = tracer_provider
        #: Whether prompts and replies go on ``chat`` spans (None: as the environment says, read with each provider).
        self._capture_given = capture_content
        self._capture = bool(capture_content)
        self._meter_provider = meter_provider
        #: The GenAI client metrics (token usage, operation duration): made with the first reply.
        self._metrics: tuple[Any, Any] | None = None
        self._seen: Any = _UNSEEN
        self._tracer: Any = None
        self._open: ContextVar[Any] = ContextVar(f"functai_otel_{id(self)}", default=None)

    # -- whether anyone listens -------------------------------------------------------

    def listening(self) -> bool:
        """The plugin's ``active`` check: True while its provider makes real spans.

        Decided once per provider: each call compares the provider with the one
        last decided on, so a provider set later is picked up by the next call.
        """
        provider = self._given
        if provider is None:  # the global one (see `_GLOBAL`)
            provider = getattr(trace, _GLOBAL) if _GLOBAL else trace.get_tracer_provider()
        if provider is self._seen:
            return self._tracer is not None
        self._tracer = tracer = self._tracer_of(provider)
        self._capture = asked_by_environment() if self._capture_given is None else self._capture_given
        self._seen = provider  # after the tracer: a thread that sees this provider sees its tracer
        return tracer is not None

    def _tracer_of(self, provider: Any) -> Any:
        """The tracer to make spans with, or None when ``provider`` makes none."""
        if provider is None and "OTEL_PYTHON_TRACER_PROVIDER" in os.environ:
            provider = trace.get_tracer_provider()  # named by the environment: the API loads and sets it
        if provider is None or isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return None
        try:
            tracer = provider.get_tracer("functai_otel", __version__)
        except Exception as error:  # tracing must never stop a call: report it, and sit calls out
            log.warning("plugin=%s cannot trace: the tracer provider failed: %s: %s", self._name,
                        type(error).__name__, error)
            return None
        return None if isinstance(tracer, trace.NoOpTracer) else tracer  # the SDK switched off gives a no-op one

    # -- the stack of open spans -----------------------------------------------------

    def _settle(self, path: str) -> _Call | None:
        """End this call's tool spans left open (a tool that never ran); its open call span, if any."""
        top = self._open.get()
        if top.__class__ is _Tool and top.call_path == path:
            while top.__class__ is _Tool and top.call_path == path:
                self._close_tool(top)
                top = top.below
            self._open.set(top)
        return top if top.__class__ is _Call and top.path == path else None

    def _close_tool(self, tool: _Tool) -> None:
        otel_context.detach(tool.token)
        tool.end = _time_ns()
        below = tool.below
        if below.__class__ is _Call:
            below.tools.append(tool)
        else:  # no call span to wait for: end it now
            tool.span.end(end_time=tool.end)

    # -- handlers ---------------------------------------------------------------------

    def before_call(self, call: Any) -> None:
        try:
            models = _models.get(call.lm) or _model_of(call.lm)
            # an AI function is an agent in the GenAI conventions: an instruction, maybe tools, its own model calls
            attributes: dict[str, Any] = {OPERATION: "invoke_agent", AGENT_NAME: call.function,
                                          FUNCTION: call.function, CALL_PATH: call.path}
            if models[1]:
                attributes[MODEL] = models[1]
            if models[2]:
                attributes[PROVIDER] = models[2]
            if call.conversation is not None:
                attributes[CONVERSATION] = call.conversation
                attributes["functai.turn"] = call.turn
            span = self._tracer.start_span(f"functai.call {call.function}", kind=_INTERNAL, attributes=attributes)
            token = otel_context.attach(trace.set_span_in_context(span))
            self._open.set(_Call(call, span, token, self._open.get(), models))
        except Exception as error:  # in a changing hook a raise would stop the call: report, go on
            self._failed("before_call", error)

    def _call_of(self, path: str) -> _Call | None:
        call = self._open.get()
        return call if call.__class__ is _Call and call.path == path else self._settle(path)

    def request(self, event: Any) -> None:
        """Start the request's chat span, current while it is sent."""
        try:
            call = self._call_of(event.path)
            if call is None:
                return
            if call.chat is not None:  # the request before it failed, and another plugin retried it
                self._end_chat(call, "_OTHER", _time_ns())
            request = event.request
            attributes = self._chat_attributes(call, request.model, request.settings, request.output_schema is not None)
            call.requests += 1
            attributes["functai.attempt"] = call.requests
            _server_attributes(attributes, _server_of(event.endpoint.url))
            model = attributes.get(MODEL)
            span = self._tracer.start_span(f"chat {model}" if model else "chat", kind=_CLIENT, attributes=attributes)
            call.chat = (span, otel_context.attach(trace.set_span_in_context(span)), attributes)
        except Exception as error:
            self._failed("request", error)

    def model_error(self, event: Any) -> None:
        try:
            call = self._call_of(event.path)
            if call is not None and call.chat is not None:
                self._end_chat(call, event.error.code, _time_ns())
        except Exception as error:  # in a hook that recovers a raise would stop the call: report, go on
            self._failed("model_error", error)

    def _end_chat(self, call: _Call, error: str, now: int) -> None:
        """End the chat span of a request that got no reply, as failed with ``error``."""
        span, token, _ = call.chat  # type: ignore[misc]
        call.chat = None
        otel_context.detach(token)
        span.set_attribute(ERROR_TYPE, error)
        span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=now)

    def reply(self, event: Any) -> None:
        try:
            self._reply(event)
        except Exception as error:  # in a hook that replaces a raise would stop the call: report, go on
            self._failed("reply", error)

    def _reply(self, event: Any) -> None:
        call = self._call_of(event.path)
        now = _time_ns()
        request, answer = event.request, event.reply
        opened = call.chat if call is not None else None
        if opened is not None:  # started when the request was sent: what the reply adds
            span, token, started = opened
            call.chat = None  # type: ignore[union-attr]
            otel_context.detach(token)
            attributes: dict[str, Any] = {}
        else:  # its request was answered before this plugin heard it: the span covers the client's time
            started = self._chat_attributes(call, request.model, request.settings, request.output_schema is not None)
            attributes = started
        if event.server is not None and event.server[0] != started.get(SERVER_ADDRESS):
            _server_attributes(attributes, event.server)
        if event.attempt != started.get("functai.attempt"):
            attributes["functai.attempt"] = event.attempt
        if event.answered:  # a plugin answered instead of the model: the span says which
            attributes["functai.answered_by"] = event.answered
        if event.recorded:  # read back by a resumed turn: paid for, and traced, when it was asked
            attributes["functai.recorded"] = True
        paid = not event.answered and not event.recorded
        if answer.finish_reason:
            attributes[FINISH_REASONS] = (answer.finish_reason,)
        for key, count in answer.usage.items() if paid else ():
            name = USAGE.get(key)
            if name is not None:
                attributes[name] = count
        if answer.id:
            attributes[RESPONSE_ID] = answer.id
        if answer.model:
            attributes[RESPONSE_MODEL] = answer.model
        if answer.tool_calls:
            attributes["functai.tool_calls"] = len(answer.tool_calls)
        if self._capture and event.log_content:
            attributes.update(content_attributes(request.messages, answer))
        if opened is not None:
            span.set_attributes(attributes)
        else:
            model = attributes.get(MODEL)
            span = self._tracer.start_span(f"chat {model}" if model else "chat", kind=_CLIENT, attributes=attributes,
                                           start_time=now - int((event.seconds or 0) * 1e9))
        span.end(end_time=now)
        if paid:  # a model was asked now: what it took, and cost
            self._measure({**started, **attributes}, event.seconds, answer.usage)

    def _measure(self, span: Mapping[str, Any], seconds: float | None, usage: Mapping[str, Any]) -> None:
        """``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage`` for one model request."""
        if self._metrics is None:
            meter = (self._meter_provider or metrics.get_meter_provider()).get_meter("functai_otel", __version__)
            self._metrics = (
                meter.create_histogram("gen_ai.client.operation.duration", unit="s",
                                       description="GenAI operation duration"),
                meter.create_histogram("gen_ai.client.token.usage", unit="{token}",
                                       description="Number of input and output tokens used"),
            )
        duration, tokens = self._metrics
        attributes = {key: span[key] for key in METRIC_ATTRIBUTES if key in span}
        if seconds is not None:
            duration.record(seconds, attributes)
        for kind, key in (("input", "input_tokens"), ("output", "output_tokens")):
            if isinstance(usage.get(key), int):
                tokens.record(usage[key], {**attributes, "gen_ai.token.type": kind})

    def _chat_attributes(self, call: _Call | None, model: str | None, settings: Mapping[str, Any],
                         json_output: bool) -> dict[str, Any]:
        """What a ``chat`` span says of its request."""
        attributes: dict[str, Any] = {OPERATION: "chat", OUTPUT_TYPE: "json" if json_output else "text"}
        if call is not None:
            attributes[CALL_PATH] = call.path
            if call.conversation is not None:
                attributes[CONVERSATION] = call.conversation
            if call.provider:
                attributes[PROVIDER] = call.provider
            if model and call.prefix and model.startswith(call.prefix):
                model = model[len(call.prefix):]
        if model:
            attributes[MODEL] = model
        if settings:
            setting_attributes(attributes, settings)
        return attributes

    def tool_call(self, tool: Any) -> None:
        try:
            top = self._open.get()
            if top.__class__ is _Tool and top.path == tool.path and top.invocation == tool.invocation:
                return  # asked again, with the answer a person gave at the stream: its span goes on
            self._settle(tool.path.rpartition("/")[0])
            attributes: dict[str, Any] = {
                OPERATION: "execute_tool", TOOL_NAME: tool.name, TOOL_CALL_ID: tool.id, TOOL_TYPE: "function",
                CALL_PATH: tool.path, "functai.invocation": tool.invocation,
            }
            if tool.effects:
                attributes["functai.tool.effects"] = tool.effects
            span = self._tracer.start_span(f"execute_tool {tool.name}", kind=_INTERNAL, attributes=attributes)
            token = otel_context.attach(trace.set_span_in_context(span))
            self._open.set(_Tool(tool, span, token, self._open.get()))
        except Exception as error:
            self._failed("tool_call", error)

    def tool_result(self, result: Any) -> None:
        try:
            top = self._open.get()
            if top.__class__ is _Tool and top.path == result.path and top.invocation == result.invocation:
                self._open.set(top.below)
                self._close_tool(top)
        except Exception as error:
            self._failed("tool_result", error)

    def call_end(self, event: Any) -> None:
        call = self._call_of(event.path)
        now = _time_ns()
        if call is None:  # the call ended before this plugin's before_call ran
            span = self._tracer.start_span(f"functai.call {event.function}", kind=_INTERNAL,
                                           attributes={FUNCTION: event.function, CALL_PATH: event.path},
                                           start_time=now - int((event.seconds or 0) * 1e9))
            tools: list[_Tool] = []
        else:
            if call.chat is not None:  # its last request got no reply (first: contexts are left in order)
                self._end_chat(call, event.error or "exception", now)
            self._open.set(call.below)
            otel_context.detach(call.token)
            span, tools = call.span, call.tools
        try:
            self._ended(span, tools, event, call, now)
        finally:  # a record this plugin could not read (edited by hand) still ends the span
            span.end(end_time=now)

    def _ended(self, span: Any, tools: list[_Tool], event: Any, call: _Call | None, now: int) -> None:
        """What the call's record adds to its span, and its tool spans ended."""
        record = event.record
        attempts = record.attempts
        attributes: dict[str, Any] = {CALL_ID: record.id, "functai.function.version": record.version,
                                      "functai.attempts": attempts}
        model = call.model if call is not None else None
        if not model and record.model:  # no model name before the call (a client given): the record's
            model = attributes[MODEL] = (_models.get(record.model) or _model_of(record.model))[1]
        for key, count in event.usage.items():
            name = USAGE.get(key)
            if name is not None:
                attributes[name] = count
        span.set_attributes(attributes)
        changes = record.changes
        if changes:
            for item in changes:
                data = {"functai.plugin": str(item.get("plugin")), "functai.plugin.version": str(item.get("version")),
                        "functai.hook": str(item.get("hook"))}
                if "change" in item:  # present only while the record keeps content
                    data["functai.change"] = json.dumps(_plain(item["change"]), ensure_ascii=False, default=str)
                span.add_event("functai.change", data, timestamp=now)
        recorded = record.tool_calls
        if tools or recorded:
            self._end_tools(span, tools, recorded, now)
        if event.error is not None:
            span.set_attribute(ERROR_TYPE, event.error)
            span.set_status(Status(StatusCode.ERROR, event.error))

    def turn_wait(self, event: Any) -> None:
        """The turn waits for a person: its calls never reach ``call_end`` here (a resume, maybe in
        another process, traces the rest). Their spans end now, and leave the context as it was."""
        try:
            top = self._open.get()
            while top.__class__ is _Tool or (top.__class__ is _Call and top.turn == event.turn):
                now = _time_ns()
                if isinstance(top, _Tool):
                    self._close_tool(top)
                else:
                    if top.chat is not None:
                        self._end_chat(top, "waiting", now)
                    otel_context.detach(top.token)
                    for tool in top.tools:
                        tool.span.end(end_time=tool.end)
                    top.span.set_attribute("functai.turn.state", "waiting")
                    top.span.end(end_time=now)
                top = top.below
                self._open.set(top)
        except Exception as error:
            self._failed("turn_wait", error)

    def _end_tools(self, parent: Any, tools: list[_Tool], recorded: Any, now: int) -> None:
        """End the call's tool spans with what the record says; add spans for tool calls no hook saw."""
        by_id = {entry.get("id"): entry for entry in recorded}
        seen = set()
        for tool in tools:
            seen.add(tool.id)
            _tool_outcome(tool.span, by_id.get(tool.id), tool.content)
            tool.span.end(end_time=tool.end)
        context = None
        for entry in recorded:  # blocked before this plugin ran, no such tool, or reused on resume
            if entry.get("id") in seen:
                continue
            context = context or trace.set_span_in_context(parent)
            name = str(entry.get("name"))
            span = self._tracer.start_span(
                f"execute_tool {name}", context=context, kind=_INTERNAL, start_time=now,
                attributes={OPERATION: "execute_tool", TOOL_NAME: name, TOOL_CALL_ID: str(entry.get("id")),
                            TOOL_TYPE: "function"},
            )
            _tool_outcome(span, entry, not isinstance(entry.get("input"), Mapping) or "chars" not in entry["input"])
            span.end(end_time=now)

    def _failed(self, hook: str, error: Exception) -> None:
        log.warning("hook failed: plugin=%s hook=%s error=%s: %s", self._name, hook, type(error).__name__, error)


#: The port a URL without one is sent to.
_DEFAULT_PORTS = {"https": 443, "http": 80}


def _server_of(url: str | None) -> tuple[str, int | None] | None:
    """``(host, port)`` of where a request goes (never its user or password), or None."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        return (parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme)) if parts.hostname else None
    except ValueError:  # a port that is not a number
        return None


def _server_attributes(attributes: dict[str, Any], server: tuple[str, int | None] | None) -> None:
    if server is not None:
        attributes[SERVER_ADDRESS] = server[0]
        if server[1] is not None:
            attributes[SERVER_PORT] = server[1]


def _tool_outcome(span: Any, entry: Mapping[str, Any] | None, content: bool) -> None:
    if entry is None:
        return
    if entry.get("blocked"):
        span.set_attribute("functai.tool.blocked", entry["blocked"])
    if entry.get("refused"):
        span.set_attribute("functai.tool.refused", entry["refused"])
    error = entry.get("error") or (None if "output" in entry else "interrupted")  # no output: it never ended
    if error:  # "<code or type>: <message>", or without content {"code", "chars"}
        kind = str(error["code"] if isinstance(error, Mapping) else error).partition(":")[0]
        span.set_attribute(ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, str(error) if content else kind))


def _plain(value: Any) -> Any:
    """Read-only views (mapping proxies, tuples) as plain JSON data."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def otel(tracer_provider: Any = None, *, meter_provider: Any = None, capture_content: bool | None = None,
         name: str = "otel") -> functai.Plugin:
    """An ``otel`` plugin: spans from ``tracer_provider``, or from the global one when None; while
    it traces, the GenAI client metrics from ``meter_provider`` (or the global one). With
    ``capture_content`` (None: as ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says),
    each ``chat`` span holds its prompt and reply, where the call's record keeps content.

    The installed plugin is ``otel()``; give your own (``plugins=[otel(provider)]``)
    to send one program's spans to a provider of its own.
    """
    tracing = _Tracing(name, tracer_provider, meter_provider, capture_content)
    return functai.Plugin(
        name,
        version=__version__,
        description="OpenTelemetry spans for calls, model requests and tools (GenAI semantic conventions)",
        active=tracing.listening,
        before_call=tracing.before_call,
        request=tracing.request,
        model_error=tracing.model_error,
        reply=tracing.reply,
        tool_call=tracing.tool_call,
        tool_result=tracing.tool_result,
        call_end=tracing.call_end,
        turn_wait=tracing.turn_wait,
    )


#: The installed plugin (entry point ``otel`` in the group ``functai``).
plugin = otel()
