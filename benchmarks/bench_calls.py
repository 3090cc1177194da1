"""Microseconds per AI function call on ScriptedLM, by plugin load.

Interleaved rounds (each round runs every case once, in turn) so a noisy
neighbour hurts every case alike; the figure per case is the median round.

    python benchmarks/bench_calls.py [--rounds 21] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Callable

import functai
from functai import Change, Plugin, ai
from functai.layers import reset
from functai.testing import ScriptedLM, tool_call


@functai.tool(effects="reads")
def lookup(key: str) -> str:
    """Look a key up."""
    return "value"


@ai(tools=[lookup])
def researched(question: str) -> str:
    """Answer, looking things up."""


def tool_round_trip(request):
    """First ask for the tool, then answer once its result is in."""
    if request.messages[-1]["role"] == "tool":
        return "done"
    return tool_call("lookup", {"key": "k"})


def tool_case(plugins: int) -> Callable[[int], float]:
    lm = ScriptedLM(reply=tool_round_trip)
    settings = functai.settings(
        client=lm, plugins=[Plugin(f"guard-{i}", tool_call=lambda t: None) for i in range(plugins)]
    )

    def run(calls: int) -> float:
        with settings:
            lm.requests.clear()
            start = time.perf_counter()
            for _ in range(calls):
                researched("q")
            return (time.perf_counter() - start) / calls * 1e6

    return run


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def section_plugin(i: int) -> Plugin:
    return Plugin(f"section-{i}", before_call=lambda call: Change(sections=[f"Rule {i}."]))


def quiet_plugin(i: int) -> Plugin:
    return Plugin(f"quiet-{i}", before_call=lambda call: None)


def case(plugins: int, log_folder: str | None = None, make: Callable[[int], Plugin] = section_plugin) -> Callable[[int], float]:
    lm = ScriptedLM(reply=lambda request: "Lima")
    settings = functai.settings(
        client=lm, plugins=[make(i) for i in range(plugins)], **({"log_calls": log_folder} if log_folder else {})
    )

    def run(calls: int) -> float:
        with settings:
            lm.requests.clear()
            start = time.perf_counter()
            for _ in range(calls):
                capital("Peru")
            return (time.perf_counter() - start) / calls * 1e6

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    reset()
    with tempfile.TemporaryDirectory() as folder:
        cases = {
            "no plugins": case(0),
            "1 plugin (a section)": case(1),
            "10 plugins (a section each)": case(10),
            "10 plugins (returning None)": case(10, make=quiet_plugin),
            "no plugins, log_calls on": case(0, folder),
            "one-tool round trip, 0 tool_call plugins": tool_case(0),
            "one-tool round trip, 10 tool_call plugins": tool_case(10),
        }
        for run in cases.values():
            run(200)  # warm caches
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, run in cases.items():
                times[name].append(run(args.calls))
    base = statistics.median(times["no plugins"])
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds x {args.calls} calls")
    print("| case | µs per call (median) | min | max | vs no plugins |")
    print("|---|---|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.1f} | {min(values):.1f} | {max(values):.1f} | +{median - base:.1f} µs ({median / base:.2f}x) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
