"""Tools, the tool loop, the tool hooks, and approval."""


import functai_approval
import pytest

import functai
from functai._calls.approvals import digest
from functai import ApprovalError, Change, FunctAIError, Plugin, PluginError, ai, tool
from functai.testing import ScriptedLM, log_events, tool_call, tool_calls


def routed(**scripts):
    """A ScriptedLM answering each function (by its instruction's first word) from its own list."""
    queues = {key: list(replies) for key, replies in scripts.items()}

    def reply(request):
        system = request.messages[0]["content"]
        for key, queue in queues.items():
            if system.startswith(key):
                return queue.pop(0)
        raise AssertionError(f"no script for {system!r}")

    lm = ScriptedLM(reply=reply)
    functai.configure(client=lm)
    return lm


def tool_messages(request):
    return [m for m in request.messages if m["role"] == "tool"]


ran = []


@tool(effects="changes")
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    ran.append(("refund", order, amount))
    return f"refunded {amount} on {order}"


@tool(effects="reads")
def order_status(order: str) -> str:
    """Look up an order."""
    ran.append(("order_status", order))
    return "shipped"


@tool
def send_email(to: str, text: str) -> str:
    """Send an email."""
    ran.append(("send_email", to, text))
    return "sent"


@ai(tools=[refund, order_status])
def answer(question: str) -> str:
    """Answer the customer's question."""


@tool(effects="reads")
def consult(question: str) -> str:
    """Ask the answering desk (an AI function called from a tool: its calls are at support/answer)."""
    return answer(question)


@ai(tools=[consult, send_email])
def support(request: str) -> str:
    """Support the customer."""


@ai(tools=[answer])
def desk(request: str) -> str:
    """Desk: hand questions to the answer function."""


@pytest.fixture(autouse=True)
def _clear_ran():
    ran.clear()


# tools -----------------------------------------------------------------------------


def test_schema_from_signature_and_docstring():
    assert refund.schema() == {
        "name": "refund",
        "description": "Refund an order.",
        "parameters": {
            "type": "object",
            "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["order", "amount"],
            "additionalProperties": False,
        },
    }
    assert (refund.effects, order_status.effects, send_email.effects) == ("changes", "reads", None)
    with pytest.raises(ValueError, match="effects"):
        tool(effects="writes")
    with pytest.raises(ValueError):
        tool(lambda: None, effects="sometimes")


def test_the_tool_loop_runs_tools_and_sends_results_back():
    lm = routed(Answer=[tool_call("order_status", {"order": "A1"}), "It has shipped."])
    value, record = answer.run("Where is A1?")
    assert value == "It has shipped."
    assert ran == [("order_status", "A1")]
    second = lm.requests[1]
    assert [t["name"] for t in second.tools] == ["refund", "order_status"]
    assert second.messages[-2]["tool_calls"][0]["name"] == "order_status"
    assert tool_messages(second) == [
        {"role": "tool", "tool_call_id": second.messages[-2]["tool_calls"][0]["id"], "name": "order_status",
         "content": "shipped"}
    ]
    assert record.tool_calls == [
        {"name": "order_status", "id": record.tool_calls[0]["id"], "input": {"order": "A1"}, "output": "shipped"}
    ]


def test_parallel_tool_calls_in_one_reply_run_in_order():
    lm = routed(Answer=[
        tool_calls([("order_status", {"order": "A1"}), ("refund", {"order": "A1", "amount": 5}),
                    ("order_status", {"order": "B2"})]),
        "done",
    ])
    answer("x")
    assert ran == [("order_status", "A1"), ("refund", "A1", 5), ("order_status", "B2")]
    assert [m["content"] for m in tool_messages(lm.requests[1])] == ["shipped", "refunded 5 on A1", "shipped"]


def test_an_invented_tool_runs_nothing_and_the_model_is_told():
    lm = routed(Answer=[tool_call("delete_everything", {}), "sorry"])
    value, record = answer.run("x")
    assert ran == []
    told = tool_messages(lm.requests[1])[0]["content"]
    assert "no tool named 'delete_everything'" in told and "refund, order_status" in told
    assert record.tool_calls[0]["error"] == "no such tool"


