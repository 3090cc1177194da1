"""What a what-if replay costs: the call that was turn 200 of a conversation, rebuilt.

A conversation of 200 turns (every earlier turn shown, a ``before_call`` plugin adding a
section) is made on ScriptedLM in a folder store and in a SQLite store, each with its call
log beside it. Then, in interleaved rounds (each round runs every case once, in turn), the
last turn's call is replayed: ``functai.replay(call_id, without=["tone"])`` reading the call
log (the record and the 199 turns it was shown come from the log), the same with the record in
hand and no log (the turns read from the store), and ``functai replay ID --without tone`` run
in-process. The figure per case is the median round, process CPU time next to wall time.
Target: 50 ms.

    FUNCTAI_LOAD_PLUGINS= python benchmarks/bench_replay.py [--rounds 21] [--turns 200]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import time
from typing import Callable

import functai
from functai import Change, Plugin, ai
from functai._calls.reading import read_calls
from functai._calls.records import close_log
from functai._cli import main
from functai.testing import ScriptedLM


@ai
def tutor(question: str) -> str:
    """Tutor the student, step by step, building on what was said before."""


TONE = Plugin("tone", version="1.0.0", before_call=lambda call: Change(sections=["Answer in two sentences."]))


def make(store: str, log: str, turns: int) -> str:
    """A conversation of ``turns`` turns in ``store``, logged in ``log``: the last turn's call id."""
    lm = ScriptedLM(reply=lambda request: f"Answer number {len(lm.requests)}: keep going with the next step.")
    with functai.settings(client=lm, log_calls=log, plugins=[TONE]):
        chat = tutor.conversation("long", store=store)
        for i in range(turns):
            chat(f"Question {i}: what comes after step {i}?")
    close_log(log)
    return list(read_calls(log))[-1].id


def cases(folder: str, turns: int) -> dict[str, Callable[[], object]]:
    found: dict[str, Callable[[], object]] = {}
    settings = functai.settings(client=ScriptedLM(["unused"]))  # no model is asked: the replay only rebuilds
    for kind, store, log in (
        ("folder store, folder log", os.path.join(folder, "store"), os.path.join(folder, "calls")),
        ("SQLite store, SQLite log", f"sqlite:///{folder}/chats.db", f"sqlite:///{folder}/calls.db"),
    ):
        call = make(store, log, turns)
        record = next(r for r in read_calls(log) if r.id == call)

        def by_id(call: str = call, log: str = log) -> object:
            with settings:
                return functai.replay(call, without=["tone"], fn=tutor, log=log)

        def from_store(record: object = record) -> object:
            with settings:
                return functai.replay(record, without=["tone"], fn=tutor)  # type: ignore[arg-type]

        def command(call: str = call, log: str = log) -> object:
            out, err = io.StringIO(), io.StringIO()
            with settings:
                status = main(["replay", call, "--log", log, "--without", "tone", "--function",
                               f"{__file__}:tutor"], out, err)
            assert status == 0, err.getvalue()
            return out

        result = by_id()
        assert result.differs[0] == "instruction and sections", result.report()  # type: ignore[attr-defined]
        assert len(result.recorded.messages) == 2 * turns, len(result.recorded.messages)  # type: ignore[attr-defined]
        found[f"{kind}: functai.replay(call id), turns from the log"] = by_id
        found[f"{kind}: functai.replay(record), turns from the store"] = from_store
        found[f"{kind}: functai replay ID (in-process)"] = command
    return found


def main_(rounds: int, turns: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        todo = cases(folder, turns)
        cpu: dict[str, list[float]] = {name: [] for name in todo}
        wall: dict[str, list[float]] = {name: [] for name in todo}
        for _ in range(rounds):
            for name, run in todo.items():
                c0, w0 = time.process_time(), time.perf_counter()
                run()
                cpu[name].append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - w0)
    print(f"replay of the call that was turn {turns} of a conversation (median of {rounds} interleaved rounds)")
    width = max(map(len, todo))
    for name in todo:
        print(f"  {name:<{width}}  cpu {statistics.median(cpu[name]) * 1e3:6.1f} ms"
              f"  wall {statistics.median(wall[name]) * 1e3:6.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    main_(args.rounds, args.turns)
