"""``turn_wait`` and ``turn_answer``: a turn that starts waiting is heard with its questions, and
an answer is heard in the process that records it — from code, the CLI or the console alike."""

from __future__ import annotations

import asyncio
import io
import os

import functai_approval
import pytest

import functai
from functai import ai, tool
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@ai(tools=[refund])
def desk(request: str) -> str:
    """Help the customer."""


def ears() -> tuple[functai.Plugin, list[tuple[str, functai.events.Event]]]:
    """A plugin that keeps every turn_wait and turn_answer event it hears."""
    heard: list[tuple[str, functai.events.Event]] = []
    plugin = functai.Plugin("ears")

    @plugin.turn_wait
    def waits(event: functai.events.TurnWait) -> None:
        heard.append(("wait", event))

    @plugin.turn_answer
    def answered(event: functai.events.TurnAnswer) -> None:
        heard.append(("answer", event))

    return plugin, heard


def refunding() -> ScriptedLM:
    return ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."])


@pytest.mark.parametrize("way", ["sync", "async", "stream"])
def test_a_turn_that_starts_waiting_is_heard_once_with_its_questions(install, way):
    install(functai_approval.plugin)
    plugin, heard = ears()
    chat = desk.conversation("w", store=functai.MemoryStore(), client=refunding(), approve="changes", plugins=[plugin])
    with pytest.raises(functai.Waiting) as waiting:
        if way == "sync":
            chat("refund A1")
        elif way == "async":
            asyncio.run(chat.acall("refund A1"))
        else:
            for _ in chat.stream("refund A1"):
                pass
    [(kind, event)] = heard
    turn = waiting.value.turn
    assert kind == "wait" and (event.conversation, event.turn, event.key, event.parent) == ("w", turn.id, None, None)
    assert dict(event.inputs) == {"request": "refund A1"}
    assert [(q["key"], q["name"], dict(q["input"])) for q in event.questions] == [
        (turn.approvals[0]["key"], "refund", {"order": "A1"})]
    turn.approve()
    assert turn.resume() == "Refunded."
    assert [kind for kind, _ in heard] == ["wait", "answer"]  # the resumed turn ended without waiting again


def test_answers_are_heard_where_they_are_recorded_and_only_when_recorded(install):
    install(functai_approval.plugin)
    plugin, heard = ears()
    chat = desk.conversation("a", store=functai.MemoryStore(), client=ScriptedLM(
        [tool_call("refund", {"order": "A1"}), "Refunded.", tool_call("refund", {"order": "B2"}), "No."]),
        approve="changes", plugins=[plugin])
    with pytest.raises(functai.Waiting) as first:
        chat("refund A1")
    first.value.turn.approve(by="ana")
    first.value.turn.approve(by="ana")  # the same answer again: nothing new is recorded, nothing heard
    [(_, answer)] = [(k, e) for k, e in heard if k == "answer"]
    assert (answer.conversation, answer.turn, answer.key, answer.keys, answer.allow, answer.by, answer.reason,
            answer.pid) == ("a", first.value.turn.id, None, (first.value.turn.approvals[0]["key"],), True, "ana", None,
                            os.getpid())
    with pytest.raises(functai.FunctAIError) as contrary:
        first.value.turn.deny(reason="changed my mind")  # kept as a late answer: the first one holds
    assert contrary.value.code == "approval-answered"
    assert len([k for k, _ in heard if k == "answer"]) == 1
    first.value.turn.resume()

    with pytest.raises(functai.Waiting) as second:
        chat("refund B2")
    second.value.turn.deny(reason="no receipt", by="ops")
    denied = heard[-1][1]
    assert (denied.allow, denied.by, denied.reason) == (False, "ops", "no receipt")


def test_an_answer_given_with_the_cli_is_heard_by_the_installed_plugins(install, tmp_path):
    plugin, heard = ears()
    install(functai_approval.plugin, plugin)
    store = str(tmp_path / "store")
    functai.configure(client=refunding(), approve="changes")
    chat = desk.conversation("c", store=store)
    with pytest.raises(functai.Waiting) as waiting:
        chat("refund A1")
    from functai.cli import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["approve", store, "c", "--by", "ops"], out=out, err=err) == 0, err.getvalue()
    answers = [event for kind, event in heard if kind == "answer"]
    assert [(a.turn, a.allow, a.by) for a in answers] == [(waiting.value.turn.id, True, "ops")]
    assert functai.Conversation.open("c", store).turn(waiting.value.turn.id).state == "done"


def test_a_failing_turn_answer_handler_is_reported_and_the_answer_stays(install, caplog):
    install(functai_approval.plugin)
    broken = functai.Plugin("broken")

    @broken.turn_answer
    def fails(event):
        raise RuntimeError("the wake-up call failed")

    chat = desk.conversation("f", store=functai.MemoryStore(), client=refunding(), approve="changes",
                             plugins=[broken])
    with pytest.raises(functai.Waiting) as waiting:
        chat("refund A1")
    with caplog.at_level("WARNING", logger="functai"):
        waiting.value.turn.approve()
    assert "the wake-up call failed" in caplog.text and "turn_answer" in caplog.text
    assert waiting.value.turn.resume() == "Refunded."


def test_a_turn_sent_with_a_key_is_heard_with_it(install):
    """An engine that sent the turn finds its own work again by the key (a workflow's id, say)."""
    install(functai_approval.plugin)
    plugin, heard = ears()
    chat = desk.conversation("k", store=functai.MemoryStore(), client=refunding(), approve="changes", plugins=[plugin])
    with pytest.raises(functai.Waiting) as waiting:
        chat.send({"request": "refund A1"}, key="workflow-7")
    assert waiting.value.turn.key == "workflow-7"
    waiting.value.turn.approve(by="ops")
    assert [(kind, event.key) for kind, event in heard] == [("wait", "workflow-7"), ("answer", "workflow-7")]
    assert functai.Conversation.open("k", chat.store).turn(waiting.value.turn.id).key == "workflow-7"
