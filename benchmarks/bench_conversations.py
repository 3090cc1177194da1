"""Conversation costs: µs per turn (memory, folder; fsync apart), opening a
10,000-turn conversation, and that picking a turn's context costs in
proportion to its branch, not to the whole conversation.

    python benchmarks/bench_conversations.py [--rounds 7] [--turns 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from unittest import mock

import functai
from functai import ai
from functai.conversations.store import FolderStore, MemoryStore
from functai.layers import reset
from functai.testing import ScriptedLM


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


def per_turn(store: object, turns: int, conversation: str) -> float:
    chat = tutor.conversation(conversation, store=store, context=functai.last_turns(4))
    start = time.perf_counter()
    for i in range(turns):
        chat(f"question {i}")
    return (time.perf_counter() - start) / turns * 1e6


def build(store: object, conversation: str, turns: int) -> None:
    chat = tutor.conversation(conversation, store=store, context=functai.last_turns(1))
    for i in range(turns):
        chat(f"q{i}")


def copy_to_folder(memory: MemoryStore, conversation: str, folder: str) -> None:
    FolderStore(folder).append(conversation, memory.read(conversation))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args(argv)
    reset()
    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
    work = tempfile.mkdtemp()
    try:
        results: dict[str, list[float]] = {"memory": [], "folder (fsync)": [], "folder (fsync skipped)": []}
        for r in range(args.rounds):
            results["memory"].append(per_turn(MemoryStore(), args.turns, f"m{r}"))
            results["folder (fsync)"].append(per_turn(os.path.join(work, f"f{r}"), args.turns, "c"))
            with mock.patch("os.fsync"):
                results["folder (fsync skipped)"].append(per_turn(os.path.join(work, f"n{r}"), args.turns, "c"))
        print(f"µs per turn ({args.turns} turns with last_turns(4), median of {args.rounds} rounds):")
        print("| store | µs per turn (median) | min | max |")
        print("|---|---|---|---|")
        for name, values in results.items():
            print(f"| {name} | {statistics.median(values):.0f} | {min(values):.0f} | {max(values):.0f} |")
        fsync = statistics.median(results["folder (fsync)"]) - statistics.median(results["folder (fsync skipped)"])
        print(f"fsync share: {fsync:.0f} µs per turn (one fsync per turn, at its end)")

        memory = MemoryStore()
        build(memory, "big", 10_000)
        folder = os.path.join(work, "big")
        copy_to_folder(memory, "big", folder)
        size = os.path.getsize(os.path.join(folder, "big.jsonl"))
        opens, sends = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            chat = tutor.conversation("big", store=FolderStore(folder), context=functai.last_turns(4))
            opens.append(time.perf_counter() - start)
            start = time.perf_counter()
            chat("one more")
            sends.append(time.perf_counter() - start)
        print(f"\nopen a 10,000-turn conversation ({size / 1e6:.1f} MB): median {statistics.median(opens) * 1e3:.0f} ms; "
              f"then send one more turn: median {statistics.median(sends) * 1e3:.1f} ms")

        print("\npicking a turn's context (all_turns) — µs, by branch length and conversation size:")
        print("| branch length | conversation of 1,000 turns | conversation of 10,000 turns |")
        print("|---|---|---|")
        for branch in (10, 100, 900):
            row = []
            for size_turns in (1_000, 10_000):
                memory = MemoryStore()
                build(memory, "x", max(size_turns - branch, 1))
                chat = tutor.conversation("x", store=memory)
                root = chat.all_turns()[0]
                fork = chat.continue_from(root)
                for i in range(branch - 1):
                    fork(f"b{i}")
                parent = fork.head.id
                timings = []
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    fork._prepare({"question": "x"}, parent)
                    timings.append(time.perf_counter() - start)
                row.append(statistics.median(timings) * 1e6)
            print(f"| {branch} | {row[0]:.0f} | {row[1]:.0f} |")
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
