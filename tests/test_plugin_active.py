"""``Plugin(active=...)``: a plugin that says before each call whether it takes part."""

import pytest

import functai
from functai import Change, Plugin, ai
from functai._hooks.explain import explain
from functai.testing import ScriptedLM, log_events


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def test_a_plugin_that_says_no_sits_the_call_out_and_takes_part_again_once_it_says_yes(functai_isolated):
    listening = {"now": False}
    ran = []
    plugin = Plugin("tracer", active=lambda: listening["now"],
                    before_call=lambda call: ran.append("before_call") or Change(sections=["traced"]),
                    reply=lambda reply: ran.append("reply"), call_end=lambda call: ran.append("call_end"))
    functai.configure(client=ScriptedLM(reply=lambda request: "Lima"), plugins=[plugin])
    for _ in range(3):
        value, record = capital.run("Peru")
        assert value == "Lima" and record.changes == [] and "traced" not in record.instruction
    assert ran == []
    listening["now"] = True
    value, record = capital.run("Peru")
    assert ran == ["before_call", "reply", "call_end"]
    assert [c["plugin"] for c in record.changes] == ["tracer"] and record.instruction.endswith("traced")
    listening["now"] = False
    capital("Peru")
    assert len(ran) == 3


def test_a_check_that_raises_is_reported_and_the_plugin_takes_part(functai_isolated):
    def broken():
        raise RuntimeError("cannot tell")

    ran = []
    functai.configure(client=ScriptedLM(reply=lambda request: "Lima"),
                      plugins=[Plugin("guard", active=broken, before_call=lambda call: ran.append(call.function))])
    with log_events() as logged:
        assert capital("Peru") == "Lima"
    assert logged.named("plugin active check failed.*plugin=guard.*cannot tell")
    assert ran == ["capital"]


def test_active_must_be_callable():
    with pytest.raises(TypeError, match="active must be a function"):
        Plugin("tracer", active=True)


def test_explain_lists_a_plugin_sitting_out_and_says_so(functai_isolated):
    quiet = Plugin("tracer", active=lambda: False, before_call=lambda call: None)
    functai.configure(plugins=[quiet])
    [row] = explain(capital)["hooks"]["before_call"]
    assert row["plugin"] == "tracer" and "sits calls out for now" in row["note"]
