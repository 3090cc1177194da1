"""Leaving a ``with fn.stream(...)`` (or ``async with ...astream(...)``) block ends the call at
once: the model's streamed reply is closed (seen from the loopback server) and a conversation
turn ends ``stopped`` — with the stream object still referenced, so nothing waits for the
garbage collector."""

import asyncio

import pytest
from loopback import LoopbackServer, Scripted, chunks

import functai
from functai import ai
from functai._stores import open_store
from functai._models.openai import OpenAIClient


@ai
def storyteller(topic: str) -> str:
    """Tell a long story about the topic."""


@pytest.fixture
def server():
    with LoopbackServer() as running:
        running.clients = []
        yield running
        for made in running.clients:
            made.close()


def long_reply(server):
    """A reply of 500 words that the server sends slowly, so it is mid-way when the block is left."""
    server.script(Scripted(events=chunks(*["word "] * 500), event_delay=0.01))
    made = OpenAIClient(base_url=server.url, api_key="sk-test", max_retries=0, name="local")
    server.clients.append(made)
    return made


def ended(store):
    """The conversation's one turn as a new view reads it, and the error its end record keeps."""
    (turn,) = storyteller.conversation("tales", store=store).all_turns()
    (end,) = [r for r in open_store(store).read("tales") if r["kind"] == "end"]
    return turn.state, end["error"]


def test_leaving_the_with_block_ends_the_streamed_turn(server, durable_store):
    functai.configure(client=long_reply(server))
    chat = storyteller.conversation("tales", store=durable_store)
    with chat.stream("dragons") as stream:
        for event in stream:
            assert event.kind == "text"
            break
        assert [t.state for t in chat.all_turns()] == ["running"]
    # `stream` is still referenced here: nothing relies on the collector
    assert ended(durable_store) == ("stopped", {"code": "stream-closed",
                                                "message": "the stream was closed before the turn ended"})
    assert server.wait_closed()  # the model's reply was closed with the block, not left streaming
    assert stream.value is None


def test_an_exception_in_the_block_ends_the_turn_too(server, tmp_path):
    functai.configure(client=long_reply(server))
    store = str(tmp_path / "store")
    chat = storyteller.conversation("tales", store=store)
    with pytest.raises(KeyError):
        with chat.stream("dragons") as stream:
            next(stream)
            raise KeyError("the consumer failed")
    assert ended(store)[0] == "stopped"
    assert server.wait_closed() and stream.value is None


def test_leaving_the_async_with_block_ends_the_streamed_turn(server, tmp_path):
    functai.configure(client=long_reply(server))
    store = str(tmp_path / "store")
    chat = storyteller.conversation("tales", store=store)

    async def main():
        async with chat.astream("dragons") as stream:
            async for event in stream:
                break
        return stream, ended(store)

    stream, (state, error) = asyncio.run(main())
    assert state == "stopped" and error["code"] == "stream-closed"
    assert server.wait_closed()
    assert stream.value is None
