"""The budget tests' shared pieces: models that spend, tools, and an assistant whose conversation
keeps a token budget, which also runs as a second process that sends a turn or answers a waiting
one, printing what happened.

    python budget_program.py STORE CONVERSATION TOKENS send QUESTION
    python budget_program.py STORE CONVERSATION TOKENS approve EXTEND
    python budget_program.py STORE CONVERSATION TOKENS deny
    python budget_program.py STORE CONVERSATION TOKENS answer EXTEND   (as a console would: approve, not resume)
    python budget_program.py STORE CONVERSATION TOKENS race TURN THREADS [GATE PROCESSES]
        (THREADS threads, each sending turns on a branch of its own from TURN; with GATE, a folder,
        once PROCESSES processes are ready there)

STORE is a folder or a URL. Imported by a functai command's process with ``BUDGET_TOKENS`` set,
it configures that process with the tests' model and a budget of that many tokens.

Every reply spends all its request may cost (`spend_all`), and a turn is shown no earlier turn,
so each turn with the same question costs the same.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import threading
import time
from typing import Any

import functai_budget

import functai
from functai import Reply
from functai.testing import ScriptedLM, tool_call

HERE = pathlib.Path(__file__).resolve().parent

#: The share of the budget at which a turn asks for more.
ASK_AT = 0.5

#: The question each turn of the tests asks.
QUESTION = "Which river runs through Paris, and where does it meet the sea?"


def environment(**more: str) -> dict[str, str]:
    """The environment of another process that imports this module (the plugins this checkout ships
    and no other installed one: tests/checkout.py)."""
    from checkout import shipped_env

    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return shipped_env(PYTHONPATH=path, **more)


def spend_all(request: functai.Request, text: str = "ok") -> Reply:
    """A reply whose real usage is the most its request could cost: the prompt as estimated, and
    every token the reply was allowed."""
    return Reply(text=text, finish_reason="stop",
                 usage={"input_tokens": functai_budget.estimate(request),
                        "output_tokens": request.settings["max_tokens"]})


def slow_spend(request: functai.Request) -> Reply:
    """`spend_all`, after a pause: requests of other threads and processes are checked meanwhile."""
    time.sleep(0.01)
    return spend_all(request)


def billed(lm: ScriptedLM) -> float:
    """What a model that spends all it may (`spend_all`) billed for every request it was sent."""
    return float(sum(functai_budget.estimate(r) + r.settings["max_tokens"] for r in lm.requests))


def gate(folder: str, processes: int) -> None:
    """Wait until ``processes`` processes (this one too) are ready in ``folder``: they start together."""
    pathlib.Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < processes and time.monotonic() < deadline:
        time.sleep(0.005)


def race(chat: functai.Conversation, lm: ScriptedLM, turn: str, threads: int,
         ready: Any = None) -> dict[str, Any]:
    """``threads`` threads, each sending turns on a branch of its own from ``turn`` until refused;
    they start once ``ready()`` returns."""
    outcomes: list[str] = []
    start = threading.Barrier(threads, action=ready)

    def send_turns() -> None:
        branch = chat.continue_from(turn)
        start.wait()
        for _ in range(50):
            try:
                branch(QUESTION)
            except functai.FunctAIError as error:  # Waiting is one too: past ASK_AT with nobody to answer
                outcomes.append(error.code)
                return
            outcomes.append("done")

    workers = [threading.Thread(target=send_turns) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {"billed": billed(lm), "outcomes": outcomes}


def tool_first(name: str) -> Any:
    """A model that calls the tool ``name`` once in each turn, then answers; spending all it may."""
    def reply(request: functai.Request) -> Reply:
        if request.messages[-1]["role"] == "user":
            asked = tool_call(name, {"order": "A1"})
            return Reply(tool_calls=asked.tool_calls, finish_reason="tool_calls",
                         usage={"input_tokens": functai_budget.estimate(request),
                                "output_tokens": request.settings["max_tokens"]})
        return spend_all(request)
    return reply


@functai.tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped on Monday, due on Thursday"


@functai.tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"order {order} refunded"


@functai.ai(tools=[refund], approve="changes", max_tokens=40)
def desk(question: str) -> str:
    """Help the customer (a refund waits for a person's approval)."""


def tokens(amount: float) -> str:
    """An amount of tokens as the budget's questions and notes write it."""
    return f"{amount:,.0f} tokens"


if os.environ.get("BUDGET_TOKENS"):  # a functai command's process: the tests' model and budget, set here
    functai.configure(client=ScriptedLM(reply=spend_all), plugins=[functai_budget.budget(
        tokens=float(os.environ["BUDGET_TOKENS"]), per="conversation", ask_at=ASK_AT)])


@functai.ai(max_tokens=40)
def assistant(question: str) -> str:
    """Answer the question."""


def conversation(store: Any, conversation_id: str, limit: float, lm: ScriptedLM,
                 ask_at: float = ASK_AT) -> functai.Conversation:
    """The conversation with its budget of ``limit`` tokens, as every process opens it."""
    return assistant.conversation(conversation_id, store=store, client=lm, context=functai.last_turns(0),
                                  plugins=[functai_budget.budget(tokens=limit, per="conversation", ask_at=ask_at)])


def turn_cost() -> float:
    """What one turn of the assistant costs (the same for every turn: it is shown no other)."""
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(functai.MemoryStore(), "probe", 1e9, lm)
    chat(QUESTION)
    return spent(chat)


def first_request_cost(function: functai.AIFunction, tool: str) -> float:
    """What the first request of a turn of ``function`` costs, when its model calls ``tool`` first."""
    probe = ScriptedLM(reply=tool_first(tool))
    try:
        function.conversation("probe", store=functai.MemoryStore(), client=probe)(QUESTION)
    except functai.Waiting:
        pass  # the tool waits for an approval: the first request was sent
    first = probe.requests[0]
    return float(functai_budget.estimate(first) + first.settings["max_tokens"])


def second_turn_waits(store: Any, conversation_id: str,
                      limit: float) -> tuple[functai.Conversation, functai.Turn, ScriptedLM]:
    """A conversation whose first turn is done and whose second waits for the budget's question
    (``limit`` is from two turns' cost to under four: one fits under ``ASK_AT`` of it, two do not)."""
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(store, conversation_id, limit, lm)
    chat(QUESTION)
    try:
        chat(QUESTION)
    except functai.Waiting as waiting:
        return chat, waiting.turn, lm
    raise AssertionError("the second turn did not wait")


def spent(chat: functai.Conversation) -> float:
    return sum(entry["data"]["tokens"] for entry in chat.entries("budget", "spent"))


def outcome(chat: functai.Conversation, lm: ScriptedLM, run: Any) -> dict[str, Any]:
    """What running ``run()`` did: done, waiting (with the question) or refused (with the code)."""
    shown: dict[str, Any] = {}
    try:
        shown = {"outcome": "done", "value": run()}
    except functai.Waiting as waiting:
        shown = {"outcome": "waiting", "question": waiting.turn.approvals[0]["question"]}
    except functai.FunctAIError as error:
        shown = {"outcome": "refused", "code": error.code}
    return {**shown, "requests": len(lm.requests), "spent": spent(chat),
            "extended": [entry["data"]["extend"] for entry in chat.entries("budget", "extended")],
            "declined": len(chat.entries("budget", "declined"))}


def main(argv: list[str]) -> dict[str, Any]:
    store, conversation_id, limit, action, *rest = argv
    if action == "race":  # up to the whole budget: nothing asks before it is spent
        lm = ScriptedLM(reply=slow_spend)
        ready = (lambda: gate(rest[2], int(rest[3]))) if len(rest) > 2 else None
        return race(conversation(store, conversation_id, float(limit), lm, ask_at=1), lm, rest[0], int(rest[1]),
                    ready)
    lm = ScriptedLM(reply=spend_all)
    chat = conversation(store, conversation_id, float(limit), lm)
    if action == "send":
        return outcome(chat, lm, lambda: chat(rest[0]))
    if action == "answer":  # a view opened by the conversation's id alone, without its function or budget
        opened = functai.Conversation.open(conversation_id, store)
        waiting = next(turn for turn in opened.all_turns() if turn.state == "waiting")
        waiting.approve(extend=float(rest[0]), by="console")
        return {"outcome": "answered", "turn": waiting.id}
    waiting = next(turn for turn in chat.turns if turn.state == "waiting")
    if action == "approve":
        waiting.approve(extend=float(rest[0]), by="second process")
    else:
        waiting.deny(by="second process")
    return outcome(chat, lm, waiting.resume)


if __name__ == "__main__":
    import budget_program  # the assistant under its module's name, as the tests' process knows it

    print(json.dumps(budget_program.main(sys.argv[1:])))
