"""Overshoot: over 1,000 random requests per scope and unit, what was really spent never passes
the budget (with what was granted) by more than one request's pre-checked maximum.

Requests are random: prompts of random size, tool results of random size, a reply limit the
function sets or none, and real usage up to what the request could cost (prompt tokens up to the
estimate, output tokens up to the request's ``max_tokens``). More is granted at random, by a
``decide`` function or by a person approving (with or without an extension) or denying.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from functai_budget import Price, budget, estimate

import functai
from functai import Reply, ai, tool
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin

REQUESTS = 1000
PRICE = Price(2.0, 8.0, 0.5)  # dollars per million tokens, for the model "scripted"
LIMITS = {"tokens": 12_000, "dollars": 0.06}

@dataclass
class Books:
    """What the test itself counts, per budget scope: spent, granted, and the largest request."""

    unit: str
    spent: dict[object, float] = field(default_factory=dict)
    granted: dict[object, float] = field(default_factory=dict)
    largest: dict[object, float] = field(default_factory=dict)
    scope: object = None
    sent: int = 0
    answered: dict[str, int] = field(default_factory=lambda: {"person": 0, "function": 0})

    def amount(self, input_tokens: int, output_tokens: int, cached: int = 0) -> float:
        if self.unit == "tokens":
            return float(input_tokens + output_tokens)
        return PRICE.dollars(input_tokens, output_tokens, cached)

    def pay(self, request: functai.Request, input_tokens: int, output_tokens: int, cached: int) -> None:
        most = self.amount(estimate(request), request.settings["max_tokens"])
        self.spent[self.scope] = self.spent.get(self.scope, 0.0) + self.amount(input_tokens, output_tokens, cached)
        self.largest[self.scope] = max(self.largest.get(self.scope, 0.0), most)
        self.sent += 1

    def grant(self, amount: float) -> None:
        self.granted[self.scope] = self.granted.get(self.scope, 0.0) + amount

    def overshoots(self) -> list[tuple[float, float]]:
        """Per scope: how far the spend passed its budget, and one request's pre-checked maximum."""
        return [(spent - LIMITS[self.unit] - self.granted.get(scope, 0.0), self.largest[scope])
                for scope, spent in self.spent.items()]


def random_model(rng: random.Random, books: Books) -> ScriptedLM:
    """Reads a file of random size now and then, else answers; really uses a random part of what
    each request could cost, or all of it."""
    def reply(request: functai.Request) -> Reply:
        most = estimate(request), request.settings["max_tokens"]
        if rng.random() < 0.3:  # all it could: the spend comes as near the budget as it may
            input_tokens, output_tokens = most
        else:
            input_tokens, output_tokens = rng.randint(0, most[0]), rng.randint(0, most[1])
        cached = rng.choice([0, rng.randint(0, input_tokens)])
        books.pay(request, input_tokens, output_tokens, cached)
        usage = {"input_tokens": input_tokens, "output_tokens": output_tokens, "cached_tokens": cached}
        if rng.random() < 0.4:
            asked = tool_call("read_file", {"size": rng.randint(0, 9000)})
            return Reply(tool_calls=asked.tool_calls, finish_reason="tool_calls", usage=usage)
        return Reply(text="done", finish_reason="stop", usage=usage)
    return ScriptedLM(reply=reply)


@tool(effects="reads")
def read_file(size: int) -> str:
    """Read a file of ``size`` characters."""
    return "y" * size


def functions(lm: ScriptedLM, max_steps: int = 6) -> list[functai.AIFunction]:
    """The same function with no reply limit of its own, and with a few."""
    def work(text: str) -> str:
        """Do the work."""

    return [ai(client=lm, tools=[read_file], max_steps=max_steps, **limit)(work)
            for limit in ({}, {}, {"max_tokens": 50}, {"max_tokens": 800}, {"max_tokens": 3000})]


def random_decide(rng: random.Random, books: Books):
    """Answers as a function would: the offer, a random amount, or no."""
    def decide(question):
        books.answered["function"] += 1
        choice = rng.random()
        if choice < 0.3:
            books.grant(question.extend)
            return True
        if choice < 0.6:
            amount = question.extend * rng.choice([0.01, 0.2, 1.5])
            books.grant(amount)
            return amount
        return rng.choice([False, "no more"])
    return decide


