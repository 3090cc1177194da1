"""CPU microseconds per call spent checking inputs: the same calls with
``check_inputs`` on and off, on ScriptedLM.

Interleaved rounds (each round runs every case once, in turn) so a noisy
neighbour hurts every case alike; the figure per case is the median round,
measured with ``time.process_time`` (CPU time of this process).

    python benchmarks/bench_inputs.py [--rounds 21] [--calls 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from typing import Any, Callable

import functai
from functai import ai
from functai._layers import reset
from functai.testing import ScriptedLM


@dataclasses.dataclass
class Order:
    id: str
    lines: list[int]


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


@ai
def typed(a: int, items: list[int], note: str = "") -> str:
    """Three typed inputs, one a list."""


@ai
def order(order: Order, extra: Any = None) -> str:
    """A dataclass input and an Any input (both walked for what cannot be shown)."""


CALLS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "capital(str)": (capital, ("Peru",)),
    "typed(int, list[int] of 10, str)": (typed, (1, list(range(10)), "x")),
    "order(dataclass, Any dict)": (order, (Order("A1", [1, 2, 3]), {"k": [1, 2]})),
}


def case(fn: Callable[..., Any], args: tuple[Any, ...], check: bool) -> Callable[[int], float]:
    settings = functai.settings(client=ScriptedLM(reply=lambda request: "ok"), check_inputs=check)

    def run(calls: int) -> float:
        with settings:
            start = time.process_time()
            for _ in range(calls):
                fn(*args)
            return (time.process_time() - start) / calls * 1e6

    return run


def check_alone(fn: Any, args: tuple[Any, ...], calls: int = 20000) -> float:
    """CPU µs of ``fn``'s input check by itself (less noisy than the difference of two whole calls)."""
    inputs = fn.bind(args, {})
    start = time.process_time()
    for _ in range(calls):
        fn.check_inputs(inputs)
    return (time.process_time() - start) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    reset()
    cases = {(name, check): case(fn, a, check) for name, (fn, a) in CALLS.items() for check in (False, True)}
    for run in cases.values():
        run(200)  # warm caches
    times: dict[tuple[str, bool], list[float]] = {key: [] for key in cases}
    for _ in range(args.rounds):
        for key, run in cases.items():
            times[key].append(run(args.calls))
    alone = {name: statistics.median(check_alone(fn, a) for _ in range(args.rounds)) for name, (fn, a) in CALLS.items()}
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds x {args.calls} calls, CPU µs per call")
    print("| call | check_inputs=False | check_inputs=True | difference | the check alone |")
    print("|---|---|---|---|---|")
    for name in CALLS:
        off, on = statistics.median(times[(name, False)]), statistics.median(times[(name, True)])
        print(f"| {name} | {off:.1f} | {on:.1f} | {on - off:+.1f} µs | {alone[name]:.2f} µs |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
