"""What a budget counts, per turn, conversation (across processes and branches) and process; and
what it never counts twice, or as free."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import functai_approval
import pytest
from budget_program import (
    HERE,
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
from functai import Plugin, Reply, ai
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin

def second_process(store: str, conversation_id: str, tokens: float, *action: str) -> dict:
    """budget_program.py in a process of its own: what it printed."""
    done = subprocess.run([sys.executable, str(HERE / "budget_program.py"), store, conversation_id, repr(tokens),
                           *action], env=environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(params=["folder", "sqlite"])
def store(request, tmp_path) -> str:
    """A store two processes can open."""
    if request.param == "folder":
        return str(tmp_path / "conversations")
    return "sqlite:///" + str(tmp_path / "conversations.db")


@ai(tools=[lookup], max_tokens=40)
def support(question: str) -> str:
    """Help the customer."""


# --- per turn ----------------------------------------------------------------------------------

def test_per_turn_each_turn_starts_at_zero():
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    chat = assistant.conversation("turns", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                  plugins=[budget(tokens=1.5 * cost, per="turn", ask_at=1)])
    for _ in range(3):  # each turn spends two thirds of the budget: counted together, the second would wait
        assert chat(QUESTION) == "ok"
    entries = chat.entries("budget", "spent")
    assert [e["turn"] for e in entries] == [t.id for t in chat.turns]
    assert [e["data"]["tokens"] for e in entries] == [cost] * 3


def test_per_turn_a_turns_requests_add_up_and_its_extension_ends_with_it():
    first = first_request_cost(support, "lookup")

    lm = ScriptedLM(reply=tool_first("lookup"))
    chat = support.conversation("turns", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                plugins=[budget(tokens=1.5 * first, per="turn", ask_at=1)])
    with pytest.raises(functai.Waiting) as waiting:
        chat(QUESTION)
    assert len(lm.requests) == 1  # the second request would pass the turn's budget: asked first
    assert f"this turn has used {tokens(first)}" in waiting.value.turn.approvals[0]["question"]
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "ok"
    with pytest.raises(functai.Waiting):
        chat(QUESTION)  # a new turn: its first request fits again, its second does not
    assert len(lm.requests) == 3


# --- per conversation --------------------------------------------------------------------------

def test_per_conversation_spend_is_kept_as_the_conversations_entries():
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(functai.MemoryStore(), "kept", 2.5 * cost, lm)
    chat(QUESTION)
    [reserved] = chat.entries("budget", "reserved")  # the most the request could cost, before it was sent
    [entry] = chat.entries("budget", "spent")  # what it cost: the reservation is settled
    assert entry["turn"] == reserved["turn"] == chat.head.id
    books = entry["data"].pop("books")
    assert entry["data"] == {"call": chat.head.call, "outer": chat.head.call, "tokens": cost, "dollars": 0.0,
                             "model": "scripted", "estimated": False, "reserved": reserved["data"]["id"]}
    # each entry carries the running books it leaves: a check reads the newest, not every entry
    assert reserved["data"]["books"]["flight"] == {reserved["data"]["id"]: [reserved["data"]["tokens"], 0.0]}
    assert books == {"n": 2, "scope": "conversation", "spent": [cost, 0.0], "flight": {}, "extended": {},
                     "declined": []}
    assert reserved["data"]["tokens"] >= cost and reserved["data"]["call"] == chat.head.call
    with pytest.raises(functai.Waiting):
        chat(QUESTION)  # 2 turns' cost is past ASK_AT of 2.5
    assert lm.requests[1:] == []


@pytest.mark.parametrize("per", ["conversation", "branch"])
def test_spend_kept_before_running_books_is_counted_once_and_carried_on(per):
    cost = turn_cost()
    store = functai.MemoryStore()
    lm = ScriptedLM(reply=spend_all)
    chat = assistant.conversation("old", store=store, client=lm, context=functai.last_turns(0))
    chat(QUESTION)
    # what a version that kept no running books wrote for that turn
    chat.remember("budget", "reserved", {"id": "r1", "call": chat.head.call, "outer": chat.head.call,
                                         "tokens": 2 * cost, "dollars": 0.0}, turn=chat.head)
    chat.remember("budget", "spent", {"call": chat.head.call, "outer": chat.head.call, "tokens": cost,
                                      "dollars": 0.0, "model": "scripted", "estimated": False, "reserved": "r1"},
                  turn=chat.head)
    again = assistant.conversation("old", store=store, client=lm, context=functai.last_turns(0),
                                   plugins=[budget(tokens=2.5 * cost, per=per)])
    assert again(QUESTION) == "ok"  # the old turn's spend and this one's: 2 of 2.5
    [*_, newest] = again.entries("budget", "spent")
    assert newest["data"]["books"]["spent"] == [2 * cost, 0.0]  # the old entries summed once, then carried
    assert newest["data"]["books"]["flight"] == {}  # the old reservation was settled by its spend
    with pytest.raises(functai.Waiting):
        again(QUESTION)  # a third would pass ask_at of 2.5 turns
    assert len(lm.requests) == 2


def test_an_entry_without_books_after_newer_books_never_rolls_them_back():
    """Books numbered 1..n, then an entry kept without books (an older version, a hand edit): summed
    once, the books go on from past n, so a check never takes the older numbered books again."""
    cost = turn_cost()
    store = functai.MemoryStore()
    lm = ScriptedLM(reply=spend_all)
    guard = budget(tokens=6 * cost, per="conversation", ask_at=1)
    chat = assistant.conversation("c", store=store, client=lm, context=functai.last_turns(0), plugins=[guard])
    chat(QUESTION)
    chat(QUESTION)
    down = ScriptedLM(reply=lambda request: (_ for _ in ()).throw(functai.ModelError("down", code="model-down")))
    failing = assistant.conversation("c", store=store, client=down, context=functai.last_turns(0), plugins=[guard])
    with pytest.raises(functai.FunctAIError):
        failing(QUESTION)  # a released entry: the newest numbered books
    plain = assistant.conversation("c", store=store, client=lm, context=functai.last_turns(0))
    plain(QUESTION)
    plain.remember("budget", "spent", {"call": plain.head.call, "outer": plain.head.call, "tokens": cost,
                                       "dollars": 0.0, "model": "scripted", "estimated": False, "reserved": None},
                   turn=plain.head)
    done = 0
    with pytest.raises((functai.FunctAIError, functai.Waiting)):
        for _ in range(8):
            chat(QUESTION)
            done += 1
    assert done == 3  # 2 + 1 paid before, and 3 more: six turns of cost, not more
    numbers = [e["data"]["books"]["n"] for e in chat.all_entries() if e["plugin"] == "budget" and "books" in e["data"]]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


def test_a_second_process_sees_the_spend_and_asks(store):
    cost = turn_cost()
    limit = 2.5 * cost  # one turn fits under ASK_AT, two do not
    lm = ScriptedLM(reply=spend_all)
    conversation(store, "shared", limit, lm)(QUESTION)

    second = second_process(store, "shared", limit, "send", QUESTION)
    assert second["outcome"] == "waiting" and second["requests"] == 0
    assert second["question"] == (f"this conversation has used {tokens(cost)} of {tokens(limit)}, and this request "
                                  f"may cost up to {tokens(cost)}; allow {tokens(limit)} more?")
    fresh = second_process(store, "another", limit, "send", QUESTION)
    assert fresh["outcome"] == "done" and fresh["spent"] == cost  # the same turn, in a conversation that spent nothing


def test_a_waiting_turn_is_approved_and_resumed_in_another_process(store):
    cost = turn_cost()
    limit = 2.5 * cost
    chat, turn, lm = second_turn_waits(store, "approved", limit)

    second = second_process(store, "approved", limit, "approve", repr(2 * cost))
    assert second["outcome"] == "done" and second["requests"] == 1
    assert second["extended"] == [{"tokens": 2 * cost}] and second["spent"] == 2 * cost
    with pytest.raises(functai.Waiting) as waiting:  # back here: the extension and the spend are both seen
        chat(QUESTION)
    assert f"has used {tokens(2 * cost)} of {tokens(limit + 2 * cost)}" in waiting.value.turn.approvals[0]["question"]
    assert len(lm.requests) == 1


def test_a_waiting_turn_answered_by_a_view_without_its_function_resumes_here(store):
    cost = turn_cost()
    limit = 2.5 * cost
    chat, turn, lm = second_turn_waits(store, "console", limit)

    answered = second_process(store, "console", limit, "answer", repr(cost))
    assert answered == {"outcome": "answered", "turn": turn.id}
    assert chat.turn(answered["turn"]).resume() == "ok"
    assert [e["data"]["extend"] for e in chat.entries("budget", "extended")] == [{"tokens": cost}]


def test_a_refusal_to_extend_in_one_process_holds_in_another(store):
    cost = turn_cost()
    limit = 2.5 * cost
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(store, "declined", limit, lm)
    chat(QUESTION)
    assert second_process(store, "declined", limit, "send", QUESTION)["outcome"] == "waiting"

    third = second_process(store, "declined", limit, "deny")
    assert third["outcome"] == "done" and third["declined"] == 1  # two turns still fit in the budget itself

    with pytest.raises(functai.FunctAIError) as refused:  # a third does not, and more was refused: no new question
        chat(QUESTION)
    assert refused.value.code == "budget-exceeded"
    assert len(lm.requests) == 1 and chat.head.state == "failed"


def test_per_conversation_every_branch_pays_from_one_budget():
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    chat = assistant.conversation("tree", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                  plugins=[budget(tokens=3.5 * cost, per="conversation", ask_at=0.8)])
    chat(QUESTION)
    first = chat.head
    chat(QUESTION)
    branch = chat.continue_from(first)
    with pytest.raises(functai.Waiting) as waiting:
        branch(QUESTION)  # the other branch's second turn is counted too: three turns are past 80% of 3.5
    assert "this conversation has used" in waiting.value.turn.approvals[0]["question"]
    assert len(lm.requests) == 2


def test_per_branch_a_branch_does_not_pay_for_the_other_branchs_turns():
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    chat = assistant.conversation("branches", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                  plugins=[budget(tokens=3.5 * cost, per="branch", ask_at=0.8)])
    chat(QUESTION)
    first = chat.head
    chat(QUESTION)
    with pytest.raises(functai.Waiting):
        chat(QUESTION)  # three turns' cost is past 80% of 3.5

    branch = chat.continue_from(first)
    assert branch(QUESTION) == "ok"  # here only the first turn and this one were paid for
    assert [e["data"]["tokens"] for e in branch.entries("budget", "spent")] == [cost, cost]
    assert spent(chat) == 2 * cost


@pytest.mark.parametrize("store", ["memory", "folder"])
def test_per_branch_a_turn_that_failed_off_an_earlier_turn_takes_nothing_off_the_branch(store, tmp_path):
    def reply(request: functai.Request) -> Reply:
        if request.messages[-1]["role"] == "user" and "side" not in request.messages[-1]["content"]:
            return spend_all(request)
        if any(message["role"] == "tool" for message in request.messages):
            raise functai.ModelError("the server is down", code="model-unavailable")
        asked = tool_call("lookup", {"order": "A1"})  # a cheap request: more entries than the branch kept since
        return Reply(tool_calls=asked.tool_calls, finish_reason="tool_calls",
                     usage={"input_tokens": 1, "output_tokens": 1})

    probe = support.conversation("probe", store=functai.MemoryStore(), client=ScriptedLM(reply=spend_all),
                                 context=functai.last_turns(0), plugins=[budget(tokens=1e9, per="branch")])
    probe(QUESTION)
    cost = spent(probe)  # a turn of the branch, which the model answers at once
    chat = support.conversation("tree", store=functai.MemoryStore() if store == "memory" else str(tmp_path),
                                client=ScriptedLM(reply=reply), context=functai.last_turns(0),
                                plugins=[budget(tokens=2.5 * cost, per="branch", ask_at=1.0,
                                                decide=lambda question: False)])
    chat(QUESTION)
    first = chat.head
    chat(QUESTION)
    with pytest.raises(functai.FunctAIError, match="model-unavailable"):
        chat.continue_from(first)("a side question")  # two requests, the second failed: a dead end off the first
    with pytest.raises(functai.FunctAIError, match="budget-exceeded"):
        chat(QUESTION)  # the branch paid two turns and the side turn's requests: a third is past 2.5
    assert spent(chat) == 2 * cost + 2  # the dead end's cheap reply is the branch's too


# --- per process -------------------------------------------------------------------------------

def test_per_process_calls_and_conversations_share_one_budget():
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    shared = budget(tokens=1.5 * cost, per="process", ask_at=1)
    with functai.settings(client=lm, plugins=[shared]):
        assert assistant(QUESTION) == "ok"
        chat = assistant.conversation("process", store=functai.MemoryStore(), context=functai.last_turns(0))
        with pytest.raises(functai.Waiting) as waiting:
            chat(QUESTION)
        assert "this process has used" in waiting.value.turn.approvals[0]["question"]
        assert chat.entries("budget", "spent") == []  # a process's books are in its memory
        with pytest.raises(functai.FunctAIError) as refused:
            assistant(QUESTION)
    assert refused.value.code == "budget-exceeded"
    assert len(lm.requests) == 1


def test_per_process_an_extension_is_counted_once_when_its_turn_waits_again_before_sending():
    """A second budget asks about the same request after the first was answered: the turn resumes
    twice before the request is sent, and reads the first answer each time."""
    cost = turn_cost()
    lm = ScriptedLM(reply=spend_all)
    process = budget(tokens=cost / 2, per="process", ask_at=0.5, name="process")
    chat = assistant.conversation("twice", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                  plugins=[process, budget(tokens=cost / 2, per="conversation", ask_at=1)])
    with pytest.raises(functai.Waiting) as waiting:
        chat(QUESTION)
    assert [a["plugin"] for a in waiting.value.turn.approvals] == ["process"]
    waiting.value.turn.approve(extend=cost / 2)  # now one turn fits, still past ask_at: asked again, same answer
    with pytest.raises(functai.Waiting) as again:
        waiting.value.turn.resume()
    assert [a["plugin"] for a in again.value.turn.approvals] == ["budget"]
    again.value.turn.approve()
    assert again.value.turn.resume() == "ok"

    with pytest.raises(functai.FunctAIError) as refused:  # the process has no room left for a request
        ai(client=lm, plugins=[process], max_tokens=1)(assistant.fn)("?")
    assert refused.value.code == "budget-exceeded"
    assert f"this process has used {tokens(cost)} of {tokens(cost)}" in refused.value.message
    assert len(lm.requests) == 1


def test_per_process_calls_at_once_never_spend_past_the_budget():
    """Eight threads call at once; each request waits in the model until all eight have been sent
    or refused, so none of them is counted before the others are checked."""
    cost = turn_cost()
    arrived = threading.Condition()
    counted = []
    release = threading.Event()

    def held_reply(request):
        with arrived:
            counted.append("sent")
            arrived.notify_all()
        release.wait()
        return spend_all(request)

    lm = ScriptedLM(reply=held_reply)
    call = ai(client=lm, plugins=[budget(tokens=3.5 * cost, per="process")], max_tokens=40)(assistant.fn)
    outcomes = []

    def one():
        try:
            outcomes.append(call(QUESTION))
        except functai.FunctAIError as error:
            outcomes.append(error.code)
            with arrived:
                counted.append("refused")
                arrived.notify_all()

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    with arrived:
        assert arrived.wait_for(lambda: len(counted) == 8, timeout=60)
    release.set()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["budget-exceeded"] * 5 + ["ok"] * 3
    assert len(lm.requests) == 3
    assert sum(estimate(r) + r.settings["max_tokens"] for r in lm.requests) <= 3.5 * cost


class HeldModel:
    """A model client whose async replies wait until ``release`` is set; ``arrived`` is set once
    ``expected`` calls have either reached it or been refused before it (`refused`)."""

    name = "scripted"

    def __init__(self, expected: int) -> None:
        self.lm = ScriptedLM(reply=spend_all)
        self.expected = expected
        self.seen = 0
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    def complete(self, request: functai.Request) -> Reply:
        return self.lm.complete(request)

    def refused(self) -> None:
        self.seen += 1
        if self.seen == self.expected:
            self.arrived.set()

    async def acomplete(self, request: functai.Request) -> Reply:
        self.refused()  # counted the same way: this one got through
        await self.release.wait()
        return self.lm.complete(request)


def test_per_process_async_calls_at_once_never_spend_past_the_budget():
    cost = turn_cost()
    model = HeldModel(expected=8)
    call = ai(client=model, plugins=[budget(tokens=3.5 * cost, per="process")], max_tokens=40)(assistant.fn)

    async def one() -> str:
        try:
            return await call.acall(QUESTION)
        except Exception as error:  # any failure counts as arrived: the others must not wait for it
            model.refused()
            return getattr(error, "code", repr(error))

    async def eight() -> list[str]:
        calls = [asyncio.create_task(one()) for _ in range(8)]
        await model.arrived.wait()
        model.release.set()
        return await asyncio.gather(*calls)

    assert sorted(asyncio.run(eight())) == ["budget-exceeded"] * 5 + ["ok"] * 3
    assert len(model.lm.requests) == 3


# --- never twice, never free --------------------------------------------------------------------

def test_a_request_paid_before_a_tool_approval_is_counted_once(installed_plugins):
    installed_plugins(functai_approval.plugin)
    lm = ScriptedLM(reply=tool_first("refund"))
    chat = desk.conversation("once", store=functai.MemoryStore(), client=lm,
                             plugins=[budget(tokens=100_000, per="conversation")])
    with pytest.raises(functai.Waiting) as waiting:
        chat("Refund A1")
    assert waiting.value.turn.approvals[0]["name"] == "refund"
    assert len(chat.entries("budget", "spent")) == 1
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "ok"
    assert len(lm.requests) == 2
    assert [e["data"]["tokens"] for e in chat.entries("budget", "spent")] == [
        estimate(r) + 40 for r in lm.requests]


def test_a_reply_without_usage_counts_as_the_most_it_could_cost():
    lm = ScriptedLM(["Paris"])
    chat = assistant.conversation("unknown", store=functai.MemoryStore(), client=lm,
                                  plugins=[budget(tokens=100_000, per="conversation")])
    chat(QUESTION)
    [entry] = chat.entries("budget", "spent")
    assert entry["data"]["tokens"] == estimate(lm.requests[0]) + 40
    assert entry["data"]["estimated"] is True


def test_a_reply_without_usage_counts_in_dollars_too():
    lm = ScriptedLM(["Paris"])
    priced = budget(dollars=10, per="conversation", prices={"scripted": (1.0, 4.0)})
    chat = assistant.conversation("unknown", store=functai.MemoryStore(), client=lm, plugins=[priced])
    chat(QUESTION)
    [entry] = chat.entries("budget", "spent")
    assert entry["data"]["dollars"] == pytest.approx((estimate(lm.requests[0]) * 1.0 + 40 * 4.0) / 1e6)


@pytest.mark.parametrize("answering_first", [True, False], ids=["answered-before", "answered-after"])
def test_a_request_another_plugin_answers_is_not_counted(answering_first):
    canned = Plugin("canned")

    @canned.request
    def answer(event):
        return Reply(text="from the cache", finish_reason="stop", usage={"input_tokens": 500, "output_tokens": 500})

    lm = ScriptedLM(reply=spend_all)
    guard = budget(tokens=1500, per="conversation", ask_at=1)
    plugins = [canned, guard] if answering_first else [guard, canned]
    chat = assistant.conversation("answered", store=functai.MemoryStore(), client=lm, plugins=plugins)
    for _ in range(3):  # counted, three thousand tokens would be past the budget
        assert chat(QUESTION) == "from the cache"
    assert lm.requests == [] and chat.entries("budget", "spent") == []


def test_what_a_failed_turn_spent_is_counted_by_the_next_turn():
    support = ai(tools=[lookup], max_tokens=40)(assistant.fn)
    first = first_request_cost(support, "lookup")

    lm = ScriptedLM(reply=tool_first("lookup"))
    chat = support.conversation("failed", store=functai.MemoryStore(), client=lm,
                                plugins=[budget(tokens=1.5 * first, per="conversation", decide=lambda q: False)])
    with pytest.raises(functai.FunctAIError, match="budget-exceeded"):
        chat(QUESTION)  # the first request is paid; the second would pass the budget
    assert len(lm.requests) == 1
    with pytest.raises(functai.FunctAIError, match="budget-exceeded"):
        chat(QUESTION)  # two first requests would pass it too
    assert len(lm.requests) == 1


def test_what_a_stopped_turn_spent_is_counted_by_the_next_turn():
    cost = turn_cost()
    lm = ScriptedLM(reply=lambda request: spend_all(request, text="word " * 50))
    chat = conversation(functai.MemoryStore(), "stopped", 2.5 * cost, lm)
    with chat.stream(QUESTION) as stream:
        next(event for event in stream if event.kind == "text")
    assert chat.entries("budget", "spent")[0]["data"]["tokens"] == cost
    with pytest.raises(functai.Waiting):
        chat(QUESTION)  # two turns would pass ASK_AT of the budget


def newest_books(chat: functai.Conversation) -> dict:
    """The running books the budget's newest entry on the view's branch leaves."""
    return max((entry["data"]["books"] for kind in ("reserved", "spent", "released")
                for entry in chat.entries("budget", kind)), key=lambda books: books["n"])


@pytest.mark.parametrize("per", ["call", "turn", "branch", "conversation"])
def test_a_stopped_turn_is_counted_at_its_most_whatever_its_budget_is_per(per):
    cost = turn_cost()
    lm = ScriptedLM(reply=lambda request: spend_all(request, text="word " * 50))
    chat = assistant.conversation("stopped", store=functai.MemoryStore(), client=lm, context=functai.last_turns(0),
                                  plugins=[budget(tokens=10 * cost, per=per)])
    with chat.stream(QUESTION) as stream:
        next(event for event in stream if event.kind == "text")
    assert spent(chat) == cost
    assert newest_books(chat)["flight"] == {} and newest_books(chat)["spent"][0] == cost


@pytest.mark.parametrize("per", ["turn", "conversation", "process"])
def test_an_attempt_that_began_to_stream_is_paid_when_a_plugin_answers_after_it(per):
    class Flaky(ScriptedLM):
        """Its first stream sends some text, then the connection drops."""

        def stream(self, request):
            if not self.requests:
                self.requests.append(request)
                yield "partial "
                raise functai.ModelError("the connection dropped", code="model-unreachable")
            yield from super().stream(request)

    cost = turn_cost()
    canned = Plugin("canned", model_error=lambda failure: Reply(text="sorry, try later", finish_reason="stop"))
    chat = assistant.conversation("answered", store=functai.MemoryStore(), client=Flaky(reply=spend_all),
                                  context=functai.last_turns(0),
                                  plugins=[budget(tokens=2.5 * cost, per=per, decide=lambda q: False), canned])
    with chat.stream(QUESTION) as stream:
        list(stream)
    assert stream.value == "sorry, try later"
    if per != "process":  # kept in the conversation: a spent entry, nothing left in flight
        assert spent(chat) == cost and newest_books(chat)["flight"] == {}
    if per != "turn":
        chat(QUESTION)  # the failed attempt and this turn: two of two and a half
        with pytest.raises(functai.FunctAIError, match="budget-exceeded"):
            chat(QUESTION)


def test_a_failed_nested_request_of_a_turn_resumed_elsewhere_is_not_left_in_flight(tmp_path):
    @ai(max_tokens=500)
    def worker(task: str) -> str:
        """Do the task."""

    @functai.tool(effects="reads")
    def ask_worker(task: str) -> str:
        """Ask a worker."""
        try:
            return worker(task)
        except functai.FunctAIError as error:
            return f"the worker failed: {error.code}"

    @functai.tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return f"order {order} refunded"

    @ai(tools=[ask_worker, refund], approve="changes", max_tokens=40)
    def help_desk(question: str) -> str:
        """Help the customer."""

    def reply(request: functai.Request) -> Reply:
        if request.messages[0]["content"].startswith("Do the task"):
            raise functai.ModelError("the server is down", code="model-unavailable")
        results = sum(message["role"] == "tool" for message in request.messages)
        if results < 2:
            asked = tool_call(*(("ask_worker", {"task": "look"}) if results == 0 else ("refund", {"order": "A1"})))
            return Reply(tool_calls=asked.tool_calls, finish_reason="tool_calls",
                         usage={"input_tokens": estimate(request), "output_tokens": 40})
        return spend_all(request)

    def opened() -> functai.Conversation:  # as each process opens it: a budget of its own
        return help_desk.conversation("desk", store=str(tmp_path), client=ScriptedLM(reply=reply),
                                      plugins=[functai_approval.plugin, budget(tokens=1e6, per="conversation")])

    with pytest.raises(functai.Waiting) as waiting:
        opened()(QUESTION)
    elsewhere = opened().turn(waiting.value.turn.id)
    elsewhere.approve()
    assert elsewhere.resume() == "ok"
    books = newest_books(opened())
    assert books["flight"] == {}
    assert len(opened().entries("budget", "released")) == 1  # the worker's request, which reached no model
