"""A lean asyncio connection pool for the OpenAI-compatible client's `httpx.AsyncClient`.

Kept because httpcore's pool re-examines every connection and queued request
whenever a request starts or ends, which triples the CPU of 200 concurrent
``acall``s (docs/performance.md). It can go once httpcore assigns queued
requests in one pass (encode/httpcore#1035). Each connection is still an
`httpcore.AsyncHTTPConnection`; the limits mean what `httpx.Limits` means.
It serves asyncio only.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections import deque
from typing import Any, AsyncIterator

import httpcore
import httpx

__all__ = ["LeanTransport", "lean_transport"]

#: httpcore's errors, most specific first, with httpx's of the same name.
_ERRORS = tuple(
    (getattr(httpcore, name), getattr(httpx, name))
    for name in ("ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
                 "ConnectError", "ReadError", "WriteError", "NetworkError", "ProxyError", "UnsupportedProtocol",
                 "LocalProtocolError", "RemoteProtocolError", "ProtocolError")
)

def _mapped(error: Exception) -> Exception:
    for theirs, ours in _ERRORS:
        if isinstance(error, theirs):
            mapped = ours(str(error))
            mapped.__cause__ = error
            return mapped
    return error


def lean_transport(limits: httpx.Limits | None = None) -> httpx.AsyncBaseTransport | None:
    """A `LeanTransport`, or None (httpx's own) when the environment names a proxy:
    httpx applies ``HTTP(S)_PROXY`` only to clients made without a transport."""
    if any(scheme != "no" for scheme in urllib.request.getproxies()):
        return None
    return LeanTransport(limits)


class LeanTransport(httpx.AsyncBaseTransport):
    """Idle connections on a stack, waiting requests in a queue: each step costs the same however
    many there are. One model client sends to one origin, so connections are not kept by origin."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self._max = limits.max_connections if limits.max_connections is not None else 1 << 30
        self._keep = limits.max_keepalive_connections if limits.max_keepalive_connections is not None else self._max
        self._expiry = limits.keepalive_expiry
        self._idle: list[httpcore.AsyncHTTPConnection] = []
        self._open = 0  # connections open or opening, idle ones included
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]
            extensions=request.extensions,
        )
        try:
            return await self._send(core)
        except Exception as error:
            raise _mapped(error) from None

    async def _send(self, request: httpcore.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        while True:
            connection = await self._acquire(request.url.origin, timeouts.get("pool"))
            try:
                response = await connection.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:
                await self._release(connection)  # it closed between our look and its use: another
                continue
            except BaseException:
                await self._release(connection)
                raise
            return httpx.Response(status_code=response.status, headers=response.headers,
                                  stream=_Body(response.stream, self, connection), extensions=response.extensions)

    async def _acquire(self, origin: httpcore.Origin, timeout: float | None) -> httpcore.AsyncHTTPConnection:
        while True:
            while self._idle:
                connection = self._idle.pop()
                if connection.can_handle_request(origin) and connection.is_idle() and not connection.has_expired():
                    return connection
                await self._discard(connection)
            if self._open < self._max:
                self._open += 1
                ssl_context = self._ssl_context() if origin.scheme == b"https" else None
                return httpcore.AsyncHTTPConnection(origin, ssl_context=ssl_context, keepalive_expiry=self._expiry)
            handed = await self._wait(timeout)
            if handed is not None and handed.can_handle_request(origin):
                return handed  # type: ignore[no-any-return]
            if handed is not None:
                await self._discard(handed)

    async def _wait(self, timeout: float | None) -> Any:
        """A connection handed over by `_release`, or None when only a place to open one came free."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        try:
            if timeout is None:
                return await future
            done, _ = await asyncio.wait((future,), timeout=timeout)
            if not done:
                raise httpcore.PoolTimeout("no connection of the pool came free in time")
            return future.result()
        except BaseException:
            if future.done() and not future.cancelled():
                handed = future.result()
                if handed is not None:
                    await self._release(handed)  # handed over as this request gave up: pass it on
                else:
                    self._wake_one()
            else:
                future.cancel()
                try:
                    self._waiting.remove(future)
                except ValueError:
                    pass
            raise

    async def _release(self, connection: httpcore.AsyncHTTPConnection) -> None:
        """A request is done with `connection`: hand it to the next request waiting,
        keep it idle, or close it and let a waiting request open its own."""
        if connection.is_idle() and not connection.is_closed() and not self._closed:
            while self._waiting:
                future = self._waiting.popleft()
                if not future.done():
                    future.set_result(connection)
                    return
            if len(self._idle) < self._keep:
                self._idle.append(connection)
                return
        try:
            await self._discard(connection)
        finally:
            self._wake_one()

    async def _discard(self, connection: httpcore.AsyncHTTPConnection) -> None:
        self._open -= 1
        await connection.aclose()

    def _wake_one(self) -> None:
        """A place came free: the first waiting request opens a connection of its own."""
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_result(None)
                return

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:  # made on first use: loading the certificates takes milliseconds
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    async def aclose(self) -> None:
        self._closed = True  # connections still answering are closed when given back
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        failure: BaseException | None = None
        for connection in idle:  # every one, even after a cancellation: no socket is left to the collector
            try:
                await connection.aclose()
            except BaseException as error:  # noqa: BLE001 - raised once the others are closed
                failure = failure or error
        if failure is not None:
            raise failure


class _Body(httpx.AsyncByteStream):
    """A response body that says httpcore's errors as httpx's and gives its connection back when closed."""

    __slots__ = ("_stream", "_pool", "_connection")

    def __init__(self, stream: Any, pool: LeanTransport, connection: httpcore.AsyncHTTPConnection) -> None:
        self._stream = stream
        self._pool = pool
        self._connection: httpcore.AsyncHTTPConnection | None = connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException as error:
            await self.aclose()
            if isinstance(error, Exception):
                raise _mapped(error) from None
            raise

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            await self._stream.aclose()
        finally:
            await self._pool._release(connection)
