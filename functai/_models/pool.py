"""A lean asyncio connection pool for the OpenAI-compatible client's `httpx.AsyncClient`.

Kept because httpcore's pool re-examines every connection and queued request whenever a request
starts or ends, which triples the CPU of 200 concurrent ``acall``s; it can go once httpcore
assigns queued requests in one pass (encode/httpcore#1035).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from typing import Any, AsyncIterator

import httpcore
import httpx

__all__ = ["LeanPool", "LeanTransport", "lean_transport"]


def lean_transport() -> httpx.AsyncBaseTransport | None:
    """A `LeanTransport`, or None (httpx's own) when the environment names a proxy:
    httpx applies ``HTTP(S)_PROXY`` only to clients made without a transport."""
    if any(scheme != "no" for scheme in urllib.request.getproxies()):
        return None
    return LeanTransport()


class LeanTransport(httpx.AsyncHTTPTransport):
    """httpx's async transport over a `LeanPool`: httpx turns its requests into httpcore's and back
    and says httpcore's errors as its own, as over its own pool; and whatever instruments httpx's
    transport class (OpenTelemetry's httpx instrumentation: an HTTP span, ``traceparent``)
    instruments this one too."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        # Not AsyncHTTPTransport.__init__, which would make httpcore's pool and an SSL context: the
        # pool it sends through is this one (its ``_pool``, which httpx 0.x sends every request to).
        self._pool = LeanPool(limits)  # type: ignore[assignment]


class LeanPool:
    """Places for requests in a semaphore (each waiting request costs the same however many
    there are), idle connections on a stack. One model client sends to one origin, so
    connections are not kept by origin: one that cannot serve a request is closed."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        most = limits.max_connections if limits.max_connections is not None else 1 << 30
        self._places = asyncio.Semaphore(most)  # a place per connection in use; idle ones hold none
        self._keep = limits.max_keepalive_connections if limits.max_keepalive_connections is not None else most
        self._expiry = limits.keepalive_expiry
        self._idle: list[httpcore.AsyncHTTPConnection] = []
        self._queued = 0  # requests waiting for a place: the connections given back are kept for them
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        await self._take_place((request.extensions.get("timeout") or {}).get("pool"))
        connection = None
        try:
            while True:
                connection = await self._connection(request.url.origin)
                try:
                    response = await connection.handle_async_request(request)
                    break
                except httpcore.ConnectionNotAvailable:  # it closed between our look and its use: another
                    await connection.aclose()
        except BaseException:
            await self._release(connection)
            raise
        return httpcore.Response(status=response.status, headers=response.headers,
                                 content=_Body(response.stream, self, connection), extensions=response.extensions)

    async def _take_place(self, timeout: float | None) -> None:
        if not self._places.locked():
            await self._places.acquire()
            return
        self._queued += 1
        waiting = asyncio.ensure_future(self._places.acquire())
        try:
            # asyncio.wait, not wait_for: before 3.12 wait_for can swallow a cancel that lands as a place frees.
            await asyncio.wait((waiting,), timeout=timeout)
        except BaseException:  # cancelled while waiting: give back a place taken meanwhile
            if not waiting.cancel() and not waiting.cancelled() and waiting.exception() is None:
                self._places.release()
            raise
        finally:
            self._queued -= 1
        if not waiting.done():
            waiting.cancel()
            raise httpcore.PoolTimeout("no connection of the pool came free in time")

    async def _connection(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        """The freshest idle connection that can serve ``origin``, else a new one."""
        while self._idle:
            connection = self._idle.pop()
            if connection.can_handle_request(origin) and connection.is_idle() and not connection.has_expired():
                return connection
            await connection.aclose()
        ssl_context = self._ssl_context() if origin.scheme == b"https" else None
        return httpcore.AsyncHTTPConnection(origin, ssl_context=ssl_context, keepalive_expiry=self._expiry)

    async def _release(self, connection: httpcore.AsyncHTTPConnection | None) -> None:
        """A request is done: keep its connection idle (before its place is given to the next) or close it."""
        try:
            if connection is None:
                return
            reusable = connection.is_idle() and not connection.is_closed() and not self._closed
            if reusable and len(self._idle) < self._keep + self._queued:
                self._idle.append(connection)
            else:
                await connection.aclose()
        finally:
            self._places.release()

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:  # made on first use: loading the certificates takes milliseconds
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    async def __aenter__(self) -> LeanPool:  # as httpcore's pool: httpx's transport enters and leaves it
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True  # connections still answering are closed when given back
        idle, self._idle = self._idle, []
        failure: BaseException | None = None
        for connection in idle:  # every one, even after a cancellation: no socket is left to the collector
            try:
                await connection.aclose()
            except BaseException as error:  # noqa: BLE001 - raised once the others are closed
                failure = failure or error
        if failure is not None:
            raise failure


class _Body:
    """A response body that gives its connection back to the pool when closed."""

    __slots__ = ("_stream", "_pool", "_connection")

    def __init__(self, stream: Any, pool: LeanPool, connection: httpcore.AsyncHTTPConnection) -> None:
        self._stream = stream
        self._pool = pool
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
            await self._pool._release(connection)
