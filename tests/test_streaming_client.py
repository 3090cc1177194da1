"""The OpenAI-compatible client's async and streamed paths, against a real loopback server."""

import asyncio

import pytest
from loopback import LoopbackServer, Scripted, chunks, completion

import functai
from functai import FunctAIError, ModelError, ai, tool
from functai._models.openai import OpenAIClient
from functai._models.request import Reply, Request


@pytest.fixture
def server():
    with LoopbackServer() as running:
        running.clients = []  # closed when the test ends: no pool is left to the garbage collector
        yield running
        for made in running.clients:
            made.close()


def client(server):
    made = OpenAIClient(base_url=server.url, api_key="sk-test-key-123456", max_retries=0, name="local")
    server.clients.append(made)
    return made


def request(**kw):
    return Request(model="m", messages=[{"role": "user", "content": "hi"}], **kw)


def test_stream_sends_stream_options_and_yields_text_deltas_then_the_reply(server):
    server.script(Scripted(events=chunks("Hel", "lo", " there", usage={"prompt_tokens": 5, "completion_tokens": 3}),
                           event_delay=0.01))
    items = list(client(server).stream(request()))
    assert items[:-1] == ["Hel", "lo", " there"]
    reply = items[-1]
    assert isinstance(reply, Reply) and reply.text == "Hello there" and reply.finish_reason == "stop"
    assert reply.usage == {"input_tokens": 5, "output_tokens": 3}
    body = server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_astream_assembles_a_streamed_tool_call(server):
    calls = [{"id": "call_9", "name": "weather", "arguments": {"city": "Oslo", "unit": "C"}}]
    server.script(Scripted(events=chunks(tool_calls=calls, finish_reason="tool_calls")))

    async def main():
        return [item async for item in client(server).astream(request())]

    items = asyncio.run(main())
    assert len(items) == 1
    reply = items[0]
    assert [(c.id, c.name, c.input) for c in reply.tool_calls] == [("call_9", "weather", {"city": "Oslo", "unit": "C"})]


def test_acomplete_reads_a_whole_answer_like_complete(server):
    server.script(Scripted(body=completion("fine", usage={"prompt_tokens": 2, "completion_tokens": 1})))
    reply = asyncio.run(client(server).acomplete(request()))
    assert reply.text == "fine" and reply.usage["input_tokens"] == 2
    assert "stream" not in server.requests[0].body


def test_acomplete_retries_a_500_like_complete(server):
    server.script(Scripted(status=500, body={"error": {"message": "busy"}}), Scripted(body=completion("ok")))
    lm = OpenAIClient(base_url=server.url, api_key="k" * 20, max_retries=1, backoff=0, name="local")
    assert asyncio.run(lm.acomplete(request())).text == "ok"
    assert len(server.requests) == 2


@tool(effects="reads")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@ai(tools=[weather])
def forecast(city: str) -> str:
    """Say the weather."""


def test_a_streamed_call_over_sse_text_and_a_tool_call(server):
    server.script(
        Scripted(events=chunks(tool_calls=[{"id": "c1", "name": "weather", "arguments": {"city": "Oslo"}}],
                               finish_reason="tool_calls")),
        Scripted(events=chunks("It is ", "sunny.", usage={"prompt_tokens": 9, "completion_tokens": 4})),
    )
    with functai.settings(client=client(server)):
        stream = forecast.stream("Oslo")
        events = list(stream)
    assert [e.kind for e in events] == ["tool_call", "tool_result", "text", "text", "done"]
    assert [e.text for e in events if e.kind == "text"] == ["It is ", "sunny."]
    assert stream.value == "It is sunny."
    assert stream.record.tool_calls[0]["output"] == "sunny in Oslo"
    assert stream.record.usage["input_tokens"] == 9


def test_a_stream_dropped_mid_way_is_model_unreachable_and_nothing_is_done(server):
    server.script(Scripted(events=chunks("Half ", "an ", "answer"), cut_after=2))
    events = []
    with functai.settings(client=client(server)):
        stream = forecast.stream("Oslo")
        with pytest.raises(FunctAIError) as caught:
            for event in stream:
                events.append(event)
    assert caught.value.code == "model-unreachable"
    assert "sk-test-key" not in str(caught.value)
    assert [e.kind for e in events] == ["text"]  # what arrived before the cut; never "done"
    record = caught.value.record
    assert record.error["code"] == "model-unreachable" and record.output is None
    assert stream.value is None and stream.record is None


def test_an_async_stream_dropped_mid_way_is_model_unreachable(server):
    server.script(Scripted(events=chunks("Half ", "an ", "answer"), cut_after=3))

    async def main():
        with functai.settings(client=client(server)):
            return [e.kind async for e in forecast.astream("Oslo")]

    with pytest.raises(FunctAIError) as caught:
        asyncio.run(main())
    assert caught.value.code == "model-unreachable"


#: A stream framed every way the SSE standard allows: a byte-order mark, comments, ``retry``,
#: ``event`` and ``id`` fields, one event's data over two ``data:`` lines (joined by a newline),
#: a line cut across network chunks, ``data:`` without its space, CRLF and CR line ends, and a
#: last event the stream's end closes with no blank line.
FRAMED = [
    '\ufeffdata: {"id": "chatcmpl-framed", "model": "loopback",\n',
    'data: "choices": [{"index": 0, "delta": {"content": "Hel',
    'lo"}, "finish_reason": null}]}\n\n',
    ": a comment, then a reconnection time\nretry: 3000\n\n",
    'event: message\nid: 2\n: keep-alive\r\n',
    'data:{"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]}\r\n\r\n',
    'data: {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}\r\r',
    "data: [DONE]",
]


@pytest.mark.parametrize("way", ["sync", "async"])
def test_a_stream_is_read_by_the_sse_standard_however_it_is_framed(server, way):
    server.script(Scripted(raw_events=FRAMED))
    made = client(server)
    if way == "sync":
        items = list(made.stream(request()))
    else:
        async def read():
            return [item async for item in made.astream(request())]

        items = asyncio.run(read())
    assert items[:-1] == ["Hello", " there"]
    reply = items[-1]
    assert reply.text == "Hello there" and reply.finish_reason == "stop"
    assert reply.usage == {"input_tokens": 4, "output_tokens": 2}


@pytest.mark.parametrize("way", ["sync", "async"])
def test_an_sse_error_event_is_the_servers_error_not_the_end_of_the_answer(server, way):
    """Text, then ``event: error`` whose data is the error alone, then [DONE]: no answer cut short."""
    server.script(Scripted(raw_events=[
        'data: {"choices": [{"index": 0, "delta": {"content": "The contract is "}, "finish_reason": null}]}\n\n',
        'event: error\ndata: {"message": "upstream overloaded"}\n\n',
        "data: [DONE]\n\n",
    ]))
    made = client(server)
    with pytest.raises(ModelError) as info:
        if way == "sync":
            list(made.stream(request()))
        else:
            async def read():
                return [item async for item in made.astream(request())]

            asyncio.run(read())
    assert "upstream overloaded" in str(info.value)
