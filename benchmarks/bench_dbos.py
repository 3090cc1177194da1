"""What functai-dbos adds to a turn: a turn through ``functai_dbos.send`` next to the same turn in
process, and next to DBOS's own cost for one workflow of two steps, in one run.

Each round runs, interleaved, ``--turns`` turns (each on a conversation of its own, folder store,
ScriptedLM) in three ways, in this process over one SQLite system database:

1. in process: ``chat(...)``;
2. through functai-dbos: every turn sent to the queue at once, then every result awaited;
3. bare DBOS: as many workflows of two empty steps, enqueued on a queue polled as often, then awaited.

Per turn: process CPU time (every thread's, DBOS's pollers included) and wall time; medians of the
rounds. The target: functai-dbos's extra over a turn in process is at most one bare workflow.

    python benchmarks/bench_dbos.py [--rounds 5] [--turns 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import functai
import functai_dbos
from dbos import DBOS
from functai.testing import ScriptedLM

@DBOS.step()
def _empty_step(n: int) -> int:
    return n


@DBOS.workflow(name="bench.two_steps")
def two_steps(n: int) -> dict[str, Any]:
    return {"state": "done", "n": _empty_step(_empty_step(n))}  # a turn's outcome, awaited the same way


@functai.ai
def assistant(question: str) -> str:
    """Answer."""
    raise NotImplementedError


def timed(run: Callable[[], None], turns: int) -> tuple[float, float]:
    """Wall and process CPU time per turn, in ms."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return (time.perf_counter() - wall) * 1e3 / turns, (time.process_time() - cpu) * 1e3 / turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    try:
        functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
        functai_dbos.launch("sqlite:///" + os.path.join(work, "dbos.db"))
        queue = DBOS.register_queue("bench.bare", polling_interval_sec=0.2)  # as functai_dbos.launch polls its own
        store = os.path.join(work, "store")
        samples: dict[str, list[tuple[float, float]]] = {"in process": [], "functai-dbos": [], "bare DBOS": []}

        def in_process(round_: int) -> None:
            for n in range(args.turns):
                assert assistant.conversation(f"p{round_}-{n}", store=store)("hi") == "ok"

        def through_dbos(round_: int) -> None:
            handles = [functai_dbos.send(assistant.conversation(f"d{round_}-{n}", store=store), {"question": "hi"},
                                         key=f"d{round_}-{n}") for n in range(args.turns)]
            assert all(handle.result(timeout=600) == "ok" for handle in handles)

        def bare(round_: int) -> None:
            handles = [queue.enqueue(two_steps, n) for n in range(args.turns)]
            assert [functai_dbos._ended(handle, 600)["n"] for handle in handles] == list(range(args.turns))

        ways: dict[str, Callable[[int], None]] = {"in process": in_process, "functai-dbos": through_dbos,
                                                   "bare DBOS": bare}
        for way in ways.values():  # warm up: imports, the first queue poll
            way(-1)
        for round_ in range(args.rounds):
            for name, way in ways.items():
                samples[name].append(timed(lambda way=way, round_=round_: way(round_), args.turns))  # type: ignore[misc]
        medians: dict[str, Any] = {}
        print(f"{args.turns} turns per round, median of {args.rounds} rounds, per turn:")
        for name, found in samples.items():
            wall, cpu = statistics.median(s[0] for s in found), statistics.median(s[1] for s in found)
            medians[name] = (wall, cpu)
            print(f"  {name:<13} wall {wall:7.2f} ms   CPU {cpu:7.2f} ms")
        extra = [medians["functai-dbos"][i] - medians["in process"][i] for i in (0, 1)]
        bare_cost = medians["bare DBOS"]
        print(f"functai-dbos adds wall {extra[0]:.2f} ms, CPU {extra[1]:.2f} ms per turn; one bare workflow of two "
              f"steps costs wall {bare_cost[0]:.2f} ms, CPU {bare_cost[1]:.2f} ms: "
              f"{extra[1] / bare_cost[1]:.2f}× in CPU")
    finally:
        DBOS.destroy()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
