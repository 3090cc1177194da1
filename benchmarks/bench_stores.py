"""The store half of bench_conversations.py (``--store folder|sqlite|postgresql``); see its docstring."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any, Callable

import functai
from functai import ai
from functai._stores import FolderStore, MemoryStore, open_store
from functai._layers import reset
from functai._stores.opening import forget
from functai.testing import ScriptedLM


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall and process CPU seconds of one ``fn()`` (a database server's own CPU is not counted)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def medians(samples: list[tuple[float, float]], scale: float) -> str:
    """``CPU x (wall y)``: the medians of ``samples`` times ``scale``."""
    wall = statistics.median(s[0] for s in samples) * scale
    cpu = statistics.median(s[1] for s in samples) * scale
    return f"CPU {cpu:.1f} (wall {wall:.1f})"


class Places:
    """Fresh store URLs of one kind: folders, SQLite files, or PostgreSQL schemas."""

    def __init__(self, kind: str, work: str, url: str | None) -> None:
        self.kind, self.work, self.n = kind, work, 0
        self.server: Any = None
        self.base = url
        if kind == "postgresql" and url is None:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
            from postgres_server import Server

            self.server = Server()
            self.base = self.server.admin

    def new(self) -> str:
        self.n += 1
        if self.kind == "folder":
            return os.path.join(self.work, f"store{self.n}")
        if self.kind == "sqlite":
            return "sqlite:///" + os.path.join(self.work, f"store{self.n}.db")
        import psycopg

        schema = "b_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        return f"{self.base}{'&' if '?' in self.base else '?'}options=-csearch_path%3D{schema}"

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def built(memory: MemoryStore, turns: int, branch: int = 0) -> tuple[list[dict[str, Any]], str | None]:
    """The records of a conversation of ``turns`` turns; the last ``branch`` of them on a branch from the first."""
    chat = tutor.conversation(f"c{turns}-{branch}", store=memory, context=functai.last_turns(1))
    for i in range(turns - branch):
        chat(f"q{i}")
    tip = None
    if branch:
        fork = chat.continue_from(chat.all_turns()[0])
        for i in range(branch - 1):
            fork(f"b{i}")
        tip = fork.head.id
    return memory.read(chat.id), tip


def opener(kind: str, url: str, tip: str | None = None) -> Callable[[], Any]:
    """Open the conversation as a new process would: no index, no connection cached."""

    def open_it() -> Any:
        if kind == "folder":
            store: Any = FolderStore(url)
        else:
            forget(url)
            store = url
        return tutor.conversation("big", store=store, context=functai.last_turns(4), at=tip)

    return open_it


def main(args: argparse.Namespace) -> int:
    reset()
    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
    work = tempfile.mkdtemp()
    places = Places(args.store, work, args.url)
    try:
        print(f"store: {args.store}; medians of {args.rounds} rounds, process CPU time next to wall time")
        per_turn = []
        for _ in range(args.rounds):
            chat = tutor.conversation("c", store=places.new(), context=functai.last_turns(4))
            chat("warm up")
            per_turn.append(timed(lambda: [chat(f"question {i}") for i in range(args.turns)]))
        print(f"µs per turn ({args.turns} turns, last_turns(4)): {medians(per_turn, 1e6 / args.turns)}")

        memory = MemoryStore()
        for size in (1_000, 10_000):
            records, _ = built(memory, size)
            url = places.new()
            open_store(url).append("big", records)

            open_it = opener(args.store, url)
            samples = [timed(open_it) for _ in range(args.rounds)]
            print(f"ms to open a {size:,}-turn conversation ({len(records):,} records): {medians(samples, 1e3)}")

        records, tip = built(memory, 10_000, branch=100)
        url = places.new()
        open_store(url).append("big", records)
        count = [0]

        def send() -> None:
            count[0] += 1
            view = opener(args.store, url, tip)()
            view(f"one more {count[0]}")

        samples = [timed(send) for _ in range(args.rounds)]
        print(f"ms to open at a turn (at=) and send one turn on a 100-turn branch of a 10,000-turn "
              f"conversation: {medians(samples, 1e3)}")

        @ai
        def capital(country: str) -> str:
            """The capital city."""

        logs = {"none": None, "folder": os.path.join(work, "calls"),
                "sqlite": "sqlite:///" + os.path.join(work, "calls.db")}
        if args.store == "postgresql":
            logs["postgresql"] = places.new()
        calls = max(args.turns, 100)
        print(f"\nlog_calls cost per call ({calls} calls, the kinds interleaved in each round):")
        print("| log_calls | CPU µs per call | wall µs per call | CPU added by the log |")
        print("|---|---|---|---|")

        def run_calls() -> None:
            for _ in range(calls):
                capital("Peru")

        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in logs}
        for _ in range(args.rounds):
            for name, log in logs.items():
                with functai.settings(log_calls=log or False):
                    capital("warm up")
                    samples[name].append(timed(run_calls))
        scale = 1e6 / calls
        base = statistics.median(s[1] for s in samples["none"]) * scale
        for name, values in samples.items():
            cpu = statistics.median(s[1] for s in values) * scale
            wall = statistics.median(s[0] for s in values) * scale
            print(f"| {name} | {cpu:.1f} | {wall:.1f} | {cpu - base:+.1f} |")
    finally:
        places.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0
