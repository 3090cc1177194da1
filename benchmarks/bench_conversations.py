"""Conversation costs: µs per turn (memory, folder; fsync apart), opening a
10,000-turn conversation, that picking a turn's context costs in
proportion to its branch, not to the whole conversation, and one long
conversation under ``all_turns()`` (file size, writer memory, time per
turn at its start and end, time to reopen it).

    python benchmarks/bench_conversations.py [--rounds 7] [--turns 200] [--long 2000]
    python benchmarks/bench_conversations.py --only-long [--long 2000]
    python benchmarks/bench_conversations.py --only-open [--rounds 7]

With ``--store folder|sqlite|postgresql`` it measures that store instead:
µs per turn, opening a conversation of 1,000 and of 10,000 turns, sending
one turn on a 100-turn branch of a 10,000-turn conversation, and what
``log_calls`` costs per call (none, folder, SQLite, and PostgreSQL when
that is the store). ``--url`` names the PostgreSQL database; without it a
throw-away server is started (tests/postgres_server.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from unittest import mock

import functai
from functai import FolderStore, MemoryStore, ai
try:
    from functai._layers import reset
except ImportError:  # a checkout from before the internal modules were renamed (compare.py's other side)
    from functai.layers import reset  # type: ignore[no-redef]
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


class Answering:
    """A model client that keeps nothing (ScriptedLM keeps every request, which a
    real client does not): the writer's memory is then functai's own."""

    name = "answering"

    def complete(self, request: object) -> object:
        return functai.Reply(text="ok")


def long_writer(folder: str, turns: int, traced: bool) -> dict[str, float]:
    """Send ``turns`` turns under all_turns() to a folder store; run in a child process."""
    import tracemalloc

    reset()
    functai.configure(client=Answering())
    if traced:
        tracemalloc.start()
    chat = tutor.conversation("long", store=folder, context=functai.all_turns())
    times, cpu = [], []
    for i in range(turns):
        start, start_cpu = time.perf_counter(), time.process_time()
        chat(f"question {i}")
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    result = {"first": statistics.mean(times[:250]) * 1e3, "last": statistics.mean(times[-250:]) * 1e3,
              "first_cpu": statistics.mean(cpu[:250]) * 1e3, "last_cpu": statistics.mean(cpu[-250:]) * 1e3,
              "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if traced:
        result["traced"] = tracemalloc.get_traced_memory()[1] / 2**20
    return result


def reopen(folder: str, rounds: int) -> tuple[float, float]:
    """Median ms (wall, CPU) to open the long conversation in a fresh store object (as a new process would)."""
    times, cpu = [], []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        chat = tutor.conversation("long", store=FolderStore(folder), context=functai.all_turns())
        chat.head
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times) * 1e3, statistics.median(cpu) * 1e3


def long_case(work: str, turns: int, rounds: int) -> None:
    runs = {}
    for traced in (False, True):
        folder = os.path.join(work, f"long-{int(traced)}")
        out = subprocess.run(
            [sys.executable, __file__, "--child", folder, "--long", str(turns)] + (["--traced"] if traced else []),
            check=True, capture_output=True, text=True,
        ).stdout
        runs[traced] = json.loads(out.splitlines()[-1])
    folder = os.path.join(work, "long-0")
    size = os.path.getsize(os.path.join(folder, "long.jsonl"))
    plain, traced = runs[False], runs[True]
    print(f"\n{turns} turns under all_turns() in a folder store (fsync on):")
    print(f"file: {size / 1e6:.2f} MB; writer peak RSS: {plain['maxrss']:.0f} MB "
          f"(Python allocations, tracemalloc peak: {traced['traced']:.1f} MB)")
    print(f"ms per turn: first 250 {plain['first']:.2f}, last 250 {plain['last']:.2f} "
          f"(ratio {plain['last'] / plain['first']:.2f}); CPU ms per turn: first 250 {plain['first_cpu']:.2f}, "
          f"last 250 {plain['last_cpu']:.2f} (ratio {plain['last_cpu'] / plain['first_cpu']:.2f})")
    wall, cpu = reopen(folder, rounds)
    print(f"reopen (fresh store object, median of {rounds}): {wall:.1f} ms ({cpu:.1f} ms CPU); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def open_case(work: str, rounds: int) -> None:
    """Open a 10,000-turn folder-store conversation (last_turns(4)), then send one more turn."""
    memory = MemoryStore()
    build(memory, "big", 10_000)
    folder = os.path.join(work, "big")
    copy_to_folder(memory, "big", folder)
    size = os.path.getsize(os.path.join(folder, "big.jsonl"))
    opens, opens_cpu, sends = [], [], []
    chat = None
    for _ in range(rounds):
        del chat  # the last round's view is freed before the clock starts
        start, start_cpu = time.perf_counter(), time.process_time()
        chat = tutor.conversation("big", store=FolderStore(folder), context=functai.last_turns(4))
        opens.append(time.perf_counter() - start)
        opens_cpu.append(time.process_time() - start_cpu)
        start = time.perf_counter()
        chat("one more")
        sends.append(time.perf_counter() - start)
    print(f"\nopen a 10,000-turn conversation ({size / 1e6:.1f} MB): median {statistics.median(opens) * 1e3:.0f} ms "
          f"({statistics.median(opens_cpu) * 1e3:.0f} ms CPU); "
          f"then send one more turn: median {statistics.median(sends) * 1e3:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--long", type=int, default=2000, help="turns of the all_turns() case")
    parser.add_argument("--only-long", action="store_true", help="run only the all_turns() case")
    parser.add_argument("--only-open", action="store_true", help="run only the 10,000-turn open")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--store", choices=["folder", "sqlite", "postgresql"])
    parser.add_argument("--url", help="the PostgreSQL database for --store postgresql")
    args = parser.parse_args(argv)
    if args.store:
        from bench_stores import main as stores

        return stores(args)
    if args.child:
        print(json.dumps(long_writer(args.child, args.long, args.traced)))
        return 0
    if args.only_long or args.only_open:
        work = tempfile.mkdtemp()
        try:
            if args.only_open:
                reset()
                functai.configure(client=Answering())  # keeps nothing: the heap is the conversation's
                open_case(work, args.rounds)
            else:
                long_case(work, args.long, args.rounds)
        finally:
            shutil.rmtree(work)
        return 0
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

        open_case(work, args.rounds)

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
        long_case(work, args.long, args.rounds)
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
