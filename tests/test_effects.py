"""Effects of an AI function used as a tool: derived from its own tools, or declared.

The call tree: support → answer → {refund (changes) | order_status (reads)},
support → send_email (undeclared); ``answer`` holds only the tool it is asked for.
"""

import functai_approval
import pytest
from functai_delegate import delegate

import functai
from functai import Plugin, Waiting, ai, tool
from functai.testing import ScriptedLM, tool_call


@tool(effects="changes")
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    return "refunded"


@tool(effects="reads")
def order_status(order: str) -> str:
    """Look up an order."""
    return "shipped"


@tool
def send_email(to: str, text: str) -> str:
    """Send an email."""
    return "sent"


INPUTS = {"refund": {"order": "A", "amount": 1}, "order_status": {"order": "A"}}


def tree(held):
    """support holding answer (itself holding only ``held``) and send_email."""

    @ai(tools=[held])
    def answer(question: str) -> str:
        """Answer the customer's question."""

    @ai(tools=[answer, send_email])
    def support(request: str) -> str:
        """Support the customer."""

    return support, answer


def model(asks, held):
    """support asks for ``asks`` (answer or send_email); answer asks for its one tool."""

    def reply(request):
        done = request.messages[-1]["role"] == "tool"
        if request.messages[0]["content"].startswith("Answer"):
            return "answered" if done else tool_call(held.name, INPUTS[held.name])
        if done:
            return "supported"
        if asks == "answer":
            return tool_call("answer", {"question": "q"})
        return tool_call("send_email", {"to": "a", "text": "b"})

    return ScriptedLM(reply=reply)


@pytest.fixture
def approval(install):
    install(functai_approval.plugin)


def test_derived_effects():
    reads, changes = tree(order_status)[1], tree(refund)[1]
    assert (reads.effects, changes.effects) == ("reads", "changes")
    assert tree(send_email)[1].effects == "changes"  # a tool that declares nothing

    @ai
    def alone(q: str) -> str:
        """No tools at all."""

    assert alone.effects == "reads"

    @ai(tools=[reads, alone])
    def above_reads(q: str) -> str:
        """Holds only functions that read."""

    @ai(tools=[order_status, changes])
    def above_changes(q: str) -> str:
        """Holds one function that changes."""

    assert (above_reads.effects, above_changes.effects) == ("reads", "changes")


def test_declared_effects_win():
    answer = tree(refund)[1]
    assert tool(answer, effects="reads").effects == "reads"
    assert tool(effects="reads")(answer).effects == "reads"
    assert tool(answer).effects == "changes"

    @ai(effects="reads", tools=[refund])
    def careful(q: str) -> str:
        """Says it only reads."""

    assert careful.effects == "reads" and careful.declared_effects == "reads"
    assert careful.with_instruction("Other.").effects == "reads"
    with pytest.raises(ValueError, match="effects"):
        ai(effects="writes")
    with pytest.raises(ValueError, match="effects"):
        tool(answer, effects="sometimes")
    # Declaring is part of the version; leaving it out changes nothing.
    plain = ai(tools=[refund])(careful.fn)
    assert ai(tools=[refund], effects="reads")(careful.fn).version == careful.version != plain.version
    assert ai(tools=[tool(plain, effects="reads")])(careful.fn).version != ai(tools=[plain])(careful.fn).version


def test_delegate_effects_are_derived_or_declared():
    reads, changes = tree(order_status)[1], tree(refund)[1]
    assert delegate(reads).effects == "reads"
    assert delegate(changes).effects == "changes"
    assert delegate(changes, effects="reads").effects == "reads"
    with pytest.raises(ValueError):
        delegate(reads, effects="maybe")


def test_the_tool_call_event_shows_the_derived_value():
    events = []
    spy = Plugin("spy", tool_call=lambda t: events.append((t.path, t.effects)))
    for held in (order_status, refund):
        support, _ = tree(held)
        with functai.settings(client=model("answer", held), plugins=[spy]):
            support("help")
    assert events == [
        ("support/answer", "reads"), ("support/answer/order_status", "reads"),
        ("support/answer", "changes"), ("support/answer/refund", "changes"),
    ]


def test_a_cycle_of_functions_derives_without_recursing_forever():
    @ai
    def first(q: str) -> str:
        """First."""

    @ai(tools=[first])
    def second(q: str) -> str:
        """Second."""

    # Close the cycle by hand (first holds second): nothing in it changes things.
    first.tools, first.tool_names = (second,), ("second",)
    assert (first.effects, second.effects) == ("reads", "reads")
    second.tools, second.tool_names = (first, send_email), ("first", "send_email")
    assert (first.effects, second.effects) == ("changes", "changes")


RULES = {
    "absent": None,
    "function": "function",
    "changes": "changes",
    "all": "all",
    "name": ["refund"],
    "path end": ["answer/refund"],
    "whole path": ["support/answer"],
    "no match": ["email"],
}

#: rule → what is asked about when support asks answer holding refund / holding order_status,
#: and when support asks send_email.
ASKED = {
    "absent": ([], [], []),
    "function": (["support/answer", "support/answer/refund"], [], ["support/send_email"]),
    "changes": (["support/answer", "support/answer/refund"], [], ["support/send_email"]),
    "all": (["support/answer", "support/answer/refund"], ["support/answer", "support/answer/order_status"],
            ["support/send_email"]),
    "name": (["support/answer/refund"], [], []),
    "path end": (["support/answer/refund"], [], []),
    "whole path": (["support/answer"], ["support/answer"], []),
    "no match": ([], [], []),
}


def asked_in_a_turn(support, rule, lm):
    """Every tool call the rule asks about, answered yes each time the turn waits."""
    asked = []
    with functai.settings(client=lm):
        chat = support.conversation("effects-case")
        if rule == "function":
            with functai.settings(approve=lambda t: asked.append((t.path, t.effects)) or True):
                return chat("help"), asked
        with functai.settings(approve=rule):
            try:
                return chat("help"), asked
            except Waiting as waiting:
                turn = waiting.turn
                asked.extend((a["path"], a["effects"]) for a in waiting.approvals)
            while True:
                turn.approve()
                try:
                    return turn.resume(), asked
                except Waiting as waiting:
                    turn = waiting.turn
                    asked.extend((a["path"], a["effects"]) for a in waiting.approvals)


EFFECTS = {"support/answer/refund": "changes", "support/answer/order_status": "reads",
           "support/send_email": None}


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("case", ["answer holds refund", "answer holds order_status", "send_email"])
def test_the_eight_approve_rules_on_the_call_tree(approval, rule, case):
    held = order_status if "order_status" in case else refund
    support, _ = tree(held)
    asks = "send_email" if case == "send_email" else "answer"
    value, asked = asked_in_a_turn(support, RULES[rule], model(asks, held))
    assert value == "supported"
    expected = ASKED[rule][["answer holds refund", "answer holds order_status", "send_email"].index(case)]
    answer_effects = "changes" if held is refund else "reads"
    assert asked == [(path, answer_effects if path == "support/answer" else EFFECTS[path]) for path in expected]


def test_changes_rule_in_a_plain_call_no_longer_asks_about_a_read_only_function(approval):
    support, _ = tree(order_status)
    with functai.settings(client=model("answer", order_status), approve="changes"):
        value, record = support.run("help")
    assert value == "supported"
    assert [c["name"] for c in record.tool_calls] == ["answer"]
