"""Async handlers and tools, async calls and streams (issue 13)."""

import asyncio

import pytest

import functai
from functai import Change, Plugin, ai, tool
from functai.testing import ScriptedLM, tool_call


@tool(effects="reads")
async def weather(city: str) -> str:
    """The weather in a city."""
    await asyncio.sleep(0)
    return f"sunny in {city}"


@ai(tools=[weather])
def forecast(city: str) -> str:
    """Say the weather."""


def test_async_handlers_of_every_changing_hook_run_in_a_plain_call():
    seen = []
    plugin = Plugin("asyncy", version="1.0.0")

    @plugin.before_call
    async def section(call):
        await asyncio.sleep(0)
        return Change(sections=["Be brief."])

    @plugin.tool_result
    async def shout(result):
        return Change(output=result.output.upper())

    @plugin.call_end
    async def heard(end):
        seen.append(end.function)

    lm = ScriptedLM([tool_call("weather", {"city": "Oslo"}), "Sunny."])
    with functai.settings(client=lm, plugins=[plugin]):
        value, record = forecast.run("Oslo")
    assert value == "Sunny."
    assert "Be brief." in record.instruction
    assert record.tool_calls[0]["output"] == "SUNNY IN OSLO"
    assert [c["hook"] for c in record.changes] == ["before_call", "tool_result"]
    assert seen == ["forecast"]


def test_an_async_tool_runs_in_a_plain_call():
    lm = ScriptedLM([tool_call("weather", {"city": "Lima"}), "ok"])
    with functai.settings(client=lm):
        _, record = forecast.run("Lima")
    assert record.tool_calls[0]["output"] == "sunny in Lima"
    assert lm.requests[1].messages[-1]["content"] == "sunny in Lima"


# -- the async driver -------------------------------------------------------------------

import functai_approval  # noqa: E402

from functai import ApprovalError, FunctAIError, StreamEvent  # noqa: E402

ledger: list[str] = []


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    ledger.append(order)
    return f"refunded {order}"


@ai(tools=[refund, weather])
def support(request: str) -> str:
    """Support the customer."""


@ai
def count(text: str) -> int:
    """Count the words."""


def comparable(record):
    data = record.to_dict() if hasattr(record, "to_dict") else dict(record.__dict__)
    for key in ("id", "started", "seconds", "parent"):
        data.pop(key, None)
    return data


def test_sync_and_async_records_of_the_same_scripted_call_are_identical(install):
    install(functai_approval.plugin)
    plugin = Plugin("notes", version="1.0.0", before_call=lambda call: Change(sections=["Note."]))

    replies = [tool_call("weather", {"city": "Rome"}), tool_call("refund", {"order": "A1"}), "Done."]

    def script():
        return ScriptedLM(replies)

    approve = lambda tool: True  # noqa: E731
    with functai.settings(client=script(), plugins=[plugin], approve=approve):
        sync_value, sync_record = support.run("refund A1")
    with functai.settings(client=script(), plugins=[plugin], approve=approve):
        async_value, async_record = asyncio.run(support.arun("refund A1"))
    assert sync_value == async_value == "Done."
    assert len(sync_record.tool_calls) == 2 and sync_record.changes
    assert comparable(sync_record) == comparable(async_record)


def test_acall_returns_the_value_and_typed_outputs_are_read():
    with functai.settings(client=ScriptedLM(["three words here"]), retries=0):
        with pytest.raises(FunctAIError):
            asyncio.run(count.acall("a b c"))
    with functai.settings(client=ScriptedLM(["3"])):
        assert asyncio.run(count.acall("a b c")) == 3


def test_an_async_tool_is_awaited_and_a_sync_tool_runs_off_the_loop():
    threads = {}

    @tool(effects="reads")
    def where() -> str:
        """Which thread runs me."""
        import threading

        threads["tool"] = threading.get_ident()
        return "here"

    @ai(tools=[where, weather])
    def probe(q: str) -> str:
        """Probe."""

    async def main():
        import threading

        threads["loop"] = threading.get_ident()
        lm = ScriptedLM([tool_call("where"), tool_call("weather", {"city": "Oslo"}), "ok"])
        with functai.settings(client=lm):
            return await probe.arun("x")

    value, record = asyncio.run(main())
    assert threads["tool"] != threads["loop"]
    assert [c["output"] for c in record.tool_calls] == ["here", "sunny in Oslo"]


def test_async_handlers_are_awaited_in_an_async_call():
    order = []
    plugin = Plugin("slow", version="1.0.0")

    @plugin.before_call
    async def section(call):
        order.append("before_call")
        await asyncio.sleep(0.001)
        return Change(sections=["Async."])

    @plugin.request
    async def request(event):
        order.append("request")

    @plugin.reply
    async def reply(event):
        order.append("reply")

    async def main():
        with functai.settings(client=ScriptedLM(["fine"]), plugins=[plugin]):
            return await forecast.arun("Oslo")

    _, record = asyncio.run(main())
    assert order == ["before_call", "request", "reply"]
    assert record.instruction.endswith("Async.")


