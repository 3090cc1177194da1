"""What declared plugin order costs a call: 10 plugins that declare ``before=``/``after=``/``requires=``
against 10 that declare nothing, each with a ``before_call`` handler returning None.

The order is worked out once per set of layers and cached with the plan, so the two should cost the
same. Process CPU time per call (``time.process_time``), medians of interleaved rounds (each round
runs both cases, in turn, the order alternating).

    python benchmarks/bench_order.py [--rounds 21] [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import functai
from functai import Plugin, ai
from functai.testing import ScriptedLM


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def plain() -> list[Plugin]:
    return [Plugin(f"p{i}", before_call=lambda call: None) for i in range(10)]


def constrained() -> list[Plugin]:
    """Listed in reverse; each declares it runs after the next lower one, and requires p0."""
    plugins = [Plugin("p0", before_call=lambda call: None)]
    plugins += [Plugin(f"p{i}", after=[f"p{i - 1}"], requires=["p0"], before=[f"p{i + 1}"] if i < 9 else [],
                       before_call=lambda call: None) for i in range(1, 10)]
    return list(reversed(plugins))


def timed(plugins: list[Plugin], calls: int) -> float:
    with functai.settings(plugins=plugins):
        capital("Peru")
        start = time.process_time()
        for _ in range(calls):
            capital("Peru")
        return (time.process_time() - start) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    model = ScriptedLM(reply=lambda request: "Lima")
    functai.configure(client=model)
    cases = {"10 plugins, nothing declared": plain(), "10 plugins, before=/after=/requires= declared": constrained()}
    found: dict[str, list[float]] = {name: [] for name in cases}
    for index in range(args.rounds):
        order = list(cases.items()) if index % 2 == 0 else list(reversed(cases.items()))
        for name, plugins in order:
            found[name].append(timed(plugins, args.calls))
            model.requests.clear()
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds x {args.calls} calls, medians; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| case | CPU µs per call (min – max) |")
    print("|---|---|")
    for name, values in found.items():
        print(f"| {name} | {statistics.median(values):.1f} ({min(values):.1f} – {max(values):.1f}) |")
    first, second = (statistics.median(v) for v in found.values())
    print(f"declared / plain: {second / first:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