def test_a_tool_that_raises_is_an_error_result_not_a_crash():
    @tool(effects="reads")
    def flaky(x: str) -> str:
        """Fails."""
        raise ValueError("disk on fire")

    @ai(tools=[flaky])
    def use(q: str) -> str:
        """Use it."""

    lm = routed(Use=[tool_call("flaky", {"x": "1"}), "it failed"])
    value, record = use.run("q")
    assert value == "it failed"
    assert "ValueError: disk on fire" in tool_messages(lm.requests[1])[0]["content"]
    assert record.tool_calls[0]["error"] == "ValueError: disk on fire"


def test_max_steps_bounds_the_loop():
    routed(Answer=[tool_call("order_status", {"order": "A"})] * 5)
    with pytest.raises(FunctAIError) as info:
        ai(tools=[order_status], max_steps=3)(answer.fn)("x")
    assert info.value.code == "max-steps"
    assert len(ran) == 3


def test_an_ai_function_used_directly_as_a_tool_sits_under_the_asking_call(tmp_path):
    lm = routed(Desk=[tool_call("answer", {"question": "Where is A1?"}), "All good."], Answer=["It has shipped."])
    functai.configure(log_calls=str(tmp_path))
    value, outer = desk.run("help")
    assert value == "All good."
    assert desk.tool_schemas(("answer",))[0]["parameters"]["required"] == ["question"]
    assert tool_messages(lm.requests[2])[0]["content"] == "It has shipped."
    assert outer.tool_calls[0]["output"] == "It has shipped."
    inner, logged_outer = functai.read_calls(tmp_path)
    assert (inner.path, logged_outer.path) == ("desk/answer", "desk")
    assert inner.parent == outer.id == logged_outer.id



def test_an_ai_function_as_a_tool_builds_its_input_schema_once(monkeypatch):
    from functai._calls import tools as tools_module

    built = []
    real = tools_module.ToolInputs
    monkeypatch.setattr(tools_module, "ToolInputs", lambda *args: built.append(args[2]) or real(*args))

    @ai
    def lookup(order: str, count: int = 1) -> str:
        """Lookup: find an order."""

    @ai(tools=[lookup])
    def clerk(question: str) -> str:
        """Clerk: answer with the lookup."""

    routed(Clerk=[tool_call("lookup", {"order": "A1"}), "done"] * 3, Lookup=["shipped"] * 3)
    for _ in range(3):  # each call offers the tool and runs one tool call of it
        assert clerk("where is A1?") == "done"
    assert built == ["lookup"]  # its inputs' schema and readers, built once
    assert tools_module.as_tool(lookup) is tools_module.as_tool(lookup)


def test_an_ai_function_tool_schema_follows_a_replaced_signature():
    import inspect
    import typing

    from functai._calls.tools import as_tool

    @ai
    def lookup(order: str) -> str:
        """Lookup: find an order."""

    def wider(order: str, count: int) -> str: ...

    first = as_tool(lookup)
    assert first.schema()["parameters"]["required"] == ["order"]
    lookup.signature, lookup._hints = inspect.signature(wider), typing.get_type_hints(wider)
    second = as_tool(lookup)
    assert second is not first
    assert second.schema()["parameters"]["required"] == ["order", "count"]
    assert second.schema()["parameters"]["properties"]["count"] == {"type": "integer"}


# the tool hooks ----------------------------------------------------------------------


def test_tool_call_inputs_merge_and_the_rewritten_input_runs():
    seen = []
    first = Plugin("first", tool_call=lambda t: Change(inputs={"amount": 1}))

    def second_handler(t):
        seen.append(dict(t.input))
        return Change(inputs={"order": "B2"})

    routed(Answer=[tool_call("refund", {"order": "A1", "amount": 500}), "ok"])
    with functai.settings(plugins=[first, Plugin("second", tool_call=second_handler)]):
        value, record = answer.run("x")
    assert seen == [{"order": "A1", "amount": 1}]
    assert ran == [("refund", "B2", 1)]
    assert record.tool_calls[0]["input"] == {"order": "B2", "amount": 1}
    assert [(c["plugin"], c["hook"], c["change"]) for c in record.changes] == [
        ("first", "tool_call", {"inputs": {"amount": 1}}),
        ("second", "tool_call", {"inputs": {"order": "B2"}}),
    ]


