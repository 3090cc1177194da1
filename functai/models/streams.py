"""The OpenAI-compatible client's async and streamed paths (a base of `OpenAIClient`).

One exchange — build the body, post, retry, fall back to a weaker output
format, read the reply — is written once in `OpenAIClient._exchange` as
steps that yield ``("post", url, body, stream)`` and ``("sleep", seconds)``;
`_drive` performs them with the pooled `httpx.Client`, `_adrive` with the
event loop's `httpx.AsyncClient`. A streamed answer's server-sent events are
put together by `functai.models.sse.Assembler` into the shape of a whole
answer, then read by the same `_read_reply`.

This module imports httpx at the top; ``import functai`` must not import it.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Generator, Iterator, TypeVar

import httpx

from functai.errors import ModelError
from functai.models.loops import LoopClients
from functai.models.request import Reply, Request
from functai.models.sse import Assembler, StreamCut


_Self = TypeVar("_Self", bound="AsyncAndStreams")


class AsyncAndStreams:
    """``acomplete``, ``stream`` and ``astream`` over the client's one exchange."""

    _pools: LoopClients
    _urls: dict[str, httpx.URL]
    _async_transport: Any

    async def acomplete(self, request: Request) -> Reply:
        """`complete` over the event loop's pooled `httpx.AsyncClient`: the same steps, awaited."""
        return await self._adrive(self._exchange(request, False))

    def stream(self, request: Request) -> Iterator[Any]:
        """Send `request` with ``"stream": true``: each text delta as it arrives (``str``),
        then the whole `Reply` (tool calls assembled from their deltas, usage from the last chunk)."""
        response, wrapped = self._drive(self._exchange(request, True))
        assembler = Assembler()
        try:
            for line in response.iter_lines():
                text = assembler.line(line)
                if text:
                    yield text
            yield self._assembled(assembler, wrapped)
        except (httpx.TransportError, httpx.StreamError, StreamCut) as error:
            raise self._cut(error) from None
        finally:
            response.close()

    async def astream(self, request: Request) -> AsyncIterator[Any]:
        """`stream` over the event loop's pooled `httpx.AsyncClient`."""
        response, wrapped = await self._adrive(self._exchange(request, True))
        assembler = Assembler()
        try:
            async for line in response.aiter_lines():
                text = assembler.line(line)
                if text:
                    yield text
            yield self._assembled(assembler, wrapped)
        except (httpx.TransportError, httpx.StreamError, StreamCut) as error:
            raise self._cut(error) from None
        finally:
            await response.aclose()

    def _assembled(self, assembler: Assembler, wrapped: bool) -> Reply:
        data = assembler.answer()
        for secret in self._secrets.reveal():  # scrubbed like a whole answer's body
            data = json.loads(json.dumps(data).replace(json.dumps(secret)[1:-1], "***"))
        return self._read_reply(data, wrapped)

    def _cut(self, error: BaseException) -> ModelError:
        return ModelError(self._scrub(f"{self._where()} broke off its streamed reply: {type(error).__name__}: "
                                      f"{error or 'no detail'}"), code="model-unreachable")

    # -- performing the exchange's steps: ("post", url, body, stream) and ("sleep", seconds) ----------

    def _drive(self, steps: Generator[Any, Any, Any]) -> Any:
        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                op = steps.throw(error) if error is not None else steps.send(result)
            except StopIteration as done:
                return done.value
            result = error = None
            try:
                if op[0] == "sleep":
                    self._sleep(op[1])
                else:
                    http = self._client()
                    result = http.send(http.build_request("POST", self._parsed(op[1]), json=op[2]), stream=op[3])
                    if op[3] and not result.is_success:
                        result.read()
                        result.close()
            except BaseException as failure:  # noqa: BLE001 - handed back to the steps, which decide
                error = failure

    async def _adrive(self, steps: Generator[Any, Any, Any]) -> Any:
        import asyncio

        result: Any = None
        error: BaseException | None = None
        while True:
            try:
                op = steps.throw(error) if error is not None else steps.send(result)
            except StopIteration as done:
                return done.value
            result = error = None
            try:
                if op[0] == "sleep":
                    await asyncio.sleep(op[1])
                else:
                    http = self._aclient()
                    result = await http.send(http.build_request("POST", self._parsed(op[1]), json=op[2]), stream=op[3])
                    if op[3] and not result.is_success:
                        await result.aread()
                        await result.aclose()
            except BaseException as failure:  # noqa: BLE001 - handed back to the steps, which decide
                error = failure

    def _parsed(self, url: str) -> httpx.URL:
        """`url` parsed once (httpx parses a string URL again on every request)."""
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= 64:  # one per base URL (per deployment for Azure): a few
                self._urls.clear()
            parsed = self._urls[url] = httpx.URL(url)
        return parsed

    def _aclient(self) -> httpx.AsyncClient:
        """The pooled `httpx.AsyncClient` of the running event loop."""
        return self._pools.get(self._new_aclient)

    def _new_aclient(self) -> httpx.AsyncClient:
        transport = self._async_transport
        if transport is None:
            from functai.models.pool import lean_transport

            transport = lean_transport()
        return httpx.AsyncClient(transport=transport, **self._options())

    async def aclose(self) -> None:
        """Close the pools: this event loop's (awaited), every other loop's on that loop, and the plain one."""
        await self._pools.aclose()
        self.close()

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
