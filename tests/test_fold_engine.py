"""The fold's bookkeeping — events made in one step, each change recorded as its entry
when folded — reads the same to every reader of a record."""

import asyncio
import copy
import pickle

import attrs
import pytest

import functai
from functai import Change, Plugin, ai
from functai._calls import records
from functai._hooks.events import CallEvent, RequestEvent, ToolCallEvent, TurnStartEvent
from functai.testing import ScriptedLM


@pytest.fixture
def lm():
    script = ScriptedLM(reply=lambda request: "ok")
    functai.configure(client=script)
    return script


@ai
def answer(q: str) -> str:
    """Answer."""


def entry(plugin, hook, change, version="0.0.0"):
    return {"plugin": plugin, "version": version, "hook": hook, "change": change}


def test_changes_are_recorded_as_entries(lm):
    plugins = [
        Plugin("one", before_call=lambda call: Change(sections=["One."])),
        Plugin("two", version="2.0.0", before_call=lambda call: Change(lm="m2", settings={"temperature": 0.5})),
    ]
    with functai.settings(plugins=plugins):
        value, record = answer.run("x")
    expected = [
        entry("one", "before_call", {"sections": ["One."]}),
        entry("two", "before_call", {"lm": "m2", "settings": {"temperature": 0.5}}, "2.0.0"),
    ]
    assert record.changes == expected
    assert record.changes is record.changes


def test_every_way_of_reading_a_record_sees_the_entries(lm):
    plugin = Plugin("one", before_call=lambda call: Change(sections=["One."], tools=[]))
    with functai.settings(plugins=[plugin]):
        fresh = [answer.run("x")[1] for _ in range(6)]
    expected = [entry("one", "before_call", {"sections": ["One."], "tools": []})]
    readers = [
        lambda r: r.to_dict()["changes"],
        lambda r: attrs.asdict(r)["changes"],
        lambda r: pickle.loads(pickle.dumps(r)).changes,
        lambda r: copy.deepcopy(r).changes,
        lambda r: attrs.evolve(r).changes,
        lambda r: records.CallRecord.from_dict(r.to_dict()).changes,
    ]
    for record, read in zip(fresh, readers):
        assert read(record) == expected
    with functai.settings(plugins=[plugin]):
        record = answer.run("x")[1]
    assert "changes=[{'plugin': 'one', 'version': '0.0.0', 'hook': 'before_call'" in repr(record)


def test_a_change_is_recorded_as_it_was_made(lm):
    """Neither the list a handler passed nor its plugin's version, changed later, alter the record."""
    rules = ["Be brief."]
    plugin = Plugin("rules", version="1.0.0", before_call=lambda call: Change(sections=rules))
    with functai.settings(plugins=[plugin]):
        value, record = answer.run("x")
    rules.append("Be rude.")
    plugin.version = "9.9.9"
    assert record.changes == [entry("rules", "before_call", {"sections": ["Be brief."]}, "1.0.0")]


def test_entries_appended_after_tuples_keep_their_order(lm):
    """A request replacement (an entry made at once) after before_call's tuples."""
    plugin = Plugin(
        "both",
        before_call=lambda call: Change(sections=["S."]),
        request=lambda event: attrs.evolve(event.request, settings={"seed": 1}),
    )
    with functai.settings(plugins=[plugin]):
        value, record = answer.run("x")
    assert record.changes == [entry("both", "before_call", {"sections": ["S."]}),
                              entry("both", "request", {"request": "replaced"})]


def test_an_async_handler_between_plain_ones_keeps_its_plugin_and_order(lm):
    seen = []

    async def slow(call):
        await asyncio.sleep(0)
        seen.append(("slow", call.sections, call.entries("k")))  # still slow's own, after the await
        return Change(sections=["Slow."])

    def last(call):
        seen.append(("last", call.sections))
        return Change(sections=["Last."])

    plugins = [Plugin("first", before_call=lambda call: Change(sections=["First."])),
               Plugin("slow", before_call=slow), Plugin("last", before_call=last)]
    chat = answer.conversation("async-fold", plugins=plugins)
    chat.remember("slow", "k", "slow's entry")
    chat.remember("first", "k", "first's entry")
    for run in (lambda: chat("x"), lambda: asyncio.run(chat.acall("y"))):
        seen.clear()
        run()
        assert [s[:2] for s in seen] == [("slow", ("First.",)), ("last", ("First.", "Slow."))]
        assert [e["data"] for e in seen[0][2]] == ["slow's entry"]
        assert lm.requests[-1].messages[0]["content"] == "Answer.\n\nFirst.\n\nSlow.\n\nLast."


def test_a_failing_async_handler_is_named_and_stops_the_fold(lm):
    async def broken(call):
        raise RuntimeError("boom")

    ran = []
    plugins = [Plugin("broken", before_call=broken), Plugin("after", before_call=lambda c: ran.append(1))]
    with functai.settings(plugins=plugins):
        with pytest.raises(functai.PluginError) as info:
            answer("x")
    assert (info.value.code, info.value.plugin, info.value.hook) == ("plugin-failed", "broken", "before_call")
    assert ran == [] and lm.requests == []


def test_events_are_made_in_one_step_and_stay_read_only():
    inputs = {"q": "x"}
    made = CallEvent(function="f", program=None, inputs=inputs, instruction="I.", sections=(), lm=None,
                     settings={}, tools=(), all_tools=(), path="f")
    assert "CallEvent(function='f', program=None, inputs=mappingproxy({'q': 'x'})" in repr(made)
    assert (made.conversation, made.turn, made._plugin, made._memory) == (None, None, None, None)
    assert made.entries("k") == []
    with pytest.raises(TypeError):
        made.inputs["q"] = "changed"  # a read-only view of the call's inputs
    with pytest.raises(AttributeError, match="read-only"):
        made.sections = ("x",)
    twin = CallEvent(function="f", program=None, inputs=inputs, instruction="I.", sections=(), lm=None,
                     settings={}, tools=(), all_tools=(), path="f")
    assert made != twin and made == made and len({made, twin}) == 2  # an event is itself, not its fields
    with pytest.raises(TypeError, match="no field 'nope'"):
        TurnStartEvent(inputs={}, nope=1)
    with pytest.raises(TypeError, match="no field '_plugin'"):
        RequestEvent(request=None, _plugin="sneaky")
    tool = ToolCallEvent(name="t", input={}, ask_person=None)
    assert (tool.name, tool.effects) == ("t", None)
    with pytest.raises(RuntimeError, match="nobody can be asked"):
        tool.ask()


def test_a_before_call_handler_sees_the_conversation_and_the_inputs_read_only(lm):
    seen = []

    def look(call):
        seen.append((call.conversation, call.turn is not None, dict(call.inputs), call.function, call.path))
        with pytest.raises(TypeError):
            call.inputs["q"] = "changed"

    chat = answer.conversation("seen", plugins=[Plugin("look", before_call=look)])
    chat("in a turn")
    with functai.settings(plugins=[Plugin("look", before_call=look)]):
        answer("outside")
    assert seen == [("seen", True, {"q": "in a turn"}, "answer", "answer"),
                    (None, False, {"q": "outside"}, "answer", "answer")]
