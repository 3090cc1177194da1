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