def test_settings_blocks_hold_per_task_across_100_concurrent_calls():
    @ai
    def which(n: int) -> str:
        """Say which."""

    async def one(n: int) -> tuple[int, str, str]:
        lm = ScriptedLM([f"answer {n}"], delay=0.01)
        with functai.settings(client=lm, temperature=n / 100):
            await asyncio.sleep(0)
            value, record = await which.arun(n)
            return n, value, record.settings.get("temperature")

    async def main():
        return await asyncio.gather(*(one(n) for n in range(100)))

    for n, value, temperature in asyncio.run(main()):
        assert value == f"answer {n}"
        assert temperature == n / 100


def test_nested_async_calls_keep_their_parent():
    @ai(tools=[count])
    def outer(text: str) -> str:
        """Use count."""

    lm = ScriptedLM([tool_call("count", {"text": "a b"}), "2", "two"])
    with functai.settings(client=lm):
        _, record = asyncio.run(outer.arun("a b"))
    assert record.tool_calls[0]["output"] == "2"


# -- streams ----------------------------------------------------------------------------------


def kinds(events):
    return [e.kind for e in events]


def test_stream_gives_text_deltas_then_done_with_value_and_record():
    with functai.settings(client=ScriptedLM(["Hello there, world"], chunk=5)):
        stream = forecast.stream("Oslo")
        events = list(stream)
    assert kinds(events) == ["text"] * 4 + ["done"]
    assert "".join(e.text for e in events[:-1]) == "Hello there, world"
    assert events[-1].value == stream.value == "Hello there, world"
    assert events[-1].record is stream.record and stream.record.output == "Hello there, world"


def test_stream_of_a_typed_output_streams_text_and_parses_once_at_the_end():
    with functai.settings(client=ScriptedLM(["12345"], chunk=2)):
        stream = count.stream("a")
        events = list(stream)
    assert [e.text for e in events if e.kind == "text"] == ["12", "34", "5"]
    assert stream.value == 12345


def test_stream_notes_tool_calls_and_results():
    lm = ScriptedLM([tool_call("weather", {"city": "Oslo"}), "Sunny."])
    with functai.settings(client=lm):
        events = list(forecast.stream("Oslo"))
    call, result = events[0], events[1]
    assert (call.kind, call.name, call.input, call.path) == ("tool_call", "weather", {"city": "Oslo"}, "forecast/weather")
    assert (result.kind, result.name, result.output) == ("tool_result", "weather", "sunny in Oslo")
    assert kinds(events)[-1] == "done"


def test_a_client_that_cannot_stream_gives_one_text_event():
    class Plain:
        name = "plain"

        def complete(self, request):
            return functai.Reply(text="whole reply")

    with functai.settings(client=Plain()):
        events = list(forecast.stream("x"))
    assert kinds(events) == ["text", "done"] and events[0].text == "whole reply"

    async def main():
        return [e async for e in forecast.astream("x")]

    with functai.settings(client=Plain()):
        events = asyncio.run(main())
    assert kinds(events) == ["text", "done"] and events[0].text == "whole reply"


def test_stream_approve_lets_the_tool_run_in_process(install):
    install(functai_approval.plugin)
    ledger.clear()
    lm = ScriptedLM([tool_call("refund", {"order": "A7"}), "Refunded."])
    with functai.settings(client=lm, approve="changes"):
        stream = support.stream("refund A7")
        events = []
        for event in stream:
            events.append(event)
            if event.kind == "waiting":
                assert event.approvals[0]["name"] == "refund"
                stream.approve()
    assert kinds(events)[:3] == ["waiting", "tool_call", "tool_result"]
    assert ledger == ["A7"]
    assert stream.value == "Refunded."
    assert stream.record.tool_calls[0]["output"] == "refunded A7"


def test_stream_deny_refuses_with_the_reason(install):
    install(functai_approval.plugin)
    ledger.clear()
    lm = ScriptedLM([tool_call("refund", {"order": "A8"}), "Not refunded."])

    async def main():
        with functai.settings(client=lm, approve="changes"):
            stream = support.astream("refund A8")
            async for event in stream:
                if event.kind == "waiting":
                    stream.deny(reason="too late")
            return stream

    stream = asyncio.run(main())
    assert ledger == []
    entry = stream.record.tool_calls[0]
    assert entry["refused"] == "approval" and entry["refuse_reason"] == "too late"
    assert "too late" in lm.requests[1].messages[-1]["content"]


