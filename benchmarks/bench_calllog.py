"""What ``log_calls`` adds to a call, and where it goes.

A plain call on ScriptedLM (no installed plugins) with and without
``log_calls=<folder>``, in interleaved rounds (each round runs both, in
turn); the figure per case is the median round, process CPU time next to
wall time. Then the parts of one logged record, each timed alone the same
way: building its dict, encoding it, appending the line, and one
``os.write`` of the same line to an ``O_APPEND`` file (the floor).

    FUNCTAI_LOAD_PLUGINS= python benchmarks/bench_calllog.py [--rounds 21] [--calls 2000]

Runs against any checkout: ``PYTHONPATH=<checkout> python benchmarks/bench_calllog.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

import functai
from functai import ai
from functai._calls import records
from functai._layers import reset
from functai.testing import ScriptedLM


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def call_case(folder: str | None) -> Callable[[int], None]:
    settings = functai.settings(client=ScriptedLM(reply=lambda request: "Lima"),
                                **({"log_calls": folder} if folder else {}))

    def run(calls: int) -> None:
        with settings:
            for _ in range(calls):
                capital("Peru")

    return run


def part_cases(folder: str) -> dict[str, Callable[[int], None]]:
    """The parts of logging one record, each alone."""
    with functai.settings(client=ScriptedLM(reply=lambda request: "Lima")):
        record = capital.run("Peru").record
    data = record.to_dict()
    if os.path.exists(os.path.join(os.path.dirname(functai.__file__), "codec.py")):
        from functai import _codec as codec

        encode: Callable[[dict], bytes] = lambda d: codec.dumps(d, non_finite="text")  # noqa: E731
        name = "functai._codec.dumps"
    else:  # a checkout from before functai._codec: what its call log used
        stdlib = json.JSONEncoder(ensure_ascii=False, default=str)
        encode = lambda d: stdlib.encode(d).encode()  # noqa: E731
        name = "json encode"
    line = encode(data) + b"\n"
    path = os.path.join(folder, "parts", "calls.jsonl")
    records.append_line(path, data)  # opens the file once
    floor_fd = os.open(os.path.join(folder, "floor.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    log_folder = os.path.join(folder, "parts-append")

    def repeat(fn: Callable[[], object]) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                fn()
        return run

    lines = {}
    if os.path.exists(os.path.join(os.path.dirname(functai.__file__), "calls", "logline.py")):
        from functai._calls import logline  # the record's line without its dict (what the log writes now)

        lines["logline.encode(record) (record → line, the NaN check included)"] = repeat(lambda: logline.encode(record))
    return {
        "record.to_dict()": repeat(record.to_dict),
        name: repeat(lambda: encode(data)),
        **lines,
        "records.append(folder, record) (dict, encode, write)": repeat(lambda: records.append(log_folder, record)),
        "os.write of the line (O_APPEND)": repeat(lambda: os.write(floor_fd, line)),
    }


def measure(cases: dict[str, Callable[[int], None]], rounds: int, n: int) -> dict[str, tuple[float, float]]:
    """Median (CPU µs, wall µs) per operation of each case over interleaved rounds."""
    for run in cases.values():
        run(max(1, n // 10))
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    wall: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            c, w = time.process_time(), time.perf_counter()
            run(n)
            cpu[name].append((time.process_time() - c) / n * 1e6)
            wall[name].append((time.perf_counter() - w) / n * 1e6)
    return {name: (statistics.median(cpu[name]), statistics.median(wall[name])) for name in cases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    reset()
    with tempfile.TemporaryDirectory() as folder:
        calls = measure({"no log": call_case(None), "log_calls=<folder>": call_case(folder)}, args.rounds, args.calls)
        parts = measure(part_cases(folder), args.rounds, args.calls * 5)
    print(f"python {sys.version.split()[0]}, functai from {os.path.dirname(os.path.dirname(functai.__file__))}, "
          f"{args.rounds} interleaved rounds x {args.calls} calls; load average {os.getloadavg()[0]:.1f}")
    print("| case | CPU µs per call | wall µs per call |")
    print("|---|---|---|")
    for name, (c, w) in calls.items():
        print(f"| {name} | {c:.2f} | {w:.2f} |")
    (c0, w0), (c1, w1) = calls["no log"], calls["log_calls=<folder>"]
    print(f"| **added by the log** | **{c1 - c0:+.2f}** | {w1 - w0:+.2f} |")
    print()
    print("| part of one logged record, alone | CPU µs | wall µs |")
    print("|---|---|---|")
    for name, (c, w) in parts.items():
        print(f"| {name} | {c:.2f} | {w:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
