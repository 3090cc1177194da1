"""Characters sent per turn over 200 turns, with and without compaction(keep=4, every=4).

Without compaction a turn is shown every earlier turn, so requests grow with
the conversation; with it, old turns are folded into a summary and the
request stays flat. The model is scripted (answers ~120 characters; the
summarizer answers a ~300-character summary).

    python benchmarks/bench_request_size.py [--turns 200]
"""

from __future__ import annotations

import argparse

import functai
from functai import ai
from functai._stores import MemoryStore
from functai._models.request import Request
from functai.testing import ScriptedLM


@ai
def tutor(question: str) -> str:
    """Tutor the student, building on what was said before."""


def reply(request: Request) -> str:
    if request.messages[0]["content"].startswith("Summarize a conversation"):
        return "The student worked through fractions, decimals and percentages; " * 5
    return "Here is an explanation with a worked example and a question for you to try next time. " * 1


def sizes(turns: int, plugins: list[object]) -> list[int]:
    lm = ScriptedLM(reply=reply)
    out = []
    with functai.settings(client=lm):
        chat = tutor.conversation("sizes", store=MemoryStore(), plugins=plugins)
        for i in range(turns):
            before = len(lm.requests)
            chat(f"Question number {i}: what about this next case, with a little more context?")
            turn_requests = [r for r in lm.requests[before:] if not r.messages[0]["content"].startswith("Summarize")]
            out.append(sum(len(str(m.get("content") or "")) for m in turn_requests[0].messages))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args(argv)
    plain = sizes(args.turns, [])
    compacted = sizes(args.turns, [functai.compaction(keep=4, every=4)])
    print("| turn | characters sent, all turns shown | with compaction(keep=4, every=4) |")
    print("|---|---|---|")
    for turn in (1, 5, 10, 25, 50, 100, 150, 200):
        if turn <= args.turns:
            print(f"| {turn} | {plain[turn - 1]:,} | {compacted[turn - 1]:,} |")
    tail = compacted[20:]
    print(f"\nwith compaction, turns 21-{args.turns}: min {min(tail):,}, max {max(tail):,} characters "
          f"(flat: the max is {max(tail) / min(tail):.2f}x the min); without: turn {args.turns} sends "
          f"{plain[-1] / plain[0]:.0f}x turn 1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
