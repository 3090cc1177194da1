"""The measures of ``benchmarks/compare.py``, each run in a fresh process.

``python benchmarks/compare_probes.py NAME [options]`` with ``PYTHONPATH``
naming the checkout to measure prints one JSON object: ``values`` (each
figure as ``[wall, cpu]``, ``cpu`` null where only wall time exists),
``functai`` (the folder functai was imported from, so the driver can check it
measured the checkout it meant) and ``info``. Only functai's public API is
used here, so the same code measures any checkout; the figures are built
from the other benchmark scripts' cases where those exist.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

def derive(t: dict[str, tuple[float, float]], handlers: int) -> dict[str, tuple[float, float]]:
    """The per-call figures of one round from its case times (µs per call, as (wall, cpu)).

    With ``k`` one-handler plugins, a call costs ``P + E + k * h`` (handlers
    returning None) where ``P`` is what a plugin costs whose handlers never
    run (the ``idle`` case: a ``tool_result`` handler, and no tool is called),
    ``E`` what the first ``before_call`` handler adds (the event, the fold's
    set-up) and ``h`` each handler. So ``h`` is the slope from 1 to n
    handlers, ``E`` the rest of the first handler, and a handler returning a
    Change costs ``h`` plus its share of the difference with the quiet ones.
    """
    def figures(i: int) -> dict[str, float]:
        base, idle, one, quiet, change, log = (t[k][i] for k in ("0", "idle", "1 none", "n none", "n change", "log"))
        per = (quiet - one) / (handlers - 1)
        return {"ref": t["ref"][i], "call": base, "plugin": idle - base, "none": per, "event": one - idle - per,
                "change": per + (change - quiet) / handlers, "log": log - base}

    wall, cpu = figures(0), figures(1)
    return {key: (wall[key], cpu[key]) for key in wall}


def reference(calls: int) -> tuple[float, float]:
    """A fixed pure-Python workload (no functai), timed as a case is: µs per iteration.

    The machine runs at different speeds from one process to the next; this
    control, run in the same rounds, shows how fast each side's processes were.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
        item = {"a": i, "b": [i, i + 1], "c": "text"}
        str(item)
        tuple(item.items())
        sorted(item, key=len)
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def calls(args: argparse.Namespace) -> dict[str, Any]:
    """Per-call costs: handlers that change or not, the fixed cost of the first handler, the call log."""
    import functai
    from functai import Change, Plugin

    from bench_hearing import capital, case

    n = args.handlers

    def change(i: int) -> Plugin:
        return Plugin(f"section-{i}", before_call=lambda call: Change(sections=[f"Rule {i}."]))

    def quiet(i: int) -> Plugin:
        return Plugin(f"quiet-{i}", before_call=lambda call: None)

    def reply(request: object) -> str:
        return "Lima"

    check_cases(n, change)
    log = tempfile.mkdtemp(prefix="functai-compare-log-")
    cases: dict[str, Callable[[int], tuple[float, float]]] = {
        "0": case(capital, reply, []),
        "idle": case(capital, reply, [Plugin("idle", tool_result=lambda result: None)]),
        "1 none": case(capital, reply, [quiet(0)]),
        "n none": case(capital, reply, [quiet(i) for i in range(n)]),
        "n change": case(capital, reply, [change(i) for i in range(n)]),
        "log": case(capital, reply, [], log_calls=log),
        "ref": reference,
    }
    warm = max(args.calls // 10, 20)
    for run in cases.values():
        run(warm)
    # Many short rounds, each case once per round in a rotating order: the machine's speed drifts
    # (it runs at two speeds), and pairing the cases within a few milliseconds keeps their
    # differences meaningful.
    names, rounds = list(cases), []
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        rounds.append(derive({name: cases[name](args.calls) for name in order}, n))
    logged = sum(1 for _ in functai.read_calls(log))
    expected = warm + args.rounds * args.calls
    if logged != expected:
        raise SystemExit(f"the call log holds {logged} records, not {expected}")
    values = {key: (statistics.median(r[key][0] for r in rounds), statistics.median(r[key][1] for r in rounds))
              for key in rounds[0]}
    return {"values": values, "info": {"handlers": n, "calls": args.calls, "rounds": args.rounds}}


def check_cases(n: int, change: Callable[[int], Any]) -> None:
    """That the cases measure what they say: n changes recorded, n quiet handlers run, none recorded."""
    import functai
    from functai import Plugin
    from functai.testing import ScriptedLM

    from bench_hearing import capital

    hits: list[int] = []
    counting = [Plugin(f"count-{i}", before_call=lambda call, i=i: hits.append(i)) for i in range(n)]
    with functai.settings(client=ScriptedLM(reply=lambda request: "Lima"), plugins=[change(i) for i in range(n)]):
        _, record = capital.run("Peru")
    if len(record.changes) != n:
        raise SystemExit(f"{n} section plugins recorded {len(record.changes)} changes")
    with functai.settings(client=ScriptedLM(reply=lambda request: "Lima"), plugins=counting):
        _, record = capital.run("Peru")
    if sorted(hits) != list(range(n)) or record.changes:
        raise SystemExit(f"{n} quiet handlers ran {len(hits)} times and recorded {len(record.changes)} changes")


def first(args: argparse.Namespace) -> dict[str, Any]:
    """The first call of a fresh process (it discovers the installed plugins), as bench_installed times it."""
    wall, cpu = time.perf_counter(), time.process_time()
    import functai
    from functai.testing import ScriptedLM

    imported = (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3

    @functai.ai
    def answer(question: str) -> str:
        """Answer."""

    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
    wall, cpu = time.perf_counter(), time.process_time()
    _, record = answer.run("q")
    took = (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3
    if len(record.changes) != args.expect:
        raise SystemExit(f"the first call made {len(record.changes)} changes, not {args.expect} (one per plugin)")
    return {"values": {"first": took}, "info": {"plugins": len(record.changes), "import ms": imported}}


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Write a conversation of ``--turns`` turns to a folder store (setup, not a measure)."""
    import functai
    from functai.testing import ScriptedLM

    from bench_conversations import copy_to_folder, tutor

    lm = ScriptedLM(reply=lambda request: "ok")
    functai.configure(client=lm)
    memory = functai.MemoryStore()
    rule = functai.all_turns() if args.context == "all" else functai.last_turns(1)
    chat = tutor.conversation(args.conversation, store=memory, context=rule)
    for i in range(args.turns):
        chat(f"question {i}")
        if i % 100 == 99:
            lm.requests.clear()  # a real client keeps no requests
    copy_to_folder(memory, args.conversation, args.folder)
    return {"values": {}, "info": {"bytes": sum(e.stat().st_size for e in os.scandir(args.folder) if e.is_file())}}


def open_(args: argparse.Namespace) -> dict[str, Any]:
    """Open a conversation in a folder store up to its newest turn, in a fresh store object each
    time (as a new process would), as bench_conversations opens its 10,000 turns; then check that
    the view holds every turn."""
    import functai

    from bench_conversations import tutor

    rule = functai.all_turns() if args.context == "all" else functai.last_turns(4)
    walls, cpus = [], []
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        chat = tutor.conversation(args.conversation, store=functai.FolderStore(args.folder), context=rule)
        head = chat.head
        walls.append((time.perf_counter() - wall) * 1e3)
        cpus.append((time.process_time() - cpu) * 1e3)
    last = f"question {args.turns - 1}"
    if head is None or head.inputs.get("question") != last or len(chat.turns) != args.turns:
        raise SystemExit(f"the opened conversation does not end at {last!r} after {args.turns} turns")
    return {"values": {"open": (statistics.median(walls), statistics.median(cpus))}, "info": {"repeat": args.repeat}}


def import_(args: argparse.Namespace) -> dict[str, Any]:
    """``import functai`` in a fresh interpreter, and its largest own module under ``-X importtime``."""
    code = ("import json, time\nw, c = time.perf_counter(), time.process_time()\nimport functai\n"
            "print(json.dumps([(time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3, functai.__file__]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    wall, cpu, where = json.loads(done.stdout)
    trace = subprocess.run([sys.executable, "-X", "importtime", "-c", "import functai"], capture_output=True,
                           text=True, check=True, cwd=tempfile.gettempdir()).stderr
    own = {}
    for line in trace.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2].split(".")[0] == "functai" and parts[0].split()[-1].isdigit():
            own[parts[2]] = int(parts[0].split()[-1]) / 1e3
    largest = max(own, key=own.__getitem__)
    return {"values": {"import": (wall, cpu), "module": (own[largest], None)}, "functai": os.path.dirname(where),
            "info": {"module": largest, "own modules": round(sum(own.values()), 1)}}


def acall(args: argparse.Namespace) -> dict[str, Any]:
    """``--concurrent`` acalls at once against a loopback server (its own process) answering after 50 ms."""
    import asyncio
    import threading

    import functai

    from bench_async import answer, serve

    async def main(url: str) -> tuple[float, float, int]:
        most, done = threading.active_count(), False

        async def watch() -> None:
            nonlocal most
            while not done:
                most = max(most, threading.active_count())
                await asyncio.sleep(0.005)

        with functai.settings(lm="vllm/loopback", base_url=url, http_retries=0):
            await answer.acall("warm up")  # the pool's first connection
            watcher = asyncio.create_task(watch())
            wall, cpu = time.perf_counter(), time.process_time()
            values = await asyncio.gather(*(answer.acall(f"q{i}") for i in range(args.concurrent)))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            done = True
            await watcher
        if values != ["ok"] * args.concurrent:
            raise SystemExit("the loopback server's answers did not all come back")
        return wall, cpu, most

    proc, url = serve()
    try:
        wall, cpu, most = asyncio.run(main(url))
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    return {"values": {"acall": (wall, cpu)}, "info": {"threads": most}}


PROBES: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "calls": calls, "first": first, "build": build, "open": open_, "import": import_, "acall": acall,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("probe", choices=sorted(PROBES))
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--handlers", type=int, default=10)
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--folder")
    parser.add_argument("--conversation", default="big")
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--context", choices=["all", "last"], default="last")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrent", type=int, default=200)
    args = parser.parse_args(argv)
    found = PROBES[args.probe](args)
    if "functai" not in found:
        import functai

        found["functai"] = os.path.dirname(functai.__file__)
    found["functai"] = os.path.realpath(found["functai"])
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
