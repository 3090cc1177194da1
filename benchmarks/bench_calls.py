"""Microseconds per AI function call on ScriptedLM, by plugin load.

Interleaved rounds (each round runs every case once, in turn) so a noisy
neighbour hurts every case alike; the figure per case is the median round,
in process CPU time (what a shared machine's load moves least) next to wall
time. Installed plugins (entry points) are left out: only the plugins each
case sets run. Then what the plugin engine costs, derived from the CPU medians:

- per handler returning a fresh ``Change(sections=[…])``: (40 such plugins − 10) / 30;
- per handler returning None: (40 such plugins − 10) / 30;
- the ``CallEvent`` and fold set-up once any handler exists:
  (1 plugin returning None − no plugins) − one handler returning None;
- ``CallEvent`` built as the engine builds it, timed alone (the figure
  above holds a whole call's noise).

    python benchmarks/bench_calls.py [--rounds 21] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from types import MappingProxyType
from typing import Callable

import functai
from functai import Change, Plugin, ai
from functai._hooks import installed
from functai._layers import reset
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


def per_call(start: float, cpu: float, calls: int) -> tuple[float, float]:
    """(wall µs, process CPU µs) per call since ``start`` and ``cpu``."""
    return (time.perf_counter() - start) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def tool_case(plugins: int) -> Callable[[int], float]:
    lm = ScriptedLM(reply=tool_round_trip)
    settings = functai.settings(
        client=lm, plugins=[Plugin(f"guard-{i}", tool_call=lambda t: None) for i in range(plugins)]
    )

    def run(calls: int) -> tuple[float, float]:
        with settings:
            lm.requests.clear()
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(calls):
                researched("q")
            return per_call(start, cpu, calls)

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

    def run(calls: int) -> tuple[float, float]:
        with settings:
            lm.requests.clear()
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(calls):
                capital("Peru")
            return per_call(start, cpu, calls)

    return run


def event_case() -> Callable[[int], tuple[float, float]]:
    """Build the before_call event as the engine does for a call outside a conversation."""
    inputs = {"country": "Peru"}
    settings = MappingProxyType({})
    from functai._hooks.events import CallEvent

    def build() -> None:
        CallEvent(function="capital", program=capital, inputs=inputs, instruction="I.", sections=(), lm=None,
                  settings=settings, tools=(), all_tools=(), path="capital")

    def run(calls: int) -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            build()
        return per_call(start, cpu, calls)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    reset()
    installed.use(installed.Installed.of([]))  # the engine alone: no plugin this machine has installed
    with tempfile.TemporaryDirectory() as folder:
        cases = {
            "no plugins": case(0),
            "1 plugin (a section)": case(1),
            "10 plugins (a section each)": case(10),
            "1 plugin (returning None)": case(1, make=quiet_plugin),
            "10 plugins (returning None)": case(10, make=quiet_plugin),
            "40 plugins (a section each)": case(40),
            "40 plugins (returning None)": case(40, make=quiet_plugin),
            "CallEvent alone (no call)": event_case(),
            "no plugins, log_calls on": case(0, folder),
            "one-tool round trip, 0 tool_call plugins": tool_case(0),
            "one-tool round trip, 10 tool_call plugins": tool_case(10),
        }
        for run in cases.values():
            run(200)  # warm caches
        wall: dict[str, list[float]] = {name: [] for name in cases}
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, run in cases.items():
                w, c = run(args.calls)
                wall[name].append(w)
                cpu[name].append(c)
    med = {name: statistics.median(values) for name, values in cpu.items()}
    base = med["no plugins"]
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds x {args.calls} calls")
    print("| case | CPU µs per call (median) | min | max | vs no plugins (CPU) | wall µs (median) |")
    print("|---|---|---|---|---|---|")
    for name, values in cpu.items():
        if name == "CallEvent alone (no call)":
            continue
        m = med[name]
        print(f"| {name} | {m:.1f} | {min(values):.1f} | {max(values):.1f} | +{m - base:.1f} µs ({m / base:.2f}x) "
              f"| {statistics.median(wall[name]):.1f} |")
    change = (med["40 plugins (a section each)"] - med["10 plugins (a section each)"]) / 30
    quiet = (med["40 plugins (returning None)"] - med["10 plugins (returning None)"]) / 30
    first = med["1 plugin (returning None)"] - base - quiet
    print()
    print("| engine cost (from the CPU medians) | µs |")
    print("|---|---|")
    print(f"| per handler returning a fresh Change(sections=[…]) | {change:.2f} |")
    print(f"| per handler returning None | {quiet:.2f} |")
    print(f"| CallEvent and fold set-up once any handler exists | {first:.2f} |")
    print(f"| CallEvent built, timed alone | {med['CallEvent alone (no call)']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
