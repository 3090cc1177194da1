"""Limits on runaway calls: max_depth, max_requests, and errors that rise out of tools."""

import pytest

import functai
from functai import FunctAIError, ai, tool
from functai.testing import ScriptedLM, tool_call


def always_asks(name, input):
    """A model that asks for the tool ``name`` at every request (what a runaway looks like)."""
    return ScriptedLM(reply=lambda request: tool_call(name, input))


# An AI function offered as its own tool (through a @tool whose body is the function itself).


@tool(effects="reads")
def again(task: str) -> str:
    """Ask the agent again."""
    return agent(task)


@ai(tools=[again])
def agent(task: str) -> str:
    """Do the task, asking again when it helps."""


# A cycle through two AI functions: ping has pong as its tool, pong a tool that calls ping.


@tool(effects="reads")
def back_to_ping(task: str) -> str:
    """Hand back to ping."""
    return ping(task)


@ai(tools=[back_to_ping])
def pong(task: str) -> str:
    """Pong the task."""


@ai(tools=[pong])
def ping(task: str) -> str:
    """Ping the task."""


def cycle_model():
    def reply(request):
        if request.messages[0]["content"].startswith("Ping"):
            return tool_call("pong", {"task": "t"})
        return tool_call("back_to_ping", {"task": "t"})

    return ScriptedLM(reply=reply)


def test_a_function_that_is_its_own_tool_stops_at_max_depth_with_a_coded_error(tmp_path):
    lm = always_asks("again", {"task": "t"})
    functai.configure(client=lm, log_calls=str(tmp_path))
    with pytest.raises(FunctAIError) as info:
        agent("t")
    assert info.value.code == "max-depth"
    assert "max_depth=8" in info.value.message
    # 8 calls each asked once; the ninth refused before asking anything.
    assert len(lm.requests) == 8
    assert not any("The tool failed" in str(m.get("content")) for r in lm.requests for m in r.messages)
    logged = list(functai.read_calls(tmp_path))
    assert len(logged) == 9 and {r.error["code"] for r in logged} == {"max-depth"}
    outermost = [r for r in logged if r.parent is None]
    assert len(outermost) == 1 and outermost[0].path == "agent"
    assert outermost[0].tool_calls[0]["error"].startswith("max-depth: ")


def test_max_depth_is_a_setting():
    lm = always_asks("again", {"task": "t"})
    with functai.settings(client=lm, max_depth=3):
        with pytest.raises(FunctAIError) as info:
            agent("t")
    assert info.value.code == "max-depth" and len(lm.requests) == 3
    with pytest.raises(ValueError):
        functai.configure(max_depth=0)
    with pytest.raises(TypeError):
        functai.configure(max_requests="50")


def test_a_cycle_through_two_functions_is_bounded_too():
    lm = cycle_model()
    functai.configure(client=lm)
    with pytest.raises(FunctAIError) as info:
        ping("t")
    assert info.value.code == "max-depth"
    assert len(lm.requests) == 8
    assert info.value.record.path == "ping/pong/ping/pong/ping/pong/ping/pong/ping"


def test_max_requests_counts_every_request_of_the_outermost_call_and_its_nested_calls(tmp_path):
    lm = cycle_model()
    functai.configure(client=lm, log_calls=str(tmp_path), max_depth=100)
    with pytest.raises(FunctAIError) as info:
        ping("t")
    assert info.value.code == "max-requests"
    assert "max_requests=50" in info.value.message
    assert len(lm.requests) == 50
    outermost = [r for r in functai.read_calls(tmp_path) if r.parent is None]
    assert [r.error["code"] for r in outermost] == ["max-requests"]


def test_max_requests_counts_tool_steps_and_reasks_within_one_call():
    @tool(effects="reads")
    def look(key: str) -> str:
        """Look."""
        return "v"

    @ai(tools=[look], max_steps=100)
    def busy(q: str) -> int:
        """Busy."""

    lm = ScriptedLM([tool_call("look", {"key": "k"})] * 3 + ["not a number", "7"])
    with functai.settings(client=lm, max_requests=5):
        assert busy("q") == 7
    lm = ScriptedLM([tool_call("look", {"key": "k"})] * 3 + ["not a number", "7"])
    with functai.settings(client=lm, max_requests=4):
        with pytest.raises(FunctAIError) as info:
            busy("q")
    assert info.value.code == "max-requests" and len(lm.requests) == 4


def test_each_outermost_call_has_its_own_budget():
    lm = ScriptedLM(reply=lambda request: "fine")

    @ai
    def plain(q: str) -> str:
        """Plain."""

    with functai.settings(client=lm, max_requests=1):
        for _ in range(3):
            assert plain("q") == "fine"


def test_a_nested_max_steps_rises_instead_of_being_shown_to_the_model():
    @tool(effects="reads")
    def look(key: str) -> str:
        """Look."""
        return "v"

    @ai(tools=[look], max_steps=2)
    def inner(q: str) -> str:
        """Inner looks forever."""

    @ai(tools=[inner])
    def outer(q: str) -> str:
        """Outer asks inner."""

    def reply(request):
        if request.messages[0]["content"].startswith("Inner"):
            return tool_call("look", {"key": "k"})
        if request.messages[-1]["role"] == "tool":
            return "outer done"
        return tool_call("inner", {"q": "x"})

    lm = ScriptedLM(reply=reply)
    functai.configure(client=lm)
    with pytest.raises(FunctAIError) as info:
        outer("q")
    assert info.value.code == "max-steps"
    assert not any(r.messages[-1]["role"] == "tool" and r.messages[0]["content"].startswith("Outer")
                   for r in lm.requests)


def test_an_ordinary_error_of_a_nested_call_is_still_shown_to_the_model():
    @ai
    def inner(q: str) -> str:
        """Inner."""

    @ai(tools=[inner])
    def outer(q: str) -> str:
        """Outer asks inner."""

    def reply(request):
        if request.messages[0]["content"].startswith("Inner"):
            raise functai._errors.ModelError("the service is down", code="model-http", status=503)
        if request.messages[-1]["role"] == "tool":
            return "told: " + request.messages[-1]["content"]
        return tool_call("inner", {"q": "x"})

    functai.configure(client=ScriptedLM(reply=reply))
    assert outer("q") == "told: The tool failed: the service is down"


def test_an_ai_function_holding_itself_as_a_tool_is_bounded():
    @ai
    def itself(task: str) -> str:
        """Itself: do the task, asking itself again."""

    itself.tools, itself.tool_names = (itself,), ("itself",)  # offered directly as its own tool
    assert itself.effects == "reads"  # the cycle adds nothing that changes things
    lm = always_asks("itself", {"task": "t"})
    with functai.settings(client=lm, max_depth=20, max_requests=12):
        with pytest.raises(FunctAIError) as info:
            itself("t")
    assert info.value.code == "max-requests" and len(lm.requests) == 12
    lm = always_asks("itself", {"task": "t"})
    with functai.settings(client=lm):
        with pytest.raises(FunctAIError) as info:
            itself("t")
    assert info.value.code == "max-depth" and len(lm.requests) == 8


def test_runaway_inside_a_conversation_turn_ends_the_turn_with_the_code():
    lm = always_asks("again", {"task": "t"})
    with functai.settings(client=lm, max_depth=3):
        chat = agent.conversation("runaway")
        with pytest.raises(FunctAIError) as info:
            chat("t")
    assert info.value.code == "max-depth" and len(lm.requests) == 3
    assert chat.turns[-1].state == "failed"