def test_an_unanswered_approval_in_a_plain_stream_refuses_approval_required(install):
    install(functai_approval.plugin)
    ledger.clear()
    lm = ScriptedLM([tool_call("refund", {"order": "A9"}), "x"])
    with functai.settings(client=lm, approve="changes"):
        stream = support.stream("refund A9")
        assert next(stream).kind == "waiting"
        with pytest.raises(ApprovalError):
            next(stream)
    assert ledger == []
    with pytest.raises(StopIteration):
        next(stream)


def test_answering_when_nothing_waits_is_refused():
    with functai.settings(client=ScriptedLM(["hi"])):
        stream = forecast.stream("x")
        with pytest.raises(FunctAIError) as caught:
            stream.approve()
    assert caught.value.code == "turn-not-waiting"


def test_the_consumer_does_not_see_the_call_in_progress_between_events():
    from functai._calls.run import current

    seen = []
    lm = ScriptedLM([tool_call("weather", {"city": "Oslo"}), "Sunny."])
    with functai.settings(client=lm):
        for event in forecast.stream("x"):
            seen.append(current.get())
    assert seen and all(frame is None for frame in seen)


def test_a_stream_event_has_the_documented_fields():
    event = StreamEvent("text", text="a")
    assert (event.kind, event.text, event.value) == ("text", "a", None)
    with pytest.raises(ValueError):
        StreamEvent("nope")


# -- conversations ------------------------------------------------------------------------------

from functai import Waiting  # noqa: E402


def test_a_streamed_turn_approved_at_the_stream_goes_on_in_process(install, tmp_path):
    install(functai_approval.plugin)
    ledger.clear()
    lm = ScriptedLM([tool_call("refund", {"order": "B1"}), "Refunded B1."])
    chat = support.conversation("alex", store=tmp_path / "chats", client=lm, approve="changes")
    stream = chat.stream("refund B1")
    seen = []
    for event in stream:
        seen.append(event.kind)
        if event.kind == "waiting":
            stream.approve(event.approvals[0])
    assert seen[0] == "waiting" and seen[-1] == "done"
    assert stream.value == "Refunded B1." and ledger == ["B1"]
    assert chat.head.state == "done" and chat.head.outputs["output"] == "Refunded B1."


def test_a_streamed_turn_not_answered_waits_and_is_saved_then_waiting_is_raised(install, tmp_path):
    install(functai_approval.plugin)
    ledger.clear()
    lm = ScriptedLM([tool_call("refund", {"order": "B2"}), "Refunded B2."])
    chat = support.conversation("sam", store=tmp_path / "chats", client=lm, approve="changes")
    stream = chat.stream("refund B2")
    assert next(stream).kind == "waiting"
    with pytest.raises(Waiting) as caught:
        next(stream)
    turn = caught.value.turn
    assert turn.state == "waiting" and ledger == []

    async def answer():
        turn.approve()
        return await turn.aresume()

    assert asyncio.run(answer()) == "Refunded B2."
    assert ledger == ["B2"] and len(lm.requests) == 2  # the first reply was not paid for twice


def test_chat_acall_and_astream_continue_the_same_branch(tmp_path):
    lm = ScriptedLM(["first", "second answer"])
    chat = forecast.conversation("kim", store=tmp_path / "chats", client=lm)

    async def main():
        first = await chat.acall("Oslo")
        events = [e async for e in chat.astream("Bergen")]
        return first, events

    first, events = asyncio.run(main())
    assert first == "first"
    assert "".join(e.text for e in events if e.kind == "text") == "second answer"
    assert [t.outputs["output"] for t in chat.turns] == ["first", "second answer"]
    assert any(m["content"] == "first" for m in lm.requests[1].messages)  # the second turn saw the first


def test_tasks_sharing_a_view_run_its_turns_one_at_a_time(tmp_path):
    lm = ScriptedLM(reply=lambda request: f"turn {len(request.messages)}", delay=0.01)
    chat = forecast.conversation("many", client=lm)

    async def main():
        await asyncio.gather(*(chat.acall(f"city {n}") for n in range(5)))

    asyncio.run(main())
    turns = chat.turns
    assert len(turns) == 5
    assert [t.parent for t in turns[1:]] == [t.id for t in turns[:-1]]  # one chain: each continued the one before


def test_async_turn_hooks_run_in_sync_and_async_turns(tmp_path):
    heard = []
    plugin = Plugin("turns", version="1.0.0")

    @plugin.turn_start
    async def start(event):
        return Change(inputs={"city": event.inputs["city"].title()})

    @plugin.turn_end
    async def end(event):
        heard.append(event.state)

    lm = ScriptedLM(["one", "two"])
    chat = forecast.conversation("hooks", client=lm, plugins=[plugin])
    chat("oslo")
    asyncio.run(chat.acall("bergen"))
    assert heard == ["done", "done"]
    assert [t.inputs["city"] for t in chat.turns] == ["Oslo", "Bergen"]
