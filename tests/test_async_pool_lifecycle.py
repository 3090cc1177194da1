"""When the OpenAI-compatible client's connections are closed: seen from the server's side.

Each event loop has its own async pool. It is closed by ``await aclose()``
(``async with``), by ``close()`` (on its own loop, from whatever thread), and
as asyncio shuts the loop down — never left to the garbage collector.
`LoopbackServer.wait_closed` returns once every connection a client opened
is closed by that client.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from typing import Any

import pytest
from loopback import LoopbackServer, Scripted, chunks, completion

from functai._models.openai import OpenAIClient
from functai._models.pool import LeanTransport
from functai._models.request import Request

REQUEST = Request(model="m", messages=({"role": "user", "content": "q"},))


@pytest.fixture
def server():
    with LoopbackServer(default=Scripted(body=completion("ok"))) as running:
        yield running


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def make(server: LoopbackServer) -> OpenAIClient:
    return OpenAIClient(base_url=server.url, api_key="", name="loopback", max_retries=0)


async def three_at_once(client: OpenAIClient) -> None:
    replies = await asyncio.gather(*(client.acomplete(REQUEST) for _ in range(3)))
    assert [reply.text for reply in replies] == ["ok"] * 3


def closed_on(monkeypatch) -> list[int]:
    """The threads the lean pools were closed on."""
    threads: list[int] = []
    original = LeanTransport.aclose

    async def aclose(self: LeanTransport) -> None:
        threads.append(threading.get_ident())
        await original(self)

    monkeypatch.setattr(LeanTransport, "aclose", aclose)
    return threads


def test_asyncio_run_closes_the_loop_s_connections_as_it_shuts_down(server):
    client = make(server)

    async def main() -> None:
        await three_at_once(client)
        assert server.open_connections >= 1  # kept alive for the next call while the loop runs

    asyncio.run(main())
    assert server.wait_closed()
    assert len(client._pools) == 0  # and the closed loop is let go
    asyncio.run(main())  # a later loop gets a pool of its own
    assert server.wait_closed()
    client.close()


def test_aclose_and_async_with_close_this_loop_s_connections(server):
    async def main() -> None:
        client = make(server)
        await three_at_once(client)
        await client.aclose()
        assert await asyncio.to_thread(server.wait_closed)
        await three_at_once(client)  # a closed client opens a new pool on its next call
        async with client as same:
            assert same is client
            await three_at_once(client)
        assert await asyncio.to_thread(server.wait_closed)

    asyncio.run(main())


def test_close_from_another_thread_closes_a_running_loop_s_pool_on_that_loop(server, monkeypatch):
    client = make(server)
    threads = closed_on(monkeypatch)
    used = threading.Event()
    stop = threading.Event()
    loop_thread: list[int] = []

    async def serve() -> None:
        loop_thread.append(threading.get_ident())
        await three_at_once(client)
        used.set()
        while not stop.is_set():  # the loop keeps running: its shutdown is not what closes the pool
            await asyncio.sleep(0.005)

    worker = threading.Thread(target=asyncio.run, args=(serve(),))
    worker.start()
    try:
        assert used.wait(30)
        client.close()
        assert server.wait_closed()
        assert threads == loop_thread  # closed by the loop's own thread, not this one
    finally:
        stop.set()
        worker.join(30)


def test_close_inside_a_running_loop_schedules_its_pool_s_closing(server):
    async def main() -> None:
        client = make(server)
        await three_at_once(client)
        client.close()  # not awaited: done by the loop as soon as this coroutine lets it run
        assert await asyncio.to_thread(server.wait_closed)
        await three_at_once(client)
        assert len(client._pools) == 1
        client.close()

    asyncio.run(main())
    assert server.wait_closed()


def test_aclose_closes_another_loop_s_pool_on_that_loop(server, monkeypatch):
    client = make(server)
    threads = closed_on(monkeypatch)
    used = threading.Event()
    stop = threading.Event()
    other: list[int] = []

    async def elsewhere() -> None:
        other.append(threading.get_ident())
        await three_at_once(client)
        used.set()
        while not stop.is_set():
            await asyncio.sleep(0.005)

    async def here() -> None:
        await three_at_once(client)
        await client.aclose()

    worker = threading.Thread(target=asyncio.run, args=(elsewhere(),))
    worker.start()
    try:
        assert used.wait(30)
        asyncio.run(here())
        assert server.wait_closed()
        assert sorted(threads) == sorted([threading.get_ident(), other[0]])
    finally:
        stop.set()
        worker.join(30)


def test_a_stream_left_unfinished_when_the_loop_ends_is_closed(server):
    server.script(Scripted(events=chunks(*["word "] * 200), event_delay=0.01), Scripted(body=completion("ok")))
    client = make(server)

    async def main() -> Any:
        stream = client.astream(REQUEST)
        first = await stream.__anext__()
        await client.acomplete(REQUEST)  # one connection streaming, one idle in the pool
        return stream, first  # neither read to its end nor closed

    stream, first = asyncio.run(main())
    assert first == "word "
    assert server.wait_closed()
    client.close()


def test_a_client_dropped_while_its_loop_runs_has_its_pool_closed(server):
    async def main() -> None:
        client = make(server)
        await three_at_once(client)
        del client
        gc.collect()
        assert await asyncio.to_thread(server.wait_closed)  # closed on the loop, not by the collector

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_loop_closed_without_asyncio_s_shutdown_is_let_go(server):
    """Nothing can close connections of a loop closed by hand (the collector does, and warns):
    the client lets it go and goes on working."""
    client = make(server)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for _ in range(3):
            loop = asyncio.new_event_loop()
            loop.run_until_complete(three_at_once(client))
            loop.close()
        asyncio.run(three_at_once(client))
        assert len(client._pools) == 0
        client.close()
        client.close()
        gc.collect()
    assert server.wait_closed()


def test_async_calls_leave_no_connection_to_the_garbage_collector(server):
    """Whole calls through the provider's cached client, streams, retries and a dropped
    connection, each in its own ``asyncio.run``: nothing is left for the collector to close."""
    import functai
    from functai import ai

    @ai(lm="openai/m")
    def say(text: str) -> str:
        """Say it."""

    server.script(
        Scripted(body=completion("one")),
        Scripted(status=500, body={"error": {"message": "busy"}}), Scripted(body=completion("two")),
        Scripted(drop=True), Scripted(events=chunks("th", "ree")),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with functai.settings(base_url=server.url, api_key="sk-loopback-key", http_retries=1):
            assert asyncio.run(say.acall("a")) == "one"
            assert asyncio.run(say.acall("b")) == "two"

            async def streamed() -> list[Any]:
                return [event async for event in say.astream("c")]

            assert [e.value for e in asyncio.run(streamed()) if e.kind == "done"] == ["three"]
        gc.collect()
        assert server.wait_closed()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