def test_the_event_of_a_tool_call():
    events = []
    routed(Support=[tool_call("consult", {"question": "q"}), "ok"],
           Answer=[tool_calls([("order_status", {"order": "A"}), ("refund", {"order": "A", "amount": 2})]), "ok"])
    with functai.settings(plugins=[Plugin("spy", tool_call=lambda t: events.append(
            (t.name, dict(t.input), t.effects, t.path, t.invocation, t.function, t.id.startswith("call_"))))]):
        support("help")
    assert events == [
        ("consult", {"question": "q"}, "reads", "support/consult", 1, "support", True),
        ("order_status", {"order": "A"}, "reads", "support/answer/order_status", 1, "answer", True),
        ("refund", {"order": "A", "amount": 2}, "changes", "support/answer/refund", 2, "answer", True),
    ]


def test_a_block_by_the_second_of_three_ends_the_hook():
    log = []
    one = Plugin("one", tool_call=lambda t: log.append("one"))
    def paused(tool):
        log.append("two")
        raise functai.FunctAIError("refunds are paused", code="refunds-paused")

    two = Plugin("two", tool_call=paused)
    two.on("tool_call", lambda t: log.append("two-again"))
    three = Plugin("three", tool_call=lambda t: log.append("three"))
    lm = routed(Answer=[tool_call("refund", {"order": "A1", "amount": 5}), "ok"])
    with functai.settings(plugins=[one, two, three]):
        value, record = answer.run("x")
    assert log == ["one", "two"]
    assert ran == []
    assert tool_messages(lm.requests[1])[0]["content"] == "This call was blocked (two): refunds are paused"
    assert record.tool_calls[0]["blocked"] == "two"
    assert record.changes[-1] == {"plugin": "two", "version": "0.0.0", "hook": "tool_call",
                                  "change": {"block": "refunds are paused", "code": "refunds-paused"}}


def test_a_raising_tool_call_handler_blocks_the_tool_and_warns():
    def broken(t):
        raise RuntimeError("guard crashed")

    lm = routed(Answer=[tool_call("refund", {"order": "A1", "amount": 5}), "ok"])
    with functai.settings(plugins=[Plugin("guard", tool_call=broken)]):
        with log_events() as logged:
            value, record = answer.run("x")
        assert logged.named("guard")
    assert value == "ok" and ran == []
    assert tool_messages(lm.requests[1])[0]["content"] == "This call was blocked (guard): a check failed"
    assert record.tool_calls[0]["blocked"] == "guard"
    assert record.changes == [{"plugin": "guard", "version": "0.0.0", "hook": "tool_call",
                               "change": {"block": "a check failed"}}]


def test_tool_result_replaces_the_output_the_model_is_shown():
    lm = routed(Answer=[tool_call("order_status", {"order": "A1"}), "ok"])
    redact = Plugin("redact", tool_result=lambda r: Change(output=r.output.upper()))
    with functai.settings(plugins=[redact]):
        value, record = answer.run("x")
    assert tool_messages(lm.requests[1])[0]["content"] == "SHIPPED"
    assert record.tool_calls[0]["output"] == "SHIPPED"
    assert record.changes[0] == {"plugin": "redact", "version": "0.0.0", "hook": "tool_result",
                                 "change": {"output": "SHIPPED"}}


def test_a_raising_tool_result_handler_stops_the_call():
    def broken(r):
        raise ValueError("redactor crashed")

    lm = routed(Answer=[tool_call("order_status", {"order": "A1"}), "ok"])
    with functai.settings(plugins=[Plugin("redact", tool_result=broken)]):
        with pytest.raises(PluginError) as info:
            answer("x")
    assert (info.value.code, info.value.plugin, info.value.hook) == ("plugin-failed", "redact", "tool_result")
    assert len(lm.requests) == 1  # the unredacted result was never sent


