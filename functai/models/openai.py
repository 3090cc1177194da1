"""A client for OpenAI-compatible chat-completions servers, over httpx.

OpenAI, Ollama, vLLM, the llama.cpp server and LM Studio all answer
``POST {base_url}/chat/completions``, so one client covers them. It turns a
provider-neutral `Request` into that wire format and the answer into a
`Reply`; retries transient failures (429, 5xx, network) with backoff; and
turns everything else into a `ModelError` with a stable ``code``.

The API key is held in a redacting wrapper, sent only as a header of the
pooled `httpx.Client`, and scrubbed from any server text copied into an
error, so it never shows up in messages, reprs or tracebacks with locals.

This module imports httpx at the top; ``import functai`` must not import it.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from types import TracebackType
from typing import Any, Callable, Mapping

import httpx

from functai.errors import ModelError
from functai.models.request import Reply, Request, ToolCall

__all__ = ["OpenAIClient", "DEFAULT_BASE_URL"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Longest wait honoured from a server's ``Retry-After``, in seconds.
MAX_RETRY_AFTER = 30.0
#: Most characters of a server's error text copied into a message.
_EXCERPT = 300
#: Settings that cannot override the request's own fields.
_RESERVED = frozenset({"model", "messages"})


class _Secret:
    """A string that never shows itself in repr/str (tracebacks with locals, pretty printers)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class OpenAIClient:
    """Answers `Request`s through an OpenAI-compatible ``/chat/completions`` endpoint.

    One pooled `httpx.Client` is made on first use and shared by concurrent
    `complete` calls. Use as a context manager, or call `close`, to release it.
    """

    name: str

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        name: str = "openai",
        transport: httpx.BaseTransport | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        base_url_env: str = "OPENAI_BASE_URL",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        if backoff < 0:
            raise ValueError(f"backoff must be 0 or more, got {backoff}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        url = base_url or os.environ.get(base_url_env) or DEFAULT_BASE_URL
        #: Where requests go; ``/chat/completions`` is appended.
        self.base_url: str = url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        # An empty key means "none": local servers want no Authorization header.
        self._api_key: _Secret | None = _Secret(key) if key else None
        self.name = name
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._transport = transport
        self._sleep = sleep
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------

    def __repr__(self) -> str:
        return f"OpenAIClient(name={self.name!r}, base_url={_display_url(self.base_url)!r})"

    def __enter__(self) -> OpenAIClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connection; a later `complete` opens a new one."""
        with self._lock:
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def _client(self) -> httpx.Client:
        http = self._http
        if http is not None:
            return http
        with self._lock:
            if self._http is None:
                # httpx.Headers redacts Authorization in its repr (tracebacks with locals).
                headers = httpx.Headers({"Accept": "application/json"})
                if self._api_key is not None:
                    headers["Authorization"] = f"Bearer {self._api_key.reveal()}"
                self._http = httpx.Client(
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout),
                    transport=self._transport,
                    follow_redirects=False,
                )
            return self._http

    # -- the call ----------------------------------------------------------

    def complete(self, request: Request) -> Reply:
        """Send `request`, retrying transient failures, and read the reply."""
        body, wrapped = build_body(request)
        data = self._post(body)
        return self._read_reply(data, wrapped)

    def _post(self, body: dict[str, Any]) -> Any:
        url = f"{self.base_url}/chat/completions"
        attempts = self.max_retries + 1
        last_error: httpx.TransportError | None = None
        last_response: httpx.Response | None = None
        for attempt in range(attempts):
            if attempt:
                self._sleep(self._delay(attempt - 1, last_response))
            try:
                response = self._client().post(url, json=body)
            except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
                # A bad base URL will not get better by retrying.
                raise ModelError(
                    self._scrub(f"cannot reach {self._where()}: invalid base URL ({exc})"),
                    code="model-unreachable",
                ) from None
            except httpx.TransportError as exc:
                last_error, last_response = exc, None
                continue
            if response.is_success:
                return self._json(response)
            if response.status_code == 429 or response.status_code >= 500:
                last_error, last_response = None, response
                continue
            raise ModelError(
                f"{self._where()} answered HTTP {response.status_code}: {self._error_text(response)}",
                code="model-http",
                status=response.status_code,
            )
        if last_response is not None:
            status = last_response.status_code
            raise ModelError(
                f"gave up on {self._where()} after {attempts} attempt{'s' if attempts != 1 else ''}: "
                f"last status HTTP {status}: {self._error_text(last_response)}",
                code="model-http",
                status=status,
            )
        assert last_error is not None
        kind = "timed out" if isinstance(last_error, httpx.TimeoutException) else "connection failed"
        detail = str(last_error) or type(last_error).__name__
        raise ModelError(
            self._scrub(
                f"{self._where()} is unreachable ({kind}) after {attempts} "
                f"attempt{'s' if attempts != 1 else ''}: {type(last_error).__name__}: {detail}"
            ),
            code="model-unreachable",
        ) from None

    def _delay(self, retry: int, response: httpx.Response | None) -> float:
        """Seconds to wait before retry number ``retry + 1``: Retry-After, else exponential."""
        if response is not None:
            hinted = _retry_after(response.headers)
            if hinted is not None:
                return hinted
        return self.backoff * (2**retry)

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise ModelError(
                f"{self._where()} answered HTTP {response.status_code} with a body that is not JSON: "
                f"{self._excerpt(response.text)!r}",
                code="model-protocol",
                status=response.status_code,
            ) from None

    def _read_reply(self, data: Any, wrapped: bool) -> Reply:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError(
                f"{self._where()} answered without choices: {self._excerpt(json.dumps(data))!r}",
                code="model-protocol",
            )
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ModelError(
                f"{self._where()} answered a choice without a message: {self._excerpt(json.dumps(choice))!r}",
                code="model-protocol",
            )
        text = _content_text(message.get("content"))
        if wrapped and text is not None:
            text = unwrap_value(text)
        tool_calls = tuple(self._tool_call(i, item) for i, item in enumerate(message.get("tool_calls") or ()))
        usage: dict[str, int] = {}
        raw_usage = data.get("usage")
        if isinstance(raw_usage, dict):
            for wire, ours in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
                value = raw_usage.get(wire)
                if isinstance(value, int) and not isinstance(value, bool):
                    usage[ours] = value
        finish = choice.get("finish_reason")
        return Reply(
            text=text,
            tool_calls=tool_calls,
            usage=usage,
            finish_reason=finish if isinstance(finish, str) else None,
        )

    def _tool_call(self, index: int, item: Any) -> ToolCall:
        function = item.get("function") if isinstance(item, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ModelError(
                f"{self._where()} answered tool call #{index} without a function name",
                code="model-protocol",
            )
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send the object itself
            parsed: Any = arguments
        elif arguments is None or (isinstance(arguments, str) and not arguments.strip()):
            parsed = {}  # a tool without parameters, sent as "" by some servers
        else:
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else None
            except ValueError:
                parsed = None
        if not isinstance(parsed, dict):
            raise ModelError(
                f"{self._where()} called tool {name!r} with arguments that are not a JSON object: "
                f"{self._excerpt(str(arguments))!r}",
                code="model-protocol",
            )
        call_id = item.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{index}"  # llama.cpp and friends may omit ids
        return ToolCall(id=call_id, name=name, input=parsed)

    # -- safe messages -----------------------------------------------------

    def _where(self) -> str:
        return f"{self.name} at {_display_url(self.base_url)}"

    def _scrub(self, text: str) -> str:
        """Remove the API key from text a server (or an exception) gave us."""
        if self._api_key is not None:
            text = text.replace(self._api_key.reveal(), "***")
        return text

    def _excerpt(self, text: str) -> str:
        # Scrub before cutting, so a cut cannot leave part of the key behind.
        text = " ".join(self._scrub(text).split())
        return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"

    def _error_text(self, response: httpx.Response) -> str:
        """The server's own error message (OpenAI shape and common variants), else an excerpt."""
        message: Any = None
        try:
            data = response.json()
        except ValueError:
            data = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                message = error.get("message")
            elif isinstance(error, str):
                message = error
            if not isinstance(message, str):
                message = data.get("message") or data.get("detail")
        if not isinstance(message, str) or not message.strip():
            message = response.text or response.reason_phrase or "(empty body)"
        return self._excerpt(message)


# -- wire format (pure functions, reusable and easy to test) ---------------


def build_body(request: Request) -> tuple[dict[str, Any], bool]:
    """The chat-completions JSON body for `request`, and whether the answer schema was wrapped.

    Settings pass through as-is (after ``model`` and ``messages``, which they
    cannot override); ``tools`` and ``response_format`` come from the request.
    """
    body: dict[str, Any] = {"model": request.model, "messages": [wire_message(m) for m in request.messages]}
    for key, value in request.settings.items():
        if key not in _RESERVED:
            body[key] = value
    if request.tools:
        body["tools"] = [wire_tool(tool) for tool in request.tools]
    wrapped = False
    if request.output_schema is not None:
        schema, wrapped = wrap_schema(request.output_schema)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema, "strict": False},
        }
    return body, wrapped


def wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One neutral message in OpenAI's format; unknown roles pass through unchanged."""
    role = message.get("role")
    if role == "tool":
        content = message.get("content")
        return {
            "role": "tool",
            "tool_call_id": message.get("tool_call_id"),
            "content": content if isinstance(content, str) else json.dumps(content),
        }
    if role == "assistant" and message.get("tool_calls"):
        return {
            "role": "assistant",
            "content": message.get("content"),
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(dict(call.get("input") or {}))},
                }
                for call in message["tool_calls"]
            ],
        }
    return dict(message)


def wire_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A neutral ``{"name", "description", "parameters"}`` tool as an OpenAI function tool."""
    function: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def wrap_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """Providers want an object at the top: wrap any other schema as ``{"value": schema}``.

    ``$defs``/``definitions`` move up to the wrapper so ``#/$defs/...`` refs still resolve.
    """
    if schema.get("type") == "object":
        return dict(schema), False
    inner = dict(schema)
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {"value": inner},
        "required": ["value"],
        "additionalProperties": False,
    }
    for key in ("$defs", "definitions"):
        if key in inner:
            wrapper[key] = inner.pop(key)
    return wrapper, True


def unwrap_value(text: str) -> str:
    """The bare JSON of ``{"value": ...}``; the text unchanged if it is not that shape."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and "value" in data:
        return json.dumps(data["value"], ensure_ascii=False)
    return text


def _content_text(content: Any) -> str | None:
    """Message content as text: a string, or the text parts of a list of parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(parts) if parts else None
    return str(content)


def _retry_after(headers: httpx.Headers) -> float | None:
    """A numeric ``retry-after-ms`` / ``Retry-After`` in seconds, capped; None if absent or a date."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) / scale
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, MAX_RETRY_AFTER)
    return None


def _display_url(url: str) -> str:
    """The URL without any user:password part, for messages and repr."""
    try:
        parsed = httpx.URL(url)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given
        return url
    if parsed.userinfo:
        return str(parsed.copy_with(username=None, password=None))
    return url
