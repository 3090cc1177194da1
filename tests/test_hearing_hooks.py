"""The hooks that only hear: ``reply`` after each model reply, ``call_end`` after each call."""

import asyncio
import warnings

import pytest

import functai
from functai import Change, Plugin, PluginError, Reply, ai, tool
from functai.testing import ScriptedLM, log_events, tool_call


@tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@ai(tools=[lookup])
def support(question: str) -> str:
    """Answer the customer."""


@ai
def count(text: str) -> int:
    """How many words."""


def test_reply_hears_every_attempt_with_request_reply_seconds_and_path():
    seen = []

    def listen(reply):
        seen.append((reply.attempt, reply.function, reply.path, reply.reply.finish_reason,
                     dict(reply.reply.usage), len(reply.request.messages), reply.seconds >= 0,
                     [c.name for c in reply.reply.tool_calls], reply.reply.text))

    lm = ScriptedLM([
        Reply(tool_calls=tool_call("lookup", {"order": "A1"}).tool_calls, finish_reason="tool_calls",
              usage={"input_tokens": 10, "output_tokens": 3}),
        Reply(text="It shipped.", finish_reason="stop", usage={"input_tokens": 20, "output_tokens": 4}),
    ])
    functai.configure(client=lm, plugins=[Plugin("ear", reply=listen)])
    value, record = support.run("where is A1?")
    assert value == "It shipped."
    assert seen == [
        (1, "support", "support", "tool_calls", {"input_tokens": 10, "output_tokens": 3}, 2, True, ["lookup"], None),
        (2, "support", "support", "stop", {"input_tokens": 20, "output_tokens": 4}, 4, True, [], "It shipped."),
    ]
    assert record.changes == [] and record.replayable


def test_reply_sees_the_request_that_was_sent_after_a_replacement_and_reasks():
    sent = []
    functai.configure(client=ScriptedLM(["many", "3"]),
                      plugins=[Plugin("ear", reply=lambda r: sent.append((r.attempt, r.request, r.reply.text)))])
    assert count("a b c") == 3
    assert [(a, t) for a, _, t in sent] == [(1, "many"), (2, "3")]
    assert "could not be read" in sent[1][1].messages[-1]["content"]


def test_call_end_hears_each_call_with_record_error_seconds_usage_nested_first():
    ends = []

    @ai
    def inner(text: str) -> str:
        """Say it back."""

    @ai(tools=[inner])
    def outer(text: str) -> str:
        """Ask inner."""

    def listen(call):
        ends.append((call.function, call.path, call.error, dict(call.usage), call.seconds >= 0,
                     call.record.id, call.record.parent, call.record.output))

    functai.configure(
        client=ScriptedLM([tool_call("inner", {"text": "hi"}), Reply(text="hi", usage={"input_tokens": 2}),
                           Reply(text="done", usage={"input_tokens": 5, "output_tokens": 1})]),
        plugins=[Plugin("ear", call_end=listen)],
    )
    value, record = outer.run("x")
    assert [e[:5] for e in ends] == [
        ("inner", "outer/inner", None, {"input_tokens": 2}, True),
        ("outer", "outer", None, {"input_tokens": 5, "output_tokens": 1}, True),
    ]
    assert ends[1][5] == record.id and ends[0][6] == record.id and ends[1][7] == "done"


def test_call_end_hears_a_failed_call_with_its_error_code():
    ends = []
    functai.configure(client=ScriptedLM(["many", "lots"]),
                      plugins=[Plugin("ear", call_end=lambda call: ends.append((call.error, call.record.error)))])
    with pytest.raises(functai.OutputError):
        count("a b")
    assert ends == [("output-invalid", ends[0][1])] and ends[0][1]["code"] == "output-invalid"


