"""The lean asyncio connection pool under the OpenAI-compatible client's async calls.

Against a real asyncio HTTP/1.1 server on 127.0.0.1 that counts the
connections it is given and can hold its answers until the test lets them go.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpcore
import httpx
import pytest

from functai._models.openai import OpenAIClient
from functai._models.pool import LeanPool, LeanTransport, lean_transport
from functai._models.request import Request
from loopback import completion, refused_url

ANSWER = json.dumps(completion("ok")).encode()


class Server:
    """Counts connections; answers each request once ``gate`` is set; may close after each answer."""

    def __init__(self, close_after: bool = False) -> None:
        self.close_after = close_after
        self.gate = asyncio.Event()
        self.gate.set()
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests = 0
        self.arrived = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                self.requests += 1
                self.arrived.set()
                await self.gate.wait()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             + f"Content-Length: {len(ANSWER)}\r\n\r\n".encode() + ANSWER)
                await writer.drain()
                if self.close_after:  # a server that drops idle connections (no Connection: close)
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()


async def post(http: httpx.AsyncClient, url: str) -> int:
    response = await http.post(f"{url}/chat/completions", json={"model": "m", "messages": []})
    return response.status_code


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 30))  # a guard against a hang, not a time limit


def test_requests_past_the_limit_wait_for_a_connection_given_back():
    async def main() -> None:
        async with Server() as server:
            limits = httpx.Limits(max_connections=3, max_keepalive_connections=3)
            async with httpx.AsyncClient(transport=LeanTransport(limits)) as http:
                assert await asyncio.gather(*(post(http, server.url) for _ in range(12))) == [200] * 12
                assert server.connections == 3 and server.most_open == 3
                assert await post(http, server.url) == 200  # kept alive: no new connection
                assert server.connections == 3

    run(main())


def test_sequential_requests_reuse_one_connection():
    async def main() -> None:
        async with Server() as server:
            async with httpx.AsyncClient(transport=LeanTransport()) as http:
                for _ in range(5):
                    assert await post(http, server.url) == 200
        assert server.connections == 1

    run(main())


def test_taking_a_connection_costs_the_same_however_many_there_are(monkeypatch):
    """httpcore's pool asks every connection whether it has expired each time a request
    starts or ends; this one asks only the connection it is about to use."""
    asked = 0
    original = httpcore.AsyncHTTPConnection.has_expired

    def counted(self: httpcore.AsyncHTTPConnection) -> bool:
        nonlocal asked
        asked += 1
        return original(self)

    monkeypatch.setattr(httpcore.AsyncHTTPConnection, "has_expired", counted)

    async def main() -> None:
        async with Server() as server:
            limits = httpx.Limits(max_connections=20, max_keepalive_connections=20)
            async with httpx.AsyncClient(transport=LeanTransport(limits)) as http:
                for _ in range(3):
                    assert await asyncio.gather(*(post(http, server.url) for _ in range(40))) == [200] * 40

    run(main())
    assert asked <= 120  # at most once per request (a request handed a connection directly: none)


def test_a_connection_the_server_closed_is_not_reused():
    async def main() -> None:
        async with Server(close_after=True) as server:
            async with httpx.AsyncClient(transport=LeanTransport()) as http:
                for _ in range(4):
                    assert await post(http, server.url) == 200
                    while server.open:  # the server's close has reached us
                        await asyncio.sleep(0.001)
        assert server.connections == 4

    run(main())


def test_waiting_longer_than_the_pool_timeout_is_httpx_pool_timeout():
    async def main() -> None:
        async with Server() as server:
            server.gate.clear()
            limits = httpx.Limits(max_connections=1)
            timeout = httpx.Timeout(30.0, pool=0.05)
            async with httpx.AsyncClient(transport=LeanTransport(limits), timeout=timeout) as http:
                first = asyncio.create_task(post(http, server.url))
                await server.arrived.wait()
                with pytest.raises(httpx.PoolTimeout):
                    await post(http, server.url)
                server.gate.set()
                assert await first == 200
                assert await post(http, server.url) == 200  # the timed-out wait left no trace
        assert server.connections == 1

    run(main())


def test_cancelled_requests_give_their_places_back():
    async def main() -> None:
        async with Server() as server:
            server.gate.clear()
            limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
            async with httpx.AsyncClient(transport=LeanTransport(limits)) as http:
                tasks = [asyncio.create_task(post(http, server.url)) for _ in range(6)]
                while server.requests < 2:  # two in flight, four waiting for a connection
                    await asyncio.sleep(0.001)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                server.gate.set()
                assert await asyncio.gather(*(post(http, server.url) for _ in range(5))) == [200] * 5
                assert server.most_open <= 2

    run(main())


def test_a_refused_connection_is_httpx_connect_error():
    url, sock = refused_url()
    try:
        async def main() -> None:
            async with httpx.AsyncClient(transport=LeanTransport()) as http:
                with pytest.raises(httpx.ConnectError):
                    await http.post(f"{url}/chat/completions", json={})
                with pytest.raises(httpx.ConnectError):  # the failed connection's place came back
                    await http.post(f"{url}/chat/completions", json={})

        run(main())
    finally:
        sock.close()


def test_a_proxy_in_the_environment_is_left_to_httpx(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "localhost")
    assert isinstance(lean_transport(), LeanTransport)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert lean_transport() is None


def test_the_openai_client_s_async_calls_run_on_the_lean_pool(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    request = Request(model="m", messages=({"role": "user", "content": "q"},))

    async def main() -> None:
        async with Server() as server:
            client = OpenAIClient(base_url=server.url, api_key="", name="loopback", max_retries=0)
            replies = await asyncio.gather(*(client.acomplete(request) for _ in range(30)))
            assert [reply.text for reply in replies] == ["ok"] * 30
            assert isinstance(client._aclient()._transport, LeanTransport)
            await client.aclose()
        assert server.connections <= 30

    run(main())


def test_a_waiter_cancelled_as_a_place_frees_is_cancelled_and_keeps_no_place():
    """A cancel that lands in the same loop step a place is given to a waiter still cancels it
    (no request goes out), and the place goes on to the next one."""

    async def main() -> None:
        pool = LeanPool(httpx.Limits(max_connections=1))
        await pool._take_place(None)  # the one place, held
        waiter = asyncio.ensure_future(pool._take_place(60.0))
        await asyncio.sleep(0)  # it waits
        pool._places.release()  # the place comes free ...
        waiter.cancel()  # ... and the waiter is cancelled in the same step
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.wait_for(pool._take_place(None), 1.0)  # the place was given back, not kept

    asyncio.run(main())
