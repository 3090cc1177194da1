"""Per-handler timing in records: ``record_timing=True`` adds ``µs``; off, nothing changes."""

import io
import time

import pytest

import functai
from functai import Change, Plugin, ai, tool
from functai._cli import main
from functai.testing import ScriptedLM, tool_call


@tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return "shipped"


@ai(tools=[lookup])
def support(question: str) -> str:
    """Answer the customer."""


def slow_section(call):
    time.sleep(0.005)
    return Change(sections=["Be brief."])


def plugins():
    return [
        Plugin("style", version="1.0.0", before_call=slow_section,
               tool_result=lambda result: Change(output=result.output.upper())),
        Plugin("guard", tool_call=lambda tool: Change(inputs={"order": "B2"})),
        Plugin("router", request=lambda event: None),
        Plugin("ear", version="0.3.0", reply=lambda reply: None, call_end=lambda call: time.sleep(0.002)),
    ]


def run(**settings):
    settings.setdefault("record_timing", None)  # unset unless given: configure keeps what it was told before
    functai.configure(client=ScriptedLM([tool_call("lookup", {"order": "A1"}), "It shipped."]),
                      plugins=plugins(), **settings)
    return support.run("where?")[1]


def test_with_record_timing_each_change_and_each_heard_hook_has_microseconds():
    record = run(record_timing=True)
    assert [(c["plugin"], c["hook"]) for c in record.changes] == [
        ("style", "before_call"), ("guard", "tool_call"), ("style", "tool_result")]
    for change in record.changes:
        assert isinstance(change["µs"], float) and change["µs"] >= 0
    assert record.changes[0]["µs"] >= 5000  # it slept 5 ms
    assert [(h["plugin"], h["version"], h["hook"]) for h in record.heard] == [
        ("ear", "0.3.0", "reply"), ("ear", "0.3.0", "reply"), ("ear", "0.3.0", "call_end")]
    assert record.heard[-1]["µs"] >= 2000
    assert record.to_dict()["heard"] == record.heard


def test_without_it_nothing_in_the_record_changes():
    on, off = run(record_timing=True).to_dict(), run().to_dict()
    assert "heard" not in off and all("µs" not in c for c in off["changes"])
    assert set(on) - set(off) == {"heard"}
    assert [{k: v for k, v in c.items() if k != "µs"} for c in on["changes"]] == off["changes"]


def test_timing_in_a_block_applies_to_the_calls_inside_only():
    functai.configure(client=ScriptedLM(["a", "b"]), plugins=[Plugin("style", before_call=slow_section)])
    with functai.settings(record_timing=True):
        inside = support.run("q")[1]
    outside = support.run("q")[1]
    assert "µs" in inside.changes[0] and "µs" not in outside.changes[0]


def test_a_refused_record_timing_value():
    with pytest.raises(TypeError, match="record_timing must be True or False"):
        functai.configure(record_timing="yes")


def test_functai_show_timing_lists_the_slowest_handlers_first(tmp_path):
    run(record_timing=True, log_calls=str(tmp_path))
    [record] = functai.read_calls(str(tmp_path))
    out = io.StringIO()
    assert main(["show", record.id[:8], "--timing", "--log", str(tmp_path)], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"call {record.id} (support): 6 handler runs")
    assert lines[1].split() == ["µs", "PLUGIN", "VERSION", "HOOK", "WHAT"]
    rows = sorted(line.split()[1:] for line in lines[2:])
    assert rows == sorted([["style", "1.0.0", "before_call", "changed"], ["guard", "0.0.0", "tool_call", "changed"],
                           ["style", "1.0.0", "tool_result", "changed"], ["ear", "0.3.0", "reply", "heard"],
                           ["ear", "0.3.0", "reply", "heard"], ["ear", "0.3.0", "call_end", "heard"]])
    shown = [float(line.split()[0].replace(",", "")) for line in lines[2:]]
    recorded = [c["µs"] for c in record.changes] + [h["µs"] for h in record.heard]
    assert shown == sorted(recorded, reverse=True)


def test_functai_show_timing_says_when_a_record_has_none(tmp_path):
    run(log_calls=str(tmp_path))
    [record] = functai.read_calls(str(tmp_path))
    err = io.StringIO()
    assert main(["show", record.id, "--timing", "--log", str(tmp_path)], out=io.StringIO(), err=err) == 2
    assert "no-timing" in err.getvalue() and "record_timing=True" in err.getvalue()


def test_an_async_handler_is_timed_until_it_is_done():
    import asyncio

    async def slow(call):
        await asyncio.sleep(0.004)
        return Change(sections=["Late."])

    functai.configure(client=ScriptedLM(["ok"]), plugins=[Plugin("late", before_call=slow)], record_timing=True)
    record = support.run("q")[1]
    assert record.changes[0]["plugin"] == "late" and record.changes[0]["µs"] >= 4000
