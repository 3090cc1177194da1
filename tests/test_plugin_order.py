"""Declared order: ``before=``, ``after=`` within a layer, ``last=True`` for guards, ``requires=``;
what layers contradict is explained, a cycle and a missing requirement refused."""

import io

import pytest

import functai
from functai import Change, Plugin, PluginError, ai
from functai._cli import main
from functai._hooks.explain import explain
from functai.testing import ScriptedLM, tool_call


def _marker(name, **declared):
    """A plugin whose before_call handler appends its name as a section (so order shows in the record)."""
    return Plugin(name, version="1.0.0", before_call=lambda call: Change(sections=[name]), **declared)


def _order(fn, *args):
    _, record = fn.run(*args)
    return [c["change"]["sections"][0] for c in record.changes if c["hook"] == "before_call"]


@ai
def echo(text: str) -> str:
    """Echo."""


@pytest.fixture(autouse=True)
def _model():
    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))


def test_declarations_order_plugins_within_a_layer_moving_them_as_little_as_asked():
    a, b, c = _marker("a", after=["b"]), _marker("b"), _marker("c", before=["a"])
    with functai.settings(plugins=[a, b, c]):
        assert _order(echo, "x") == ["b", "c", "a"]
    with functai.settings(plugins=[_marker("a"), _marker("b"), _marker("c")]):
        assert _order(echo, "x") == ["a", "b", "c"]  # nothing declared: list order
    with functai.settings(plugins=[_marker("a", before=["ghost"]), _marker("b")]):
        assert _order(echo, "x") == ["a", "b"]  # a plugin that is not there orders nothing


def test_a_constraint_the_layers_contradict_is_not_an_error_and_explain_says_why():
    inner = _marker("inner", after=["outer"])  # asks to run after a plugin of an outer layer

    @ai(plugins=[inner])
    def f(text: str) -> str:
        """F."""

    functai.configure(client=ScriptedLM(reply=lambda request: "ok"), plugins=[_marker("outer")])
    assert _order(f, "x") == ["inner", "outer"]  # layers keep their meaning: the host has the last word
    data = explain(f)
    assert data["unmet"] == [{
        "plugin": "inner", "constraint": "after 'outer'",
        "why": "'outer' runs in the process layer and 'inner' in the own layer: layers run innermost first, "
               "and a declaration orders plugins within a layer",
    }]


def test_a_cycle_within_a_layer_refuses_plugin_order_naming_it():
    with functai.settings(plugins=[_marker("a", after=["b"]), _marker("b", after=["c"]), _marker("c", after=["a"])]):
        with pytest.raises(PluginError) as info:
            echo("x")
    assert info.value.code == "plugin-order"
    assert "a after b after c after a" in info.value.message
    with pytest.raises(PluginError) as itself:
        Plugin("a", before=["a"])
    assert itself.value.code == "plugin-order"


def test_a_missing_requirement_refuses_every_call_until_it_is_there():
    redact = _marker("redact", requires=["pii-detector"])
    with functai.settings(plugins=[redact]):
        with pytest.raises(PluginError) as info:
            echo("x")
    assert info.value.code == "plugin-requires" and info.value.plugin == "redact"
    assert "'pii-detector'" in info.value.message
    functai.configure(client=ScriptedLM(reply=lambda request: "ok"), plugins=[_marker("pii-detector")])
    with functai.settings(plugins=[redact]):
        assert _order(echo, "x") == ["redact", "pii-detector"]  # met in another layer: fine


def test_a_guard_declared_last_runs_after_every_other_handler_of_every_layer():
    seen = []
    guard = Plugin("guard", last=True, tool_call=lambda tool: seen.append(("guard", dict(tool.input))))
    rewrite = Plugin("rewrite", tool_call=lambda tool: Change(inputs={"order": "B2"}))

    @functai.tool(effects="reads")
    def lookup(order: str) -> str:
        """Look up."""
        return order

    @ai(tools=[lookup], plugins=[guard])
    def support(q: str) -> str:
        """S."""

    functai.configure(client=ScriptedLM([tool_call("lookup", {"order": "A1"}), "done"]), plugins=[rewrite])
    support("q")
    assert seen == [("guard", {"order": "B2"})]  # own layer, yet after the process layer's rewrite


