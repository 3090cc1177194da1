"""Requests running at once never pass a budget together: each request's most cost is reserved in
the same step as its check — in memory under a lock, in a conversation as a compare-and-set on its
store. Threads, async tasks and four processes (each with threads of its own) spend up to the
budget, and what the model billed never passes it: overshoot 0."""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import attrs
import pytest
from budget_program import HERE, QUESTION, billed, conversation, environment, race, slow_spend, spend_all
from functai_budget import budget

import functai
from functai import Reply, ai, tool
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin

LIMIT = 1500.0
WORKERS = 8


@ai(max_tokens=300)
def worker(n: int) -> str:
    """Work on part n."""


def coordinator_model() -> ScriptedLM:
    """The coordinator asks for its fan-out tool, then answers; every worker answers at once. Each
    reply spends all its request may, after a pause in which other requests are checked."""
    def reply(request: functai.Request) -> Reply:
        if request.tools and request.messages[-1]["role"] == "user":
            asked = tool_call(request.tools[0]["name"], {"parts": WORKERS})
            spent = slow_spend(request).usage
            return Reply(tool_calls=asked.tool_calls, finish_reason="tool_calls", usage=spent)
        return slow_spend(request)
    return ScriptedLM(reply=reply)


@tool(effects="reads")
def fan_out(parts: int) -> str:
    """Work on every part at once, on threads."""
    def one(n: int) -> str:
        try:
            return worker(n)
        except functai.FunctAIError as error:
            return error.code

    with ThreadPoolExecutor(parts) as pool:
        futures = [pool.submit(contextvars.copy_context().run, one, n) for n in range(parts)]
        done = [future.result() for future in futures]
    return ", ".join(done)


@tool(effects="reads")
async def fan_out_async(parts: int) -> str:
    """Work on every part at once, as async tasks."""
    async def one(n: int) -> str:
        try:
            return await worker.acall(n)
        except functai.FunctAIError as error:
            return error.code

    return ", ".join(await asyncio.gather(*(one(n) for n in range(parts))))


@ai(tools=[fan_out], max_tokens=100)
def coordinator(task: str) -> str:
    """Split the task and hand out its parts."""


@ai(tools=[fan_out_async], max_tokens=100)
def coordinator_async(task: str) -> str:
    """Split the task and hand out its parts."""


def test_nested_calls_on_threads_share_one_call_budget_without_overshoot():
    lm = coordinator_model()
    with functai.settings(client=lm, plugins=[budget(tokens=LIMIT, per="call", ask_at=1)]):
        try:
            coordinator("the report")
        except functai.FunctAIError as error:
            assert error.code == "budget-exceeded"
    worker_requests = [r for r in lm.requests if not r.tools]
    assert 2 <= len(worker_requests) < WORKERS  # some fit, the rest were refused before they were sent
    assert billed(lm) <= LIMIT


class AwaitingModel:
    """`coordinator_model` that awaits its pause: the event loop runs other tasks' checks meanwhile."""

    def __init__(self) -> None:
        self.scripted = coordinator_model()
        self.requests = self.scripted.requests

    def complete(self, request: functai.Request) -> Reply:
        return self.scripted.complete(request)

    async def acomplete(self, request: functai.Request) -> Reply:
        await asyncio.sleep(0.01)
        return self.scripted.complete(request)


def test_nested_calls_as_async_tasks_share_one_call_budget_without_overshoot():
    lm = AwaitingModel()

    async def main() -> None:
        with functai.settings(client=lm, plugins=[budget(tokens=LIMIT, per="call", ask_at=1)]):
            try:
                await coordinator_async.acall("the report")
            except functai.FunctAIError as error:
                assert error.code == "budget-exceeded"

    asyncio.run(main())
    worker_requests = [r for r in lm.requests if not r.tools]
    assert 2 <= len(worker_requests) < WORKERS
    assert billed(lm) <= LIMIT


def test_threads_sending_turns_on_branches_of_one_conversation_never_pass_its_budget():
    lm = ScriptedLM(reply=slow_spend)
    chat = conversation(functai.MemoryStore(), "threads", 1e9, lm)
    chat(QUESTION)
    root = chat.head.id
    first = billed(lm)
    limit = 10 * first
    lm = ScriptedLM(reply=slow_spend)
    raced = race(conversation(chat.store, "threads", limit, lm, ask_at=1), lm, root, 8)
    assert raced["outcomes"].count("done") >= 5  # most of the budget was spent
    assert first + raced["billed"] <= limit


