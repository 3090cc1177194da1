"""A turn that would pass ``ask_at`` of its budget waits, like an approval: answered by a person
(approve, with or without an extension, or deny) or by a function; streamed turns too."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import functai_approval
import pytest
from budget_program import (
    QUESTION,
    assistant,
    conversation,
    desk,
    environment,
    first_request_cost,
    lookup,
    second_turn_waits,
    spend_all,
    spent,
    tokens,
    tool_first,
    turn_cost,
)
from functai_budget import budget, estimate

import functai
from functai import Reply, ai, tool
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin


def extensions(chat: functai.Conversation) -> list[dict]:
    return [entry["data"]["extend"] for entry in chat.entries("budget", "extended")]


# --- asked by a person ---------------------------------------------------------------------------

def test_a_turn_that_would_pass_ask_at_waits_with_a_question():
    cost = turn_cost()
    chat, turn, lm = second_turn_waits(functai.MemoryStore(), "asked", 2.5 * cost)
    assert turn.state == "waiting" and len(lm.requests) == 1
    [asked] = turn.approvals
    assert asked["kind"] == "request" and asked["plugin"] == "budget" and asked["extend"] == 2.5 * cost
    assert asked["question"] == (f"this conversation has used {tokens(cost)} of {tokens(2.5 * cost)}, and this "
                                 f"request may cost up to {tokens(cost)}; allow {tokens(2.5 * cost)} more?")


def test_an_approval_with_an_extension_grants_that_much():
    cost = turn_cost()
    chat, turn, lm = second_turn_waits(functai.MemoryStore(), "asked", 2.5 * cost)
    turn.approve(extend=cost)
    assert turn.resume() == "ok"
    assert len(lm.requests) == 2 and spent(chat) == 2 * cost
    assert extensions(chat) == [{"tokens": cost}]
    with pytest.raises(functai.Waiting) as waiting:
        chat(QUESTION)
    assert f"has used {tokens(2 * cost)} of {tokens(3.5 * cost)}" in waiting.value.turn.approvals[0]["question"]


def test_an_approval_without_an_extension_grants_the_offer():
    cost = turn_cost()
    chat, turn, lm = second_turn_waits(functai.MemoryStore(), "asked", 2.5 * cost)
    turn.approve()
    assert turn.resume() == "ok"
    assert extensions(chat) == [{"tokens": 2.5 * cost}]


@pytest.mark.parametrize("answer, decision", [("approve", "extended"), ("deny", "declined")])
def test_the_answer_is_recorded_as_the_budgets_decision(tmp_path, answer, decision):
    cost = turn_cost()
    with functai.settings(log_calls=str(tmp_path)):
        chat, turn, lm = second_turn_waits(functai.MemoryStore(), "asked", 2.5 * cost)
        getattr(turn, answer)()
        assert turn.resume() == "ok"  # denied, two turns still fit in the budget itself
    [record] = [r for r in functai.read_calls(tmp_path) if r.id == turn.call]
    [change] = [c for c in record.changes if c["plugin"] == "budget"]
    assert change["change"]["decision"] == decision
    limit = 5 * cost if answer == "approve" else 2.5 * cost
    assert change["note"] == f"{tokens(cost)} + at most {tokens(cost)} of {tokens(limit)} (conversation)"


def test_an_extension_approved_in_each_turn_counts_in_each():
    cost = turn_cost()
    chat, turn, lm = second_turn_waits(functai.MemoryStore(), "asked", 2.5 * cost)
    turn.approve(extend=cost / 4)
    assert turn.resume() == "ok"
    with pytest.raises(functai.Waiting) as waiting:
        chat(QUESTION)
    waiting.value.turn.approve(extend=cost / 4)  # the same question, at the same place of another turn
    assert waiting.value.turn.resume() == "ok"  # three turns: the budget and both extensions
    assert extensions(chat) == [{"tokens": cost / 4}, {"tokens": cost / 4}]
    assert spent(chat) == 3 * cost


def test_an_extension_is_counted_once_however_often_its_turn_resumes(installed_plugins):
    installed_plugins(functai_approval.plugin)

    probe = ScriptedLM(reply=tool_first("refund"))
    with pytest.raises(functai.Waiting) as probed:
        desk.conversation("probe", store=functai.MemoryStore(), client=probe)("Refund A1")
    probed.value.turn.approve()
    probed.value.turn.resume()
    first, second = (estimate(request) + 40 for request in probe.requests)  # what a turn's two requests cost

    lm = ScriptedLM(reply=tool_first("refund"))
    chat = desk.conversation("once", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                             plugins=[budget(tokens=first, per="conversation", ask_at=0.5)])
    with pytest.raises(functai.Waiting) as waiting:
        chat("Refund A1")
    turn = waiting.value.turn
    extend = 2 * (first + second)  # a turn fits under half of the budget then; the next turn's first request does not
    turn.approve(extend=extend)
    with pytest.raises(functai.Waiting):
        turn.resume()  # the first request was sent; now the refund waits
    assert turn.approvals[0]["name"] == "refund"
    turn.approve()
    assert turn.resume() == "ok"
    assert extensions(chat) == [{"tokens": extend}]
    with pytest.raises(functai.Waiting) as again:
        chat("Refund A1")  # counted twice, the extension would let it through
    assert f"of {tokens(first + extend)}" in again.value.turn.approvals[0]["question"]


@ai(max_tokens=100)
def worker(task: str) -> str:
    """Do the task."""


@tool(effects="reads")
def ask_workers(task: str) -> str:
    """Give the task to three workers."""
    return " / ".join(worker(task) for _ in range(3))


@ai(tools=[ask_workers], max_tokens=100)
def boss(goal: str) -> str:
    """Reach the goal."""


def test_a_question_asked_inside_a_nested_call_waits_and_each_request_is_counted_once():
    paid = []

    def reply(request):
        answer = spend_all(request)
        paid.append(answer.usage["input_tokens"] + answer.usage["output_tokens"])
        if request.messages[0]["content"].startswith("Reach") and request.messages[-1]["role"] == "user":
            asked = tool_call("ask_workers", {"task": "count the stock"})
            return Reply(tool_calls=asked.tool_calls, finish_reason="tool_calls", usage=answer.usage)
        return answer

    lm = ScriptedLM(reply=reply)
    chat = boss.conversation("nested", store=functai.MemoryStore(), client=lm,
                             plugins=[budget(tokens=500, per="turn", ask_at=0.5)])
    with pytest.raises(functai.Waiting) as waiting:
        chat("a full count")
    assert waiting.value.turn.approvals[0]["path"] == "boss/worker" and len(lm.requests) == 1
    waiting.value.turn.approve(extend=2000)
    assert waiting.value.turn.resume() == "ok"
    assert len(lm.requests) == 5  # the boss twice, three workers
    assert [e["data"]["tokens"] for e in chat.entries("budget", "spent")] == paid


def test_a_refusal_lets_the_turn_go_on_within_the_budget_then_refuses():
    support = ai(tools=[lookup], max_tokens=40)(assistant.fn)
    first = first_request_cost(support, "lookup")

    lm = ScriptedLM(reply=tool_first("lookup"))
    chat = support.conversation("denied", store=functai.MemoryStore(), client=lm,
                                plugins=[budget(tokens=1.5 * first, per="conversation", ask_at=0.5)])
    with pytest.raises(functai.Waiting) as waiting:
        chat(QUESTION)
    turn = waiting.value.turn
    turn.deny(reason="enough for today")
    with pytest.raises(functai.FunctAIError) as refused:
        turn.resume()  # the first request fits in the budget and is sent; the second does not, and is refused
    assert refused.value.code == "budget-exceeded"
    assert len(lm.requests) == 1 and len(chat.entries("budget", "declined")) == 1
    assert chat.head.state == "failed" and extensions(chat) == []


def test_one_answer_extends_each_unit_past_ask_at_alike():
    cost = turn_cost()
    per_token = {"scripted": (1.0, 1.0)}  # a dollar per million tokens: dollars are tokens / 1e6
    lm = ScriptedLM(reply=spend_all)
    chat = assistant.conversation("units", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                  plugins=[budget(tokens=2.5 * cost, dollars=2.5 * cost / 1e6, per="conversation",
                                                  ask_at=0.5, prices=per_token)])
    chat(QUESTION)
    with pytest.raises(functai.Waiting) as waiting:
        chat(QUESTION)
    assert waiting.value.turn.approvals[0]["question"].endswith(f"allow {tokens(2.5 * cost)} more?")
    waiting.value.turn.approve(extend=cost)  # in the unit asked about; the other grows by the same share
    assert waiting.value.turn.resume() == "ok"
    assert extensions(chat) == [{"tokens": cost, "dollars": pytest.approx(cost / 1e6)}]


def test_an_async_turn_waits_and_resumes_with_an_extension():
    cost = turn_cost()
    chat = conversation(functai.MemoryStore(), "async", 2.5 * cost, ScriptedLM(reply=spend_all))

    async def two_turns():
        await chat.acall(QUESTION)
        with pytest.raises(functai.Waiting) as waiting:
            await chat.acall(QUESTION)
        waiting.value.turn.approve(extend=cost)
        return await waiting.value.turn.aresume()

    assert asyncio.run(two_turns()) == "ok"
    assert extensions(chat) == [{"tokens": cost}] and spent(chat) == 2 * cost


def test_an_async_call_past_the_budget_is_refused_before_sending():
    lm = ScriptedLM(reply=spend_all)
    answer = ai(client=lm, plugins=[budget(tokens=20)])(assistant.fn)
    with pytest.raises(functai.FunctAIError) as refused:
        asyncio.run(answer.arun(QUESTION))
    assert refused.value.code == "budget-exceeded" and lm.requests == []


def test_an_extension_for_a_tool_approval_is_refused(installed_plugins):
    installed_plugins(functai_approval.plugin)
    lm = ScriptedLM(reply=tool_first("refund"))
    chat = desk.conversation("tool", store=functai.MemoryStore(), client=lm,
                             plugins=[budget(tokens=100_000, per="conversation")])
    with pytest.raises(functai.Waiting) as waiting:
        chat("Refund A1")
    with pytest.raises(functai.FunctAIError) as refused:
        waiting.value.turn.approve(extend=1000)
    assert refused.value.code == "input-invalid" and "extend" in refused.value.message
    assert waiting.value.turn.answers == {}  # nothing was recorded: it can still be approved


def test_an_edit_for_a_budgets_question_is_refused():
    cost = turn_cost()
    chat, turn, lm = second_turn_waits(functai.MemoryStore(), "asked", 2.5 * cost)
    with pytest.raises(functai.FunctAIError) as refused:
        turn.approve(turn.approvals[0]["key"], inputs={"question": "Something cheaper?"})
    assert refused.value.code == "input-invalid"


@pytest.mark.parametrize("extend", [-1, float("inf"), "1000", True])
def test_an_extension_that_is_not_a_number_from_0_up_is_refused(extend):
    cost = turn_cost()
    chat, turn, lm = second_turn_waits(functai.MemoryStore(), "asked", 2.5 * cost)
    with pytest.raises(functai.FunctAIError) as refused:
        turn.approve(extend=extend)
    assert refused.value.code == "input-invalid"


def functai_cli(*arguments: str, tokens: float) -> subprocess.CompletedProcess:
    """The functai command in a process that imports the assistant with a budget of ``tokens``."""
    return subprocess.run([sys.executable, "-m", "functai", *arguments], env=environment(BUDGET_TOKENS=repr(tokens)),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def waiting_in_a_folder(tmp_path) -> tuple[str, functai.Conversation, float]:
    """A conversation in a folder store whose second turn waits for the budget's question; one turn's cost."""
    store = str(tmp_path / "conversations")
    cost = turn_cost()
    chat, _, _ = second_turn_waits(store, "asked", 2.5 * cost)
    return store, chat, cost


def test_the_cli_shows_a_turn_waiting_for_a_budgets_question(waiting_in_a_folder):
    store, chat, cost = waiting_in_a_folder
    shown = functai_cli("conversation", store, "asked", tokens=2.5 * cost)
    assert shown.returncode == 0, shown.stderr
    assert chat.turns[-1].id in shown.stdout and "waiting" in shown.stdout


def test_the_cli_grants_an_extension_and_resumes(waiting_in_a_folder):
    store, chat, cost = waiting_in_a_folder
    approved = functai_cli("approve", store, "asked", "--extend", repr(cost), "--by", "ops", tokens=2.5 * cost)
    assert approved.returncode == 0, approved.stderr
    assert chat.turns[-1].state == "done"
    assert extensions(chat) == [{"tokens": cost}] and spent(chat) == 2 * cost


def test_the_cli_answers_but_does_not_resume_where_the_budget_is_not_set_and_says_what_to_run(waiting_in_a_folder):
    store, chat, cost = waiting_in_a_folder
    turn = chat.turns[-1].id
    answered = subprocess.run([sys.executable, "-m", "functai", "approve", store, "asked", "--extend", repr(cost)],
                              env=environment(FUNCTAI_LM="test"), capture_output=True, text=True, timeout=120)
    assert answered.returncode == 3, answered.stdout + answered.stderr  # it waits, answered: not failed
    assert f"{turn}: answered, not resumed [resume-settings]: " in answered.stdout
    assert f"chat.turn({turn!r}).resume()" in answered.stdout and f"functai resume {store} asked" in answered.stdout
    assert spent(chat) == cost  # nothing was sent without the budget
    assert chat.turn(turn).state == "waiting"
    elsewhere = subprocess.run([sys.executable, "-m", "functai", "resume", store, "asked"],
                               env=environment(FUNCTAI_LM="test"), capture_output=True, text=True, timeout=120)
    assert elsewhere.returncode == 1 and "[resume-settings]" in elsewhere.stderr, elsewhere.stdout + elsewhere.stderr
    assert f"turn {turn} is not resumed here (it keeps its state)" in elsewhere.stderr
    assert "failed" not in elsewhere.stdout + elsewhere.stderr and chat.turn(turn).state == "waiting"
    resumed = functai_cli("resume", store, "asked", tokens=2.5 * cost)  # where the budget is set
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert chat.turn(turn).state == "done" and extensions(chat) == [{"tokens": cost}]


# --- answered by a function ----------------------------------------------------------------------

def fails(question):
    raise RuntimeError("the accounts service is down")


@pytest.mark.parametrize("answer, extended, sent, warns", [
    (lambda question: True, [0.5], True, False),                      # the offer: the budget again
    (lambda question: question.extend * 4, [2.0], True, False),   # a number: that much
    (lambda question: question.extend / 10, [0.05], False, False),  # that much, still too little
    (lambda question: False, [], False, False),
    (lambda question: "not this month", [], False, False),
    (lambda question: ["yes"], [], False, True),                      # not an answer: refuses
    (fails, [], False, True),                                         # a check that fails refuses
], ids=["true", "a-number", "too-little", "false", "a-reason", "not-an-answer", "raises"])
def test_a_function_answers_instead_of_a_person(answer, extended, sent, warns, caplog):
    cost = turn_cost()
    asked = []

    def decide(question):
        asked.append(question)
        return answer(question)

    lm = ScriptedLM(reply=spend_all)
    chat = assistant.conversation("decided", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                  plugins=[budget(tokens=0.5 * cost, per="conversation", decide=decide)])
    if sent:
        assert chat(QUESTION) == "ok"
    else:
        with pytest.raises(functai.FunctAIError) as refused:
            chat(QUESTION)  # no turn waits: the function answered
        assert refused.value.code == "budget-exceeded"
        assert chat.head.state == "failed"
    assert len(lm.requests) == int(sent)
    assert extensions(chat) == [{"tokens": pytest.approx(share * cost)} for share in extended]
    [question] = asked
    assert isinstance(question.about, functai.events.Request) and question.extend == 0.5 * cost
    assert question.text.startswith(f"this conversation has used 0 tokens of {tokens(0.5 * cost)}")
    assert ("decide function" in caplog.text) == warns  # a function that failed is logged, not raised


def test_a_function_answers_a_plain_call_too(tmp_path):
    lm = ScriptedLM(reply=spend_all)
    asked = []

    @ai(client=lm, log_calls=str(tmp_path), plugins=[budget(tokens=20, decide=lambda q: asked.append(q) or 1000)])
    def answer(question: str) -> str:
        """Answer."""

    assert answer(QUESTION) == "ok"
    assert len(asked) == 1
    [record] = functai.read_calls(tmp_path)
    [change] = [c for c in record.changes if c["plugin"] == "budget"]
    assert change["change"]["decision"] == "extended"


# --- streamed turns --------------------------------------------------------------------------------

def test_a_streamed_turn_within_the_budget_streams():
    lm = ScriptedLM(reply=lambda request: spend_all(request, text="The Seine, into the Channel."))
    chat = conversation(functai.MemoryStore(), "streamed", 100_000, lm)
    with chat.stream(QUESTION) as stream:
        texts = [event.text for event in stream if event.kind == "text"]
    assert "".join(texts) == "The Seine, into the Channel." and stream.value == "The Seine, into the Channel."
    assert spent(chat) == estimate(lm.requests[0]) + 40


def test_a_streamed_turn_that_would_pass_ask_at_ends_waiting():
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(functai.MemoryStore(), "streamed", 2.5 * cost, lm)
    chat(QUESTION)
    with pytest.raises(functai.Waiting) as waiting:
        with chat.stream(QUESTION) as stream:
            for _ in stream:
                pass
    assert len(lm.requests) == 1
    assert waiting.value.turn.approvals[0]["kind"] == "request"
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "ok"


def test_an_async_streamed_turn_that_would_pass_ask_at_ends_waiting():
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(functai.MemoryStore(), "streamed", 2.5 * cost, lm)
    chat(QUESTION)

    async def stream_a_turn():
        texts = []
        async for event in chat.astream(QUESTION):
            if event.kind == "text":
                texts.append(event.text)
        return texts

    with pytest.raises(functai.Waiting) as waiting:
        asyncio.run(stream_a_turn())
    assert len(lm.requests) == 1
    assert waiting.value.turn.approvals[0]["kind"] == "request"


def test_an_async_streamed_turn_within_the_budget_streams():
    lm = ScriptedLM(reply=lambda request: spend_all(request, text="The Seine."))
    chat = conversation(functai.MemoryStore(), "streamed", 100_000, lm)

    async def stream_a_turn():
        return [event.text async for event in chat.astream(QUESTION) if event.kind == "text"]

    assert "".join(asyncio.run(stream_a_turn())) == "The Seine."
    assert spent(chat) == estimate(lm.requests[0]) + 40


def stop_at_the_first_text(stream) -> None:
    with stream:
        for event in stream:
            if event.kind == "text":
                break


@pytest.mark.parametrize("per", ["conversation", "turn", "process"])
def test_a_turn_streamed_and_stopped_midway_counts_as_the_most_its_request_could_cost(per):
    lm = ScriptedLM(reply=lambda request: spend_all(request, text="word " * 50))
    guard = budget(tokens=100_000, per=per)
    chat = assistant.conversation("stopped", store=functai.MemoryStore(), client=lm, plugins=[guard])
    stop_at_the_first_text(chat.stream(QUESTION))
    assert chat.turns[-1].state == "stopped"
    most = estimate(lm.requests[0]) + 40
    if per == "process":
        _, record = ai(client=lm, plugins=[guard], max_tokens=1)(assistant.fn).run("?")
        [change] = record.changes
        assert change["note"].startswith(f"{tokens(most)} + at most")
    else:
        [entry] = chat.entries("budget", "spent")
        assert entry["data"]["tokens"] == most and entry["data"]["estimated"] is True


def test_a_call_streamed_and_stopped_midway_counts_as_the_most_its_request_could_cost():
    lm = ScriptedLM(reply=lambda request: spend_all(request, text="word " * 50))
    guard = budget(tokens=100_000, per="process")
    streamed = ai(client=lm, plugins=[guard], max_tokens=40)(assistant.fn)
    stop_at_the_first_text(streamed.stream(QUESTION))
    most = estimate(lm.requests[0]) + 40
    _, record = ai(client=lm, plugins=[guard], max_tokens=1)(assistant.fn).run("?")
    assert record.changes[0]["note"].startswith(f"{tokens(most)} + at most")
