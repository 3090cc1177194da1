"""A real HTTP server on 127.0.0.1 that speaks the chat-completions protocol.

Tests script its answers and read back what it received, so a client is
exercised over real sockets without a network or a model::

    with LoopbackServer() as server:
        server.script(Scripted(body=completion("hi")))
        client = OpenAIClient(base_url=server.url, api_key="k")
        ...
        assert server.requests[0].body["model"] == "m"

Any path is accepted; ``server.url`` ends in ``/v1`` like OpenAI's.
Import it from a test in ``tests/`` with ``from loopback import ...``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Callable, Iterator

__all__ = [
    "LoopbackServer",
    "Received",
    "Scripted",
    "completion",
    "chunks",
    "tool_call",
    "error_body",
    "refused_url",
]


@dataclass
class Scripted:
    """One scripted answer.

    ``body`` is sent as JSON unless it is ``bytes``/``str`` (sent raw).
    ``delay`` waits before answering (cut short when the server closes);
    ``drop`` closes the connection without any answer.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    #: Server-sent events instead of a body: each item is one ``data:`` event (JSON unless a str),
    #: sent as its own HTTP chunk, ``event_delay`` seconds apart, then ``data: [DONE]``.
    events: list[Any] | None = None
    event_delay: float = 0.0
    #: Break the connection after this many events (no [DONE], no final chunk).
    cut_after: int | None = None
    #: A stream's bytes exactly as given, each piece its own HTTP chunk (no ``data:`` or [DONE] added):
    #: for framing the SSE standard allows but ``events`` never writes.
    raw_events: list[str] | None = None


@dataclass(frozen=True)
class Received:
    """One request the server got. Header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # parsed JSON, or None if the body was not JSON


Responder = Callable[[Received], Scripted]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # dropped or timed-out connections are expected in tests


class LoopbackServer:
    """A threaded HTTP server answering from a script, recording every request.

    Answers come from `script` in order; when the script is empty, from
    ``default`` (a `Scripted` or a function of the `Received` request), else
    an HTTP 400 saying the script ran out (400 so clients do not retry it).
    """

    def __init__(self, default: Scripted | Responder | None = None) -> None:
        self.default = default
        self.requests: list[Received] = []
        self._script: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._connections = threading.Condition()
        #: Connections accepted so far, and those a client has not closed yet.
        self.connections = 0
        self.open_connections = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> LoopbackServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like real servers
            disable_nagle_algorithm = True  # else ~40 ms per answer (Nagle + delayed ACK)

            def setup(self) -> None:
                super().setup()
                owner._count(+1)

            def finish(self) -> None:  # the client closed the connection (or the server is closing)
                try:
                    super().finish()
                finally:
                    owner._count(-1)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                owner._handle(self)

            do_GET = do_PUT = do_DELETE = do_PATCH = do_POST  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # keep test output clean

        server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, name="loopback", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def _count(self, step: int) -> None:
        with self._connections:
            self.open_connections += step
            self.connections += max(step, 0)
            self._connections.notify_all()

    def wait_closed(self, timeout: float = 10.0) -> bool:
        """Wait until every connection clients opened is closed by them; False if some stay open.

        (The timeout is a guard against a hang, not a time limit: closed
        connections show at once.)"""
        with self._connections:
            return self._connections.wait_for(lambda: self.open_connections == 0, timeout)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT`` with no path."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """An OpenAI-style base URL: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root}/v1"

    # -- scripting ---------------------------------------------------------

    def script(self, *responses: Scripted) -> None:
        """Queue answers, given in order."""
        with self._lock:
            self._script.extend(responses)

    def reply(self, content: str | None = "ok", **kwargs: Any) -> None:
        """Queue one successful chat completion (see `completion` for kwargs)."""
        self.script(Scripted(body=completion(content, **kwargs)))

    @property
    def pending(self) -> int:
        """Scripted answers not yet used."""
        with self._lock:
            return len(self._script)

    def bodies(self) -> Iterator[Any]:
        """The JSON bodies received, in order."""
        return (r.body for r in list(self.requests))

    # -- serving -----------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        received = Received(
            method=handler.command,
            path=handler.path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            raw=raw,
            body=body,
        )
        with self._lock:
            self.requests.append(received)
            answer = self._script.popleft() if self._script else None
        if answer is None:
            default = self.default
            if callable(default):
                answer = default(received)
            elif default is not None:
                answer = default
            else:
                answer = Scripted(status=400, body=error_body("loopback: no scripted response left"))
        if answer.delay:
            self._closing.wait(answer.delay)
        if answer.drop:
            handler.close_connection = True
            try:
                handler.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if answer.events is not None or answer.raw_events is not None:
            self._send_events(handler, answer)
            return
        if isinstance(answer.body, bytes):
            payload, ctype = answer.body, "application/octet-stream"
        elif isinstance(answer.body, str):
            payload, ctype = answer.body.encode(), "text/plain; charset=utf-8"
        elif answer.body is None:
            payload, ctype = b"", "text/plain"
        else:
            payload, ctype = json.dumps(answer.body).encode(), "application/json"
        try:
            handler.send_response(answer.status)
            headers = {"Content-Type": ctype, **answer.headers}
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:
            pass  # the client gave up (timeout) before we answered


    def _send_events(self, handler: BaseHTTPRequestHandler, answer: Scripted) -> None:
        """An event stream over chunked transfer encoding, flushed event by event."""
        if answer.raw_events is not None:
            pieces = answer.raw_events
        else:
            events = [e if isinstance(e, str) else json.dumps(e) for e in answer.events or ()]
            pieces = [f"data: {data}\n\n" for data in [*events, "[DONE]"]]
        try:
            handler.send_response(answer.status)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Transfer-Encoding", "chunked")
            for name, value in answer.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            for n, piece in enumerate(pieces):
                if answer.cut_after is not None and n >= answer.cut_after:
                    handler.wfile.flush()
                    handler.close_connection = True
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    return
                if n and answer.event_delay:
                    self._closing.wait(answer.event_delay)
                data = piece.encode()
                handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass


# -- wire helpers ----------------------------------------------------------


def chunks(
    *texts: str,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Streamed chat-completion chunks: one per text delta, each tool call in two
    pieces (name, then its arguments split in half), the finish reason, then the
    usage in a last chunk with no choices (as ``stream_options.include_usage`` asks)."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": 0, "model": "loopback",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": text}) for text in texts]
    for index, call in enumerate(tool_calls or ()):
        arguments = json.dumps(call["arguments"])
        half = len(arguments) // 2
        out.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                          "function": {"name": call["name"], "arguments": arguments[:half]}}]}))
        out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}))
    out.append(chunk({}, finish_reason))
    if usage is not None:
        out.append({"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return out



def completion(
    content: str | None = "ok",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    model: str = "loopback",
    **message_fields: Any,
) -> dict[str, Any]:
    """A chat-completions response body with one choice.

    Extra keyword arguments go into the message as they are (``refusal``,
    ``reasoning_content`` …).
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    message.update(message_fields)
    body: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def tool_call(id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:  # noqa: A002
    """One wire tool call; a dict ``arguments`` is JSON-encoded, a string is sent as-is."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


def error_body(message: str, type: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:  # noqa: A002
    """OpenAI's error shape: ``{"error": {"message", "type", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


def refused_url() -> tuple[str, socket.socket]:
    """A base URL on which connections are refused, and the socket holding the port.

    The socket is bound but not listening, so the port stays ours (no race
    with other tests) and connecting is refused at once. Close it when done.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1", sock
