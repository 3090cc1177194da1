"""What functai-budget adds to a call: its check before the request and its count after the reply.

Process CPU time (``time.process_time``) per call, ~4 KB request, ScriptedLM answering with usage:
a plain call, then with a token budget per call, a dollar budget per process; a conversation turn
(in-memory store) without a budget, then with a dollar budget per conversation (its spend kept as the
conversation's entries, read back at every check). Beside them the floor of a check: the prompt's
estimate (the request as JSON). Medians of interleaved rounds; budgets large enough never to ask.

    python benchmarks/bench_budget.py [--rounds 15] [--calls 1000] [--turns 20]

A conversation budget reads the branch's spend back at each check, so its cost grows with the
conversation: the two turn cases run ``--turns`` turns a round, and the conversations grow to
``rounds × turns`` turns.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import functai
from functai import Plugin, Reply, ai
from functai.testing import ScriptedLM
from functai_budget import budget, estimate

QUESTION = ("My order 1234 was due on Monday and has not come; the tracking page says 'in transit' since "
            "last week. Where is it, and can I get a refund if it does not come by Friday? ") * 22
PRICES = {"scripted": (0.15, 0.60, 0.075)}


@ai
def support(question: str) -> str:
    """Answer the customer's question about their order, politely and briefly. Quote the order number,
    say what the tracking shows, and what happens next. Never promise a delivery date."""


def per_call(fn: Callable[[], object], calls: int, plugins: list[Plugin]) -> float:
    with functai.settings(plugins=plugins):
        start = time.process_time()
        for _ in range(calls):
            fn()
        return (time.process_time() - start) / calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args(argv)
    reply = Reply(text="Your order is in transit.", finish_reason="stop",
                  usage={"input_tokens": 1100, "output_tokens": 12})
    lm = ScriptedLM(reply=lambda request: reply)
    huge = 1e12
    per_call_tokens = budget(tokens=huge, per="call")
    per_process_dollars = budget(dollars=huge, per="process", prices=PRICES)
    per_conversation = budget(dollars=huge, per="conversation", prices=PRICES)
    with functai.settings(client=lm):
        shown = functai.last_turns(3)  # each turn the same size: what grows is the spend read back
        plain_chat = support.conversation("plain", context=shown)
        budget_chat = support.conversation("budgeted", plugins=[per_conversation], context=shown)

        def ask() -> object:
            lm.requests.clear()
            return support(QUESTION)

        def turn(chat: functai.Conversation) -> Callable[[], object]:
            def send() -> object:
                lm.requests.clear()
                return chat(QUESTION)
            return send

        support(QUESTION)
        request = lm.requests[-1]
        cases: dict[str, tuple[Callable[[], object], list[Plugin]]] = {  # a turn case's name starts "turn"
            "plain call": (ask, []),
            "call, tokens per call": (ask, [per_call_tokens]),
            "call, dollars per process": (ask, [per_process_dollars]),
            "turn (memory store)": (turn(plain_chat), []),
            "turn, dollars per conversation": (turn(budget_chat), []),
            "floor: estimate(request)": (lambda: estimate(request), []),
        }
        for run, plugins in cases.values():
            per_call(run, 20, plugins)
        seconds: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (run, plugins) in cases.items():
                seconds[name].append(per_call(run, args.turns if name.startswith("turn") else args.calls, plugins))
    medians = {name: statistics.median(values) * 1e6 for name, values in seconds.items()}
    print(f"request: ~{estimate(request)} tokens estimated; {args.rounds} interleaved rounds of {args.calls} calls "
          f"and {args.turns} turns (the conversations grow to {args.rounds * args.turns + 20} turns); "
          "CPU µs per call (median)\n")
    print(f"{'case':<34}{'µs':>9}{'added':>10}")
    bases = {"call": medians["plain call"], "turn": medians["turn (memory store)"]}
    for name, value in medians.items():
        base = bases.get(name.split(",")[0].split(" ")[0])
        added = f"{value - base:+.1f}" if base is not None and "," in name else ""
        print(f"{name:<34}{value:>9.1f}{added:>10}")
    print(f"\ncommand: python benchmarks/bench_budget.py --rounds {args.rounds} --calls {args.calls} "
          f"--turns {args.turns}  "
          f"(Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