def test_four_processes_with_threads_never_pass_a_conversations_budget(tmp_path):
    store = "sqlite:///" + str(tmp_path / "conversations.db")
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(store, "race", 1e9, lm)
    chat(QUESTION)
    first = billed(lm)
    limit = 20 * first
    gate = tmp_path / "gate"
    gate.mkdir()
    processes = [subprocess.Popen([sys.executable, str(HERE / "budget_program.py"), store, "race", repr(limit),
                                   "race", chat.head.id, "3", str(gate), "4"], env=environment(), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        results.append(json.loads(out.splitlines()[-1]))
    total = first + sum(result["billed"] for result in results)
    done = sum(result["outcomes"].count("done") for result in results)
    assert done >= 12  # most of the budget was spent, by several processes
    assert sum(1 for result in results if "done" in result["outcomes"]) >= 2
    assert total <= limit
    kept = functai.Conversation.open("race", store).all_entries()
    spent = sum(e["data"]["tokens"] for e in kept if e["plugin"] == "budget" and e["kind"] == "spent")
    assert spent == total  # every process's spend is in the conversation's books, on every branch


class Down:
    """A model whose server is down: every request fails before any reply."""

    name = "scripted"

    def complete(self, request: functai.Request) -> Reply:
        raise functai.ModelError("the server is down (503)", code="model-unavailable", status=503)


def test_requests_that_failed_before_any_reply_are_released_not_charged():
    guard = budget(tokens=2000, per="process", ask_at=1)
    for _ in range(6):  # each reserves up to ~350 tokens; charged, six would pass 2,000
        with functai.settings(client=Down(), plugins=[guard]):
            with pytest.raises(functai.FunctAIError) as failed:
                worker(1)
        assert failed.value.code == "model-unavailable"
    lm = ScriptedLM(reply=spend_all)
    with functai.settings(client=lm, plugins=[guard]):
        assert worker(2) == "ok"  # nothing was spent: the budget is whole
    assert billed(lm) <= 2000


def _stop_at_text(event):
    if event.part == "text":
        raise functai.FunctAIError("not shown here", code="guard-stopped")


def _refuse_reply(event):
    raise functai.FunctAIError("not taken here", code="policy-refused")


@pytest.mark.parametrize("per", ["process", "conversation"])
@pytest.mark.parametrize("stop", [{"chunk": _stop_at_text}, {"reply": _refuse_reply}], ids=["a-guard", "a-handler"])
def test_a_reply_stopped_or_refused_by_another_plugin_counts_at_its_most(per, stop):
    """The model answered (and was paid) before another plugin's guard stopped its text or a reply
    handler refused it: the request counts as the most it could cost, never as free."""
    def reply(request: functai.Request) -> Reply:  # text for the guard to stop; only a tool call for the handler
        if "chunk" in stop:
            return Reply(text="an answer", finish_reason="stop", usage={"input_tokens": 100, "output_tokens": 100})
        return attrs.evolve(tool_call("look", {}), usage={"input_tokens": 100, "output_tokens": 100})

    lm = ScriptedLM(reply=reply)
    guard = budget(tokens=1300, per=per, ask_at=1)  # two requests at their most (about 612 each) fit, not three
    other = functai.Plugin("other", **stop)

    @ai(max_tokens=600)
    def answer(question: str) -> str:
        """Answer."""

    if per == "process":
        def send() -> None:
            with functai.settings(client=lm, plugins=[other, guard]):
                answer("q")
    else:
        chat = answer.conversation("c", store=functai.MemoryStore(), client=lm, plugins=[other, guard])

        def send() -> None:
            chat("q")
    codes = []
    for _ in range(3):
        with pytest.raises(functai.FunctAIError) as failed:
            send()
        codes.append(failed.value.code)
    # In a turn the third asks for more (the turn waits); either way it is not sent.
    assert "budget-exceeded" not in codes[:2] and codes[2] in ("budget-exceeded", "turn-waiting"), codes
    assert len(lm.requests) == 2


def test_a_reply_counted_on_one_thread_is_never_missed_by_a_check_on_another(monkeypatch):
    """The reservation becomes the spend in one step: a check between the two sees one or the other."""
    import functai_budget

    real = functai_budget.find

    def slow_find(table, model):
        time.sleep(0.05)  # where the reply's count looks its price up: another thread checks meanwhile
        return real(table, model)

    monkeypatch.setattr(functai_budget, "find", slow_find)
    lm = ScriptedLM(reply=spend_all)
    guard = budget(tokens=LIMIT / 3, dollars=100, per="process", ask_at=1, prices={"scripted": (1.0, 1.0)})
    outcomes: list[str] = []

    def one(n: int) -> None:
        try:
            with functai.settings(client=lm, plugins=[guard]):
                outcomes.append(worker(n))
        except functai.FunctAIError as error:
            outcomes.append(error.code)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
        time.sleep(0.01)
    for thread in threads:
        thread.join()
    assert billed(lm) <= LIMIT / 3, outcomes
    assert "ok" in outcomes and "budget-exceeded" in outcomes


def test_a_view_opened_at_one_branch_still_counts_every_branch_of_the_conversation(tmp_path):
    from budget_program import assistant

    store = "sqlite:///" + str(tmp_path / "conversations.db")
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(store, "tree", 1e9, lm)
    chat(QUESTION)
    root, one = chat.head.id, billed(lm)

    def view(at: str) -> functai.Conversation:  # a SQL store reads only the branch of `at`
        return assistant.conversation("tree", store=store, client=ScriptedLM(reply=spend_all), at=at,
                                      context=functai.last_turns(0),
                                      plugins=[budget(tokens=3.5 * one, per="conversation", ask_at=1)])

    first = view(root)
    first(QUESTION)
    first(QUESTION)  # three turns' cost, on one branch
    with pytest.raises(functai.Waiting):  # a fourth, on another branch, passes the whole conversation's budget
        view(root)(QUESTION)
