"""A lean asyncio connection pool for the OpenAI-compatible client's `httpx.AsyncClient`.

httpcore's own pool re-examines every connection and every queued request
each time a request starts or a response is closed (and asks the socket of
every idle connection whether it is readable). With a hundred connections
and as many requests queued that is most of the CPU time of a burst of
concurrent calls — more than httpx and functai spend on the calls
themselves. This pool keeps the idle connections of each origin on a stack
and the waiting requests in a queue, so taking and giving back a connection
costs the same however many there are; each connection is still an
`httpcore.AsyncHTTPConnection` (HTTP/1.1, TLS, timeouts as httpx does them).

The limits mean what `httpx.Limits` means (the same defaults). It serves
asyncio only, as the client's async pools do (one per event loop); a proxy
set in the environment is left to httpx's own transport (see `lean_transport`).

Kept because 200 concurrent ``acall`` take 2.6x the CPU over httpcore's pool (0.42 s → 1.16 s,
``benchmarks/compare.py --only acall``; the budget is 0.5 s wall). It can go once httpcore's
pool assigns queued requests in one pass, not one per connection (encode/httpcore#1035).
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

#: httpcore's exceptions, most specific first, and what httpx calls them.
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
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
    """An `httpx.AsyncBaseTransport` over `_Pool` (HTTP/1.1, certificates verified as httpx does)."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self._pool = _Pool(limits)

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
            response = await self._pool.handle_async_request(core)
        except Exception as error:
            raise _mapped(error) from None
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_Body(response.stream), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Body(httpx.AsyncByteStream):
    """A response body with httpcore's errors said as httpx's."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except Exception as error:
            raise _mapped(error) from None

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Pool:
    """Connections by origin: idle ones on a stack (the freshest reused first), requests
    waiting for a free one in arrival order, each handed the connection given back."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._max = limits.max_connections if limits.max_connections is not None else 1 << 30
        self._keep = limits.max_keepalive_connections if limits.max_keepalive_connections is not None else self._max
        self._expiry = limits.keepalive_expiry
        self._idle: dict[tuple[bytes, bytes, int], list[httpcore.AsyncHTTPConnection]] = {}
        self._idle_count = 0
        self._open = 0  # connections open or opening, idle ones included
        self._waiting: deque[tuple[tuple[bytes, bytes, int], asyncio.Future[Any]]] = deque()
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
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
            return httpcore.Response(status=response.status, headers=response.headers,
                                     content=_Returning(response.stream, self, key, connection),
                                     extensions=response.extensions)

    async def _acquire(self, origin: httpcore.Origin, key: tuple[bytes, bytes, int],
                       timeout: float | None) -> httpcore.AsyncHTTPConnection:
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

    async def _wait(self, key: tuple[bytes, bytes, int], timeout: float | None) -> Any:
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

    async def _release(self, key: tuple[bytes, bytes, int], connection: httpcore.AsyncHTTPConnection) -> None:
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
        for key, idle in self._idle.items():
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


class _Returning:
    """A response body that gives its connection back to the pool when it is closed."""

    __slots__ = ("_stream", "_pool", "_key", "_connection")

    def __init__(self, stream: Any, pool: _Pool, key: tuple[bytes, bytes, int],
                 connection: httpcore.AsyncHTTPConnection) -> None:
        self._stream = stream
        self._pool = pool
        self._key = key
        self._connection: httpcore.AsyncHTTPConnection | None = connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            await self._stream.aclose()
        finally:
            await self._pool._release(self._key, connection)
