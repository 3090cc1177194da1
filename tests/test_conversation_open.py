"""`Conversation.open(id, store=...)`: a conversation read and answered by id alone, where its
function cannot be imported (a console); resuming stays with the function."""

import functai_approval
import pytest

import functai
from functai import FunctAIError, Waiting, ai, tool
from functai.testing import ScriptedLM, tool_call

ran = []


@tool(effects="changes")
def refund(order: str, amount: int) -> str:
    """Refund an amount on an order."""
    ran.append((order, amount))
    return f"refunded {amount} on {order}"


@ai(tools=[refund])
def support(request: str) -> str:
    """Support the customer."""


@pytest.fixture
def waiting(tmp_path, install):
    install(functai_approval.plugin)
    ran.clear()
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1", "amount": 400}), "Refunded."]))
    chat = support.conversation("t1", store=str(tmp_path), approve="changes")
    with pytest.raises(Waiting):
        chat("Refund A1")
    chat.remember("notes", "topic", "refunds", turn=chat.head)
    return chat


def test_open_reads_turns_and_answers_without_the_function(waiting, tmp_path):
    view = functai.Conversation.open("t1", store=str(tmp_path))
    assert view.function == f"{__name__}:support"
    [turn] = view.all_turns()
    assert turn.state == "waiting" and turn.at and turn.shown == {"last": 0}
    assert [w["approvals"][0]["input"] for w in turn.waits] == [{"order": "A1", "amount": 400}]
    assert view.all_entries() == [{"plugin": "notes", "kind": "topic", "turn": turn.id, "data": "refunds",
                                   "at": view.all_entries()[0]["at"]}]
    key = turn.approvals[0]["key"]
    with pytest.raises(FunctAIError) as wrong:
        turn.approve(key, inputs={"amonut": 300}, by="ana")  # checked against the names the question shows
    assert wrong.value.code == "input-invalid"
    turn.approve(key, inputs={"amount": 300}, by="ana")
    assert turn.waits[0]["answers"][key]["by"] == "ana"
    with pytest.raises(FunctAIError) as no_function:
        turn.resume()
    assert no_function.value.code == "conversation-function" and "test_conversation_open:support" in str(
        no_function.value)
    with pytest.raises(FunctAIError) as no_send:
        view("another")
    assert no_send.value.code == "conversation-function"
    assert ran == []
    assert waiting.turn(turn.id).resume() == "Refunded."  # the program resumes what the view answered
    assert ran == [("A1", 300)]


def test_a_contrary_answer_through_open_names_who_answered_first(waiting, tmp_path):
    turn = waiting.head
    turn.deny(reason="no receipt", by="bo")
    view = functai.Conversation.open("t1", store=str(tmp_path))
    with pytest.raises(FunctAIError) as late:
        view.turn(turn.id).approve(by="ana")
    assert late.value.code == "approval-answered" and "by bo" in str(late.value)


def test_abandon_through_open_frees_the_branch(waiting, tmp_path):
    view = functai.Conversation.open("t1", store=str(tmp_path))
    view.turn(waiting.head.id).abandon(reason="done by hand", by="ana")
    assert waiting.turn(waiting.head.id).state == "abandoned"