def test_a_wrong_tool_call_change_refuses():
    routed(Answer=[tool_call("order_status", {"order": "A1"}), "ok"])
    with functai.settings(plugins=[Plugin("bad", tool_call=lambda t: Change(output="x"))]):
        with pytest.raises(PluginError) as info:
            answer("x")
    assert (info.value.code, info.value.plugin, info.value.hook, info.value.field) == (
        "plugin-change", "bad", "tool_call", "output")
    # The model had been asked: the message does not claim nothing was sent.
    assert "Nothing was sent" not in info.value.message
    assert "The model had been asked" in info.value.message and "the tool did not run" in info.value.message
    assert ran == []


def test_a_wrong_tool_result_change_says_the_tool_ran():
    lm = routed(Answer=[tool_call("order_status", {"order": "A1"}), "ok"])
    with functai.settings(plugins=[Plugin("bad", tool_result=lambda r: Change(block="no"))]):
        with pytest.raises(PluginError) as info:
            answer("x")
    assert (info.value.code, info.value.hook, info.value.field) == ("plugin-change", "tool_result", "block")
    assert "Nothing was sent" not in info.value.message
    assert "the tool had run; its result was not sent back" in info.value.message
    assert ran == [("order_status", "A1")] and len(lm.requests) == 1

    def built_badly(r):
        return Change(output=3)  # refused where it is made, named after the hook it was made in

    routed(Answer=[tool_call("order_status", {"order": "A1"}), "ok"])
    with functai.settings(plugins=[Plugin("bad", tool_result=built_badly)]):
        with pytest.raises(PluginError) as info:
            answer("x")
    assert info.value.hook == "tool_result" and "the tool had run" in info.value.message


# approval ------------------------------------------------------------------------------


@pytest.fixture
def approval(install):
    install(functai_approval.plugin)


def test_approval_runs_last_and_sees_the_rewritten_input(approval):
    seen = []

    def decide(t):
        seen.append(dict(t.input))
        return True

    rewrite = Plugin("rewrite", tool_call=lambda t: Change(inputs={"to": "audit@example.com"}))
    routed(Support=[tool_call("send_email", {"to": "boss@example.com", "text": "hi"}), "ok"])
    with functai.settings(plugins=[rewrite], approve=decide):
        support("x")
    assert seen == [{"to": "audit@example.com", "text": "hi"}]
    assert ran == [("send_email", "audit@example.com", "hi")]


SCENARIOS = {
    # tool: (the scripts that make support end up calling it, its approval path)
    "refund": dict(Support=[tool_call("consult", {"question": "q"}), "ok"],
                   Answer=[tool_call("refund", {"order": "A", "amount": 1}), "ok"]),
    "order_status": dict(Support=[tool_call("consult", {"question": "q"}), "ok"],
                         Answer=[tool_call("order_status", {"order": "A"}), "ok"]),
    "send_email": dict(Support=[tool_call("send_email", {"to": "a", "text": "b"}), "ok"]),
}

RULES = [
    (None, []),
    ("function", ["refund", "send_email"]),
    ("changes", ["refund", "send_email"]),
    ("all", ["refund", "order_status", "send_email"]),
    (["refund"], ["refund"]),
    (["answer/refund"], ["refund"]),
    (["support/send_email"], ["send_email"]),
    (["email"], []),
]


@pytest.mark.parametrize("rule, asked", RULES)
@pytest.mark.parametrize("name", ["refund", "order_status", "send_email"])
def test_the_eight_approve_rules(approval, rule, asked, name):
    """refund (changes) at support/answer/refund, order_status (reads) at
    support/answer/order_status, send_email (undeclared) at support/send_email."""
    questions = []
    routed(**SCENARIOS[name])
    if rule == "function":
        with functai.settings(approve=lambda t: questions.append(t.path) or True):
            support("x")
        expected = {"refund": "support/answer/refund", "send_email": "support/send_email"}
        assert questions == ([expected[name]] if name in asked else [])
        assert ran[0][0] == name
        return
    with functai.settings(approve=rule):
        if name in asked:
            with pytest.raises(ApprovalError) as info:
                support("x")
            # "all" asks about consult (reads) too, before anything under it runs
            first = "consult" if rule == "all" and name != "send_email" else name
            assert info.value.approval["name"] == first
            assert ran == []
        else:
            support("x")
            assert ran[0][0] == name


