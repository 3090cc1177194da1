"""What an approval adds between a person's yes and the tool's start, against one fsync'ed write.

At resume, before an approved tool that changes things runs, functai computes the approval's
digest again (the tool's name, its input, the plugins before the asker) and records the tool
call as started, durably (SQLite ``synchronous=FULL``), so a crash while it runs is seen. This
times exactly that — `digest` and the turn's ``tool_started`` record on a real conversation in
a ``sqlite:///`` store, each followed (untimed) by the tool's result, a normal write — against
one fsync'ed write (the record's line appended to a file, then ``os.fsync``) and, stricter, the
same record committed by hand with ``synchronous=FULL`` into a WAL SQLite file with the store's
tables, all on the same disk; and the least any SQLite store could do for it: that commit after a
normal write (as a start follows the resume's), with the digest and the record's JSON, and nothing
else. Each write is timed by itself; wall time (the fsync is the cost: waiting, not CPU) and
process CPU time, medians of interleaved rounds.

    python benchmarks/bench_approval.py [--rounds 15] [--writes 100] [--breakdown]
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
from functai._calls.outputs import to_jsonable
from functai._conversations.scope import TurnScope
from functai._stores.protocol import to_line

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
        turn = waiting.turn.approve()
    resume = {"kind": "resume", "turn": turn.id, "was": "waiting", "rerun": [], "at": "2026-01-01T00:00:00Z"}
    claim, _ = chat._claim(turn.id, "resume", lambda expect: ([{"functai_conversation": 1, **resume}], None))
    scope = TurnScope(chat, chat._history.turns[turn.id], claim)  # as a resumed turn holds it
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


def one_sqlite_commit(folder: str, conversation: str = "floor", count: bool = False, switch: bool = False,
                      with_digest: bool = False, record: bool = False) -> Callable[[int], tuple[float, float]]:
    """A stricter floor: the same record inserted and committed by hand, ``synchronous=FULL``, into a file
    with the store's own tables and indexes (made by functai): SQLite's part of the store's write.
    The options add, one by one, what the store's write adds (``--breakdown``): the compare-and-set
    count, the switch to ``FULL`` (back to ``NORMAL`` by a normal write after it, untimed), the
    digest, and the record's JSON (`to_jsonable`, then the store's line)."""
    path = os.path.join(folder, f"{conversation}.db")  # a file each: a WAL shared by several would fill faster
    functai.stores.open_store(f"sqlite:///{path}").append(conversation, [{"kind": "conversation"}])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    insert = "INSERT INTO functai_records (conversation, position, data, kind, turn, parent) VALUES (?, ?, ?, ?, ?, ?)"
    position = [1]

    def commit() -> None:
        if with_digest:
            digest("refund", INPUT, PLUGINS)
        line = LINE
        if record:
            line = to_line({"functai_conversation": 1, "kind": "tool", "turn": "t1", "site": "1.1",
                            "state": "started", "entry": to_jsonable(dict(ENTRY))})
        if switch:
            conn.execute("PRAGMA synchronous = FULL")
        conn.execute("BEGIN IMMEDIATE")
        if count:
            (last,) = conn.execute("SELECT MAX(position) FROM functai_records WHERE conversation = ?",
                                   (conversation,)).fetchone()
            position[0] = last + 1
        conn.execute(insert, (conversation, position[0], line, "tool", "t1", None))
        conn.execute("COMMIT")
        position[0] += 1

    def normal_write() -> None:
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(insert, (conversation, position[0], LINE, "tool", "t1", None))
        conn.execute("COMMIT")
        position[0] += 1

    return timed(commit, normal_write if switch else None)


WRITE = "one fsync'ed write (append + os.fsync)"
COMMIT = "the record committed by hand (SQLite, synchronous=FULL)"
LEAST = "the least a SQLite store can do: the digest, the record's JSON, that commit"
OURS = "digest + tool started, durably (sqlite:/// store)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--writes", type=int, default=100)
    parser.add_argument("--breakdown", action="store_true",
                        help="also the hand-made commit with the store's pieces added one by one")
    args = parser.parse_args(argv)
    functai.configure(lm="test")
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as folder:  # the disk the checkout is on, not tmpfs
        cases = {WRITE: fsynced_append(folder), COMMIT: one_sqlite_commit(folder),
                 LEAST: one_sqlite_commit(folder, "least", switch=True, with_digest=True, record=True)}
        if args.breakdown:
            cases.update({
                "  + the count": one_sqlite_commit(folder, "a", count=True),
                "  + the count, the switch to FULL": one_sqlite_commit(folder, "b", count=True, switch=True),
                "  + the count, the switch, the digest": one_sqlite_commit(
                    folder, "c", count=True, switch=True, with_digest=True),
                "  + the count, the switch, the digest, the record's JSON": one_sqlite_commit(
                    folder, "d", count=True, switch=True, with_digest=True, record=True),
            })
        cases[OURS] = approval_to_start(folder)
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
    write = medians[WRITE][0]
    print(f"approval to start / one fsync'ed write: {medians[OURS][0] / write:.2f}x; / the hand-made commit: "
          f"{medians[OURS][0] / medians[COMMIT][0]:.2f}x; the least a store can do / one fsync'ed write: "
          f"{medians[LEAST][0] / write:.2f}x (wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
