"""What the hooks of a model request (``request``, ``model_error``, ``reply``) and ``call_end``
cost a call with no handler for them; and, with handlers, the hearing hooks and functai-otel.

Process CPU time next to wall time (the machine is shared: wall time counts
the neighbours too), medians of interleaved rounds (each round runs every
case once, in turn).

    python benchmarks/bench_hearing.py [--rounds 21] [--calls 2000]
        the cases below, in this checkout
    python benchmarks/bench_hearing.py --ab OLD_CHECKOUT [--new NEW_CHECKOUT] [--processes 10]
        a plain call in NEW_CHECKOUT (default: this one) against one in
        OLD_CHECKOUT, in alternating processes, each the median of its own
        rounds; with the commit that added the hooks and its parent, the
        end-to-end cost of the two hooks with no handlers
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import functai
from functai import Plugin, ai
from functai.testing import ScriptedLM, tool_call


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


@functai.tool(effects="reads")
def lookup(key: str) -> str:
    """Look a key up."""
    return "value"


@ai
def summarize(text: str) -> str:
    """Summarize."""


@ai(tools=[lookup, summarize])
def researched(question: str) -> str:
    """Answer, looking things up."""


def tree_reply(request):
    """A call with one tool and one nested AI function, as in functai-otel's tests."""
    last = request.messages[-1]
    if request.messages[0]["content"].startswith("Summarize"):
        return "short"
    if last["role"] == "tool":
        return "done" if last["name"] == "summarize" else tool_call("summarize", {"text": "t"})
    return tool_call("lookup", {"key": "k"})


Case = Callable[[int], tuple[float, float]]


def case(fn: object, reply: Callable[..., object], plugins: list[Plugin], **settings: object) -> Case:
    lm = ScriptedLM(reply=reply)
    block = functai.settings(client=lm, plugins=plugins, **settings)

    def run(calls: int) -> tuple[float, float]:
        with block:
            lm.requests.clear()
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fn("q")  # type: ignore[operator]
            return ((time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6)

    return run


def otel_plugins() -> dict[str, list[Plugin]]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import NoOpTracerProvider

    from functai_otel import otel

    class Dropping(SpanExporter):
        """An exporter that keeps nothing: the benchmark makes hundreds of thousands of spans."""

        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropping()))
    return {"otel, no SDK (API no-op)": [otel(NoOpTracerProvider())], "otel, SDK + exporter": [otel(provider)]}


def rounds(cases: dict[str, Case], count: int, calls: int) -> dict[str, tuple[float, float]]:
    for run in cases.values():
        run(max(calls // 10, 20))  # warm caches
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(count):
        for name, run in cases.items():
            w, c = run(calls)
            wall[name].append(w)
            cpu[name].append(c)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in cases}


def _probe(resolved: object, n: int) -> None:
    for _ in range(n):  # what `functai._calls.run` runs for the acting hooks and call_end, as it runs it
        acting = resolved.plan.handlers  # type: ignore[attr-defined]
        asker = None
        if acting["request"] or acting["model_error"] or acting["reply"] or acting["chunk"]:
            pass
        if asker is None:
            pass
        handlers = resolved.plan.handlers["call_end"]  # type: ignore[attr-defined]
        if handlers:
            pass


def _empty(resolved: object, n: int) -> None:
    for _ in range(n):
        pass


def added_statements(repeat: int = 15, number: int = 200_000) -> float:
    """ns per call of exactly what the two hooks add to a one-attempt call with no handlers for
    them, on a real resolved plan: the fastest of ``repeat`` runs, minus an empty loop's."""
    from functai._layers import resolve

    resolved = resolve(capital.own)

    def best(fn: Callable[[object, int], None]) -> float:
        times = []
        for _ in range(repeat):
            start = time.process_time()
            fn(resolved, number)
            times.append(time.process_time() - start)
        return min(times)

    return (best(_probe) - best(_empty)) / number * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--ab", metavar="OLD_CHECKOUT", help="compare a plain call with the one in OLD_CHECKOUT")
    parser.add_argument("--new", metavar="NEW_CHECKOUT", help="with --ab: compare this one instead of this checkout")
    parser.add_argument("--processes", type=int, default=10, help="with --ab: processes per side")
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ["FUNCTAI_LOAD_PLUGINS"] = ""  # measured without what pip installed here (here and in --ab)
    if args.plain:  # one side of --ab: print the medians of a plain call as JSON
        print(f"functai from {os.path.dirname(functai.__file__)}", file=sys.stderr)
        print(json.dumps(rounds({"plain": case(capital, lambda r: "Lima", [])}, args.rounds, args.calls)["plain"]))
        return 0
    if args.ab:
        return ab(args)
    quiet = Plugin("ear", reply=lambda reply: None, call_end=lambda call: None)
    cases = {
        "plain call, no plugins": case(capital, lambda r: "Lima", []),
        "plain call, a reply and a call_end handler (both empty)": case(capital, lambda r: "Lima", [quiet]),
        "tool + nested function, no plugins": case(researched, tree_reply, []),
    }
    try:
        for name, plugins in otel_plugins().items():
            cases[f"tool + nested function, {name}"] = case(researched, tree_reply, plugins)
    except ImportError as error:
        print(f"(functai-otel cases skipped: {error}; pip install ./functai_builtin_plugins/otel opentelemetry-sdk)")
    found = rounds(cases, args.rounds, args.calls)
    print(f"request, model_error, chunk, reply and call_end with no handlers add {added_statements():.0f} ns to a "
          "one-attempt call (their statements, timed alone in CPU time: fastest of 15 x 200,000)")
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds x {args.calls} calls, medians")
    print("| case | wall µs per call | CPU µs per call |")
    print("|---|---|---|")
    for name, (wall, cpu) in found.items():
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")
    return 0


def ab(args: argparse.Namespace) -> int:
    here = os.path.abspath(args.new) if args.new else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"new checkout": here, "old checkout": os.path.abspath(args.ab)}
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for _ in range(args.processes):
        for name, root in sides.items():
            env = {**os.environ, "PYTHONPATH": root}
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--plain", "--rounds", str(args.rounds),
                                   "--calls", str(args.calls)], capture_output=True, text=True, env=env, cwd=root,
                                  check=True)
            found[name].append(tuple(json.loads(done.stdout)))  # type: ignore[arg-type]
    print(f"python {sys.version.split()[0]}, {args.processes} alternating processes per side, "
          f"each the median of {args.rounds} rounds x {args.calls} calls")
    print("| plain call | wall µs per call | CPU µs per call |")
    print("|---|---|---|")
    medians = {}
    for name, values in found.items():
        medians[name] = (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
        print(f"| {name} | {medians[name][0]:.2f} | {medians[name][1]:.2f} |")
    wall = medians["new checkout"][0] - medians["old checkout"][0]
    cpu = medians["new checkout"][1] - medians["old checkout"][1]
    print(f"| difference | {wall:+.2f} | {cpu:+.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