def test_refusal_texts(approval):
    lm = routed(Answer=[tool_calls([("refund", {"order": "A", "amount": 1}), ("refund", {"order": "B", "amount": 2})]),
                        "ok"])
    answers = iter([False, "over the limit"])
    with functai.settings(approve=lambda t: next(answers)):
        value, record = answer.run("x")
    assert ran == []
    assert [m["content"] for m in tool_messages(lm.requests[1])] == [
        "The person did not allow this call.",
        "The person did not allow this call. Reason: over the limit",
    ]
    assert [c.get("refused") for c in record.tool_calls] == ["approval", "approval"]


def test_approval_required_propagates_out_of_the_outermost_call(approval):
    routed(
        Support=[tool_call("consult", {"question": "q"}), "never"],
        Answer=[tool_call("refund", {"order": "A1", "amount": 5}), "never"],
    )
    with functai.settings(approve="changes"):
        with pytest.raises(ApprovalError) as info:
            support("help")
    assert info.value.code == "approval-required"
    assert info.value.approval == {
        "name": "refund", "input": {"order": "A1", "amount": 5}, "effects": "changes",
        "path": "support/answer/refund", "plugin": "approval", "question": None,
        "digest": digest("refund", {"order": "A1", "amount": 5}, []), "plugins": [],
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
                       "required": ["order", "amount"], "additionalProperties": False},
    }
    assert ran == []
    assert info.value.record.path == "support/answer"


def test_any_tool_call_handler_may_ask_with_decide():
    def careful(t):
        t.ask("big refund", decide=lambda q: q.about.input["amount"] < 100 or "too big")
        return None

    lm = routed(Answer=[tool_calls([("refund", {"order": "A", "amount": 5}), ("refund", {"order": "B", "amount": 500})]),
                        "ok"])
    with functai.settings(plugins=[Plugin("careful", tool_call=careful)]):
        value, record = answer.run("x")
    assert ran == [("refund", "A", 5)]
    assert tool_messages(lm.requests[1])[1]["content"] == "The person did not allow this call. Reason: too big"
    assert record.tool_calls[1]["refused"] == "careful"


def test_approve_without_an_approval_plugin_refuses_naming_the_distribution():
    routed(Answer=["never"])
    with functai.settings(approve="changes"):
        with pytest.raises(FunctAIError) as info:
            answer("x")
    assert info.value.code == "approval-missing"
    assert "functai install" in info.value.message and "functai_builtin_plugins/approval" in info.value.message


def test_an_ai_function_tool_holding_a_tool_that_changes_things_counts_as_changes(approval):
    questions = []
    routed(Desk=[tool_call("answer", {"question": "q"}), "ok"], Answer=["inner"])
    with functai.settings(approve=lambda t: questions.append((t.name, t.effects, t.path)) or True):
        desk("x")
    assert questions == [("answer", "changes", "desk/answer")]  # answer holds refund


def test_undeclared_effects_count_as_changes(approval):
    questions = []
    routed(Support=[tool_call("send_email", {"to": "a", "text": "b"}), "ok"])
    with functai.settings(approve=lambda t: questions.append((t.name, t.effects)) or True):
        support("x")
    assert questions == [("send_email", None)]


def test_a_tool_result_that_cannot_be_shown_is_said_so_and_the_call_goes_on():
    class Opaque:
        def __repr__(self):
            raise RuntimeError("no text for this")

    ran = []

    @tool(effects="changes")
    def make() -> object:
        """Make something."""
        ran.append(1)
        return Opaque()

    @ai(tools=[make])
    def maker(request: str) -> str:
        """Make it."""

    lm = ScriptedLM([tool_call("make", {}), "Made."])
    with functai.settings(client=lm):
        value, record = maker.run("make one")
    assert value == "Made." and ran == [1]
    [call] = record.tool_calls
    assert call["error"] == "result-unshowable: Opaque (RuntimeError: no text for this)"
    assert call["output"] == "The tool ran, but its result cannot be shown (Opaque has no text form)."