def test_the_plugin_that_serves_approve_is_found_by_its_declaration_not_its_name(install):
    asked = []

    def ask(tool):
        asked.append(tool.name)
        tool.ask(decide=lambda question: True)

    mine = Plugin("house-approval", last=True, serves=["approve"], tool_call=ask)
    impostor = Plugin("approval", tool_call=lambda tool: None)  # named approval, serves nothing

    @functai.tool(effects="changes")
    def refund(order: str) -> str:
        """Refund."""
        return "refunded"

    @ai(tools=[refund])
    def support(q: str) -> str:
        """S."""

    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), approve="changes")
    install(impostor)
    with pytest.raises(functai.FunctAIError) as missing:
        support("q")
    assert missing.value.code == "approval-missing"  # approval never turns off silently
    install(mine)
    assert support("q") == "done" and asked == ["refund"]


def test_a_module_plugin_declares_its_order_as_attributes():
    import types

    module = types.ModuleType("ordered_plugin")
    module.plugin_name, module.plugin_after = "late", ["early"]

    @functai.hookimpl
    def before_call(call):
        return Change(sections=["late"])

    module.before_call = before_call
    with functai.settings(plugins=[module, _marker("early")]):
        assert _order(echo, "x") == ["early", "late"]


def test_explain_prints_six_plugins_in_order_with_why_line_by_line():
    @ai(plugins=[_marker("format", after=["tone"]), _marker("tone")])
    def reply(text: str) -> str:
        """Reply."""

    functai.configure(client=ScriptedLM(reply=lambda request: "ok"),
                      plugins=[_marker("audit", last=True), _marker("pii", before=["cost"]), _marker("cost"),
                               _marker("brand", after=["audit"])])
    import sys
    import types

    module = types.ModuleType("explain_six")
    module.reply = reply
    sys.modules["explain_six"] = module
    try:
        out = io.StringIO()
        assert main(["plugins", "explain", "explain_six:reply", "--hook", "before_call"], out=out) == 0
    finally:
        del sys.modules["explain_six"]
    lines = out.getvalue().splitlines()
    handler = lines[3].split("] ", 1)[1]
    assert handler.endswith("_marker.<locals>.<lambda>")
    assert lines == [
        f"{reply.module}:reply: plugins its calls would run here, hook by hook, in order",
        "layers (innermost first): own: format, tone; process: audit, pii, cost, brand; installed: -",
        "before_call:",
        f"  1. tone 1.0.0 [own] {handler}",
        "     why: own layer, #2 in its list",
        f"  2. format 1.0.0 [own] {handler}",
        "     why: own layer, #1 in its list; after 'tone' (declares after='tone')",
        f"  3. pii 1.0.0 [process] {handler}",
        "     why: process layer, #2 in its list",
        f"  4. cost 1.0.0 [process] {handler}",
        "     why: process layer, #3 in its list; after 'pii' (pii declares before='cost')",
        f"  5. brand 1.0.0 [process] {handler}",
        "     why: process layer, #4 in its list",
        f"  6. audit 1.0.0 [process] {handler}",
        "     why: process layer, #1 in its list; declares last=True: runs after every other before_call handler",
        "dropped: none",
        "unmet:",
        "  brand after 'audit': 'audit' declares last=True and runs after the others",
    ]


def test_an_unmet_declaration_names_the_tier_when_last_is_what_broke_it():
    guard = _marker("guard", last=True, before=["audit"])

    @ai(plugins=[guard])
    def f(text: str) -> str:
        """F."""

    functai.configure(client=ScriptedLM(reply=lambda request: "ok"), plugins=[_marker("audit")])
    assert _order(f, "x") == ["audit", "guard"]
    assert explain(f)["unmet"] == [{"plugin": "guard", "constraint": "before 'audit'",
                                    "why": "'guard' declares last=True and runs after the others"}]
