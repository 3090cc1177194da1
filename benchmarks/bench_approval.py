"""What an approval adds between a person's yes and the tool's start, against one fsync'ed write.

At resume, before an approved tool that changes things runs, functai computes the approval's
digest again (the tool's name, its input, the plugins before the asker) and records the tool
call as started, durably (SQLite ``synchronous=FULL``), so a crash while it runs is seen. This
times exactly that — `digest` and the turn's ``tool_started`` record on a real conversation in
a ``sqlite:///`` store, each followed (untimed) by the tool's result, a normal write — against
one fsync'ed write (the record's line appended to a file, then ``os.fsync``) and, stricter, the
same record committed by hand with ``synchronous=FULL`` into a WAL SQLite file with the store's
tables, all on the same disk. Each write is timed by itself; wall time (the fsync is the cost:
waiting, not CPU) and process CPU time, medians of interleaved rounds.

    python benchmarks/bench_approval.py [--rounds 15] [--writes 100]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Callable

import functai
import functai.stores
from functai import ai
from functai._calls.approvals import digest
from functai._conversations.scope import TurnScope

INPUT = {"order": "A1-2024-11-0042", "amount": 129.5, "currency": "EUR", "reason": "damaged on arrival"}
PLUGINS = [["limits", "1.2.0"], ["pii", "0.4.1"]]
ENTRY = {"name": "refund", "id": "call_8f2c", "input": INPUT}


@functai.tool(effects="changes")
def refund(order: str, amount: float, currency: str, reason: str) -> str:
    """Refund an order."""
    return "refunded"


@ai(tools=[refund])
def support(request: str) -> str:
    """Support the customer."""


def timed(op: Callable[[], object], after: Callable[[], object] | None = None) -> Callable[[int], tuple[float, float]]:
    """``n`` runs of ``op``, each timed by itself (wall and CPU), ``after`` each untimed."""

    def run(n: int) -> tuple[float, float]:
        wall = cpu = 0.0
        for _ in range(n):
            w, c = time.perf_counter(), time.process_time()
            op()
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
            if after is not None:
                after()
        return wall, cpu

    return run


def approval_to_start(folder: str) -> Callable[[int], tuple[float, float]]:
    """The digest and the durable *started* record; after each, untimed, the tool's result (a normal
    write, as after a real tool), so each start finds its connection at ``NORMAL``, as a real one does."""
    chat = support.conversation("bench", store=f"sqlite:///{folder}/store.db", approve="changes")
    try:
        chat("refund A1")  # the offline test model asks for refund: the turn waits for a person
    except functai.Waiting as waiting:
        scope = TurnScope(chat, chat._history.turns[waiting.turn.id])
    count = [0]

    def start() -> None:
        count[0] += 1
        digest("refund", INPUT, PLUGINS)
        scope.tool_started(f"1.{count[0]}", ENTRY)

    return timed(start, lambda: scope.tool_done(f"1.{count[0]}", {**ENTRY, "output": "refunded"}, []))


def fsynced_append(folder: str) -> Callable[[int], tuple[float, float]]:
    """One fsync'ed write: the record's line appended to a file, then ``os.fsync``."""
    fd = os.open(os.path.join(folder, "floor.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = LINE.encode() + b"\n"

    def write() -> None:
        os.write(fd, line)
        os.fsync(fd)

    return timed(write)


LINE = ('{"functai_conversation":1,"kind":"tool","turn":"t1","site":"1.1","state":"started","entry":'
        '{"name":"refund","id":"call_8f2c","input":{"order":"A1-2024-11-0042","amount":129.5,'
        '"currency":"EUR","reason":"damaged on arrival"}}}')


def one_sqlite_commit(folder: str) -> Callable[[int], tuple[float, float]]:
    """A stricter floor: the same record inserted and committed by hand, ``synchronous=FULL``, into a file
    with the store's own tables and indexes (made by functai): SQLite's part of the store's write."""
    functai.stores.open_store(f"sqlite:///{folder}/floor.db").append("floor", [{"kind": "conversation"}])
    conn = sqlite3.connect(os.path.join(folder, "floor.db"), isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    position = [1]

    def commit() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO functai_records (conversation, position, data, kind, turn, parent) "
                     "VALUES (?, ?, ?, ?, ?, ?)", ("floor", position[0], LINE, "tool", "t1", None))
        conn.execute("COMMIT")
        position[0] += 1

    return timed(commit)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--writes", type=int, default=100)
    args = parser.parse_args(argv)
    functai.configure(lm="test")
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as folder:  # the disk the checkout is on, not tmpfs
        cases = {"one fsync'ed write (append + os.fsync)": fsynced_append(folder),
                 "the record committed by hand (SQLite, synchronous=FULL)": one_sqlite_commit(folder),
                 "digest + tool started, durably (sqlite:/// store)": approval_to_start(folder)}
        for run in cases.values():
            run(5)
        wall: dict[str, list[float]] = {name: [] for name in cases}
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for index in range(args.rounds):
            order = list(cases.items()) if index % 2 == 0 else list(reversed(cases.items()))
            for name, run in order:
                w, c = run(args.writes)
                wall[name].append(w / args.writes * 1e6)
                cpu[name].append(c / args.writes * 1e6)
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds x {args.writes} writes, "
          f"medians; load average {os.getloadavg()[0]:.1f}")
    print("| case | wall µs | CPU µs |")
    print("|---|---|---|")
    medians = {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in cases}
    for name, (w, c) in medians.items():
        print(f"| {name} | {w:.0f} | {c:.0f} |")
    (write, _), (commit, _), (ours, _) = medians.values()
    print(f"approval to start / one fsync'ed write: {ours / write:.2f}x; / the hand-made commit: "
          f"{ours / commit:.2f}x (wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