def answer_by_person(rng: random.Random, books: Books, turn: functai.Turn) -> None:
    """Answers a waiting turn as a person would: an extension, the offer, or no."""
    [asked] = turn.approvals
    books.answered["person"] += 1
    choice = rng.random()
    if choice < 0.3:
        books.grant(asked["extend"])
        turn.approve()
    elif choice < 0.6:
        amount = asked["extend"] * rng.choice([0.01, 0.2, 1.5])
        books.grant(amount)
        turn.approve(extend=amount)
    else:
        turn.deny()


def run_turn(rng: random.Random, books: Books, chat: functai.Conversation, text: str) -> str:
    """One turn, answered each time it waits; its outcome."""
    try:
        try:
            chat(text)
        except functai.Waiting as waiting:
            turn = waiting.turn
            while True:
                answer_by_person(rng, books, turn)
                try:
                    turn.resume()
                    break
                except functai.Waiting:
                    continue
    except functai.FunctAIError as error:
        assert error.code in ("budget-exceeded", "max-steps"), error
        return error.code
    return "done"


def plain_call(rng: random.Random, made: list[functai.AIFunction], guard: functai.Plugin) -> str:
    """One call outside a conversation; its outcome."""
    with functai.settings(plugins=[guard]):
        try:
            rng.choice(made)(prompt(rng))
        except functai.FunctAIError as error:
            assert error.code in ("budget-exceeded", "max-steps"), error
            return error.code
    return "done"


def prompt(rng: random.Random) -> str:
    return "x" * rng.choice([rng.randint(1, 200), rng.randint(200, 4000), rng.randint(4000, 20000)])


def plugin(rng: random.Random, books: Books, per: str, person: bool) -> functai.Plugin:
    limit = {books.unit: LIMITS[books.unit]}
    return budget(**limit, per=per, ask_at=rng.choice([0.5, 0.8, 1]), prices={"scripted": PRICE},
                  decide=None if person else random_decide(rng, books))


def drive(per: str, unit: str, seed: int, failing: bool = False) -> Books:
    """Random requests until ``REQUESTS`` were sent, through budgets of scope ``per``; ``failing``:
    many turns fail midway (too many steps), and a conversation goes on after a failed turn."""
    rng = random.Random(seed)
    books = Books(unit)
    lm = random_model(rng, books)
    made = functions(lm, max_steps=2 if failing else 6)
    scopes = 0
    while books.sent < REQUESTS:
        scopes += 1
        books.scope = scopes
        person = per != "call" and rng.random() < 0.5  # a plain call has nobody to ask
        guard = plugin(rng, books, per, person)
        if per == "call":
            plain_call(rng, made, guard)
            continue
        if per == "process":  # plain calls and conversation turns, all on the one budget, until it refuses
            chat = rng.choice(made).conversation(f"c{scopes}", store=functai.MemoryStore(), plugins=[guard],
                                                 context=functai.last_turns(2))
            while books.sent < REQUESTS:
                if rng.random() < 0.5:
                    outcome = run_turn(rng, books, chat, prompt(rng))
                else:
                    outcome = plain_call(rng, made, guard)
                if outcome == "budget-exceeded":
                    break
            continue
        chat = rng.choice(made).conversation(f"c{scopes}", store=functai.MemoryStore(), plugins=[guard],
                                             context=functai.last_turns(2))
        for turn in range(rng.randint(1, 12)):
            if per == "turn" and turn:
                books.scope = scopes = scopes + 1
            outcome = run_turn(rng, books, chat, prompt(rng))
            if outcome == "budget-exceeded" and per == "conversation" and not failing:
                break
    return books


@pytest.mark.parametrize("unit", ["tokens", "dollars"])
@pytest.mark.parametrize("per", ["call", "turn", "conversation", "process"])
def test_what_is_spent_never_passes_the_budget_by_more_than_one_request(per, unit):
    books = drive(per, unit, seed=sum(map(ord, per + unit)))
    overshoots = books.overshoots()
    assert len(overshoots) > 20  # many budgets, most of them used up
    assert books.answered["function"] > 20 and (per == "call" or books.answered["person"] > 20)
    largest = max(over for over, _ in overshoots)
    print(f"\nlargest overshoot per {per} in {unit}: {largest:g} over {books.sent} requests, {len(overshoots)} budgets")
    for over, most in overshoots:
        assert over <= most
    assert largest <= 1e-9


@pytest.mark.parametrize("unit", ["tokens", "dollars"])
def test_turns_that_fail_midway_still_count_against_their_conversation(unit):
    books = drive("conversation", unit, seed=sum(map(ord, "failing" + unit)), failing=True)
    largest = max(over for over, _ in books.overshoots())
    print(f"\nlargest overshoot per conversation in {unit}, turns failing midway: {largest:g}")
    assert largest <= 1e-9
