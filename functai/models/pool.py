"""A lean asyncio connection pool for the OpenAI-compatible client's `httpx.AsyncClient`.

Kept because httpcore's pool re-examines every connection and queued request
whenever a request starts or ends: 200 concurrent ``acall``s cost 1.16 s CPU
over it, 0.42 s over this one (``benchmarks/compare.py --only acall``). It can
go once httpcore assigns queued requests in one pass (encode/httpcore#1035).

Idle connections of each origin wait on a stack and requests for a free one
in a queue, so taking and giving back a connection costs the same however
many there are. Each connection is still an `httpcore.AsyncHTTPConnection`
(HTTP/1.1, TLS, timeouts as httpx does them); the limits mean what
`httpx.Limits` means, with the same defaults. It serves asyncio only.
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

_Key = tuple[bytes, bytes, int]


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
    """Connections by origin: idle ones on a stack (the freshest reused first), requests
    waiting for a free one in arrival order, each handed the connection given back."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self._max = limits.max_connections if limits.max_connections is not None else 1 << 30
        self._keep = limits.max_keepalive_connections if limits.max_keepalive_connections is not None else self._max
        self._expiry = limits.keepalive_expiry
        self._idle: dict[_Key, list[httpcore.AsyncHTTPConnection]] = {}
        self._idle_count = 0
        self._open = 0  # connections open or opening, idle ones included
        self._waiting: deque[tuple[_Key, asyncio.Future[Any]]] = deque()
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
        origin = request.url.origin
        key = (origin.scheme, origin.host, origin.port)
        timeouts = request.extensions.get("timeout") or {}
        while True:
            connection = await self._acquire(origin, key, timeouts.get("pool"))
            try:
                response = await connection.handle_async_request(request)
            except httpcore.ConnectionNotAvailable:
                await self._release(key, connection)  # it closed between our look and its use: another
                continue
            except BaseException:
                await self._release(key, connection)
                raise
            return httpx.Response(status_code=response.status, headers=response.headers,
                                  stream=_Body(response.stream, self, key, connection), extensions=response.extensions)

    async def _acquire(self, origin: httpcore.Origin, key: _Key, timeout: float | None) -> httpcore.AsyncHTTPConnection:
        while True:
            idle = self._idle.get(key)
            while idle:
                connection = idle.pop()
                self._idle_count -= 1
                if connection.is_idle() and not connection.has_expired():
                    return connection
                self._open -= 1
                await connection.aclose()
            if self._open >= self._max and self._idle_count:  # make room: close another origin's idle one
                await self._close_one_idle()
            if self._open < self._max:
                self._open += 1
                ssl_context = self._ssl_context() if origin.scheme == b"https" else None
                return httpcore.AsyncHTTPConnection(origin, ssl_context=ssl_context, keepalive_expiry=self._expiry)
            handed = await self._wait(key, timeout)
            if handed is not None:
                return handed  # type: ignore[no-any-return]

    async def _wait(self, key: _Key, timeout: float | None) -> Any:
        """A connection handed over by `_release`, or None when only a place to open one came free."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        entry = (key, future)
        self._waiting.append(entry)
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
                    await self._release(key, handed)  # handed over as this request gave up: pass it on
                else:
                    self._wake_one()
            else:
                future.cancel()
                try:
                    self._waiting.remove(entry)
                except ValueError:
                    pass
            raise

    async def _release(self, key: _Key, connection: httpcore.AsyncHTTPConnection) -> None:
        """A request is done with `connection`: hand it to the next request waiting for
        its origin, keep it idle, or close it, and let a waiting request go on."""
        if connection.is_idle() and not connection.is_closed() and not self._closed:
            for entry in self._waiting:
                if entry[0] == key and not entry[1].done():
                    self._waiting.remove(entry)
                    entry[1].set_result(connection)
                    return
            if self._idle_count < self._keep and not self._waiting:
                self._idle.setdefault(key, []).append(connection)
                self._idle_count += 1
                return
        self._open -= 1
        try:
            await connection.aclose()
        finally:
            self._wake_one()

    def _wake_one(self) -> None:
        """A place came free: the first waiting request opens a connection of its own."""
        while self._waiting:
            _, future = self._waiting.popleft()
            if not future.done():
                future.set_result(None)
                return

    async def _close_one_idle(self) -> None:
        for idle in self._idle.values():
            if idle:
                connection = idle.pop(0)
                self._idle_count -= 1
                self._open -= 1
                await connection.aclose()
                return

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:  # made on first use: loading the certificates takes milliseconds
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    async def aclose(self) -> None:
        self._closed = True  # connections still answering are closed when given back
        idle = [connection for connections in self._idle.values() for connection in connections]
        self._idle.clear()
        self._open -= len(idle)
        self._idle_count = 0
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

    __slots__ = ("_stream", "_pool", "_key", "_connection")

    def __init__(self, stream: Any, pool: LeanTransport, key: _Key, connection: httpcore.AsyncHTTPConnection) -> None:
        self._stream = stream
        self._pool = pool
        self._key = key
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
            await self._pool._release(self._key, connection)