def test_call_end_record_is_read_only_and_is_the_record_as_written():
    got = {}

    def listen(call):
        got["record"] = call.record
        with pytest.raises(AttributeError):
            call.record.output = "changed"
        with pytest.raises(TypeError):
            call.record.inputs["text"] = "changed"
        with pytest.raises(AttributeError):
            call.record.changes.append({})
        with pytest.raises(AttributeError):
            call.error = None
        got["data"] = call.record.to_dict()
        got["data"]["output"] = "a copy"

    functai.configure(client=ScriptedLM(["secret answer"]), log_content=False,
                      plugins=[Plugin("ear", call_end=listen)])
    value, record = support.run("secret question")
    assert value == "secret answer"
    assert got["record"].inputs["question"] == {"chars": len("secret question")}
    assert got["record"].output == {"chars": len("secret answer")}
    assert record.output == {"chars": len("secret answer")}


def test_a_raising_call_end_handler_is_reported_and_changes_nothing():
    def broken(event):
        raise RuntimeError("ear broke")

    lm = ScriptedLM([tool_call("lookup", {"order": "A1"}), "It shipped."])
    functai.configure(client=lm, plugins=[Plugin("broken", call_end=broken)])
    with log_events() as caught:
        value, record = support.run("where?")
    assert value == "It shipped."
    assert record.error is None and record.changes == [] and "heard" not in record.to_dict()
    messages = caught.messages
    assert sum("plugin=broken" in m and "hook=call_end" in m and "ear broke" in m for m in messages) == 1


def test_a_raising_reply_handler_stops_the_call():
    # A reply handler may replace the reply (a redaction): one that failed must not let the reply through.
    def broken(event):
        raise RuntimeError("redactor broke")

    functai.configure(client=ScriptedLM(["secret"]), plugins=[Plugin("redact", reply=broken)])
    with pytest.raises(PluginError) as info:
        support.run("q")
    assert info.value.code == "plugin-failed" and info.value.hook == "reply"
    assert "redactor broke" in info.value.message and info.value.record.output is None


def test_what_a_call_end_handler_returns_is_ignored_and_a_reply_handler_change_must_fit():
    functai.configure(client=ScriptedLM(["ok"]), plugins=[Plugin("sly", call_end=lambda c: Change(sections=["y"]))])
    value, record = support.run("q")
    assert value == "ok" and record.changes == [] and record.instruction == "Answer the customer."
    functai.configure(client=ScriptedLM(["ok"]), plugins=[Plugin("sly", reply=lambda r: Change(sections=["x"]))])
    with pytest.raises(PluginError) as info:
        support.run("q")
    assert info.value.code == "plugin-change" and info.value.field == "sections" and info.value.hook == "reply"


def test_async_hearing_handlers_run_to_their_end_in_a_plain_call():
    heard = []

    async def listen(reply):
        await asyncio.sleep(0)
        heard.append(("reply", reply.attempt))

    async def ended(call):
        await asyncio.sleep(0)
        heard.append(("call_end", call.function))

    functai.configure(client=ScriptedLM(["ok"]), plugins=[Plugin("aear", reply=listen, call_end=ended)])
    assert support("q") == "ok"

    async def from_async_code():
        return support("q")

    functai.configure(client=ScriptedLM(["again"]))
    assert asyncio.run(from_async_code()) == "again"
    assert heard == [("reply", 1), ("call_end", "support")] * 2


def test_hookimpl_modules_can_hear(tmp_path):
    (tmp_path / "ears.py").write_text(
        "import functai\n"
        "seen = []\n"
        "@functai.hookimpl\n"
        "def reply(reply):\n"
        "    seen.append(reply.reply.text)\n"
        "@functai.hookimpl\n"
        "def call_end(call):\n"
        "    seen.append(call.function)\n"
        "plugin = __import__('sys').modules[__name__]\n"
    )
    plugin = functai.load_plugin(str(tmp_path / "ears.py"))
    assert plugin.hooks == ("reply", "call_end")
    functai.configure(client=ScriptedLM(["ok"]), plugins=[plugin])
    support("q")
    import sys

    module = next(m for m in sys.modules.values() if getattr(m, "__file__", None) == str(tmp_path / "ears.py"))
    assert module.seen == ["ok", "support"]


def test_the_hook_table_has_the_hearing_hooks_in_firing_order():
    assert functai.HOOKS == ("turn_start", "context", "before_call", "request", "model_error", "chunk", "reply",
                             "tool_call", "tool_error", "tool_result", "call_end", "turn_end", "turn_wait",
                             "turn_answer")
