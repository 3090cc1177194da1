"""What functai-otel costs per call: nothing listening, an SDK listening, and the same spans by hand.

    python benchmarks/bench_otel.py [--rounds 9] [--calls 1000] [--chunks 9]

The call is a plain one-request AI function call on `ScriptedLM`
(``lm="openai/gpt-test"``). Each round starts one fresh process of each
kind (the OpenTelemetry global provider can be set once per process; which
kind goes first alternates):

- **plain**: the plugin not loaded (``FUNCTAI_LOAD_PLUGINS=``): plain calls;
- **no SDK**: the installed plugin loaded (entry point ``otel``,
  ``FUNCTAI_LOAD_PLUGINS=otel``), no tracer provider set: calls with the
  plugin, and calls with it left out (``disable_plugins=["otel"]``);
- **SDK**: the same, with the SDK's `TracerProvider` (a `SimpleSpanProcessor`
  and an `InMemorySpanExporter`) set as the global provider: calls with the
  plugin; calls with it left out; and calls with it left out and the same two
  spans made by hand with the SDK's API (the call's, current while it runs,
  and its ``chat`` span, current while the request is sent, with the
  plugin's attributes).

Each process warms up, then runs ``--chunks`` chunks, each timing every case
of the process once for ``--calls`` calls (in a rotating order; the exporter
is emptied between them, outside the timing), and prints each case's median
chunk: process CPU time and wall time per call. The table gives the medians
over the processes. What the plugin adds is measured against the calls with
it left out *in the same process*, so the differences do not ride on how fast
one process happened to run against another (±20 % on a shared machine);
the ratio is taken per SDK process, and its median printed. Read CPU time.
Needs functai-otel and opentelemetry-sdk installed (``pip install -e
./functai_builtin_plugins/otel opentelemetry-sdk``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

CASES = {
    "plain": "plain (plugin not loaded)",
    "out": "otel installed, left out of the call (`disable_plugins`)",
    "nosdk": "otel installed, no SDK (the API's no-op)",
    "sdk": "otel installed + in-memory SDK",
    "hand": "the same spans by hand + in-memory SDK (otel left out)",
}
#: The kinds of process: the plugin not loaded; loaded with no tracer provider; the SDK as the global provider.
KINDS = ("plain", "nosdk", "sdk")


def _sdk() -> Any:
    """Set the SDK as the global provider, exporting to memory; the exporter."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def _by_hand(fn: Any) -> Callable[[], Any]:
    """One call with the spans functai-otel makes for it, made by hand with the SDK."""
    from opentelemetry import context, trace
    from opentelemetry.trace import SpanKind

    tracer = trace.get_tracer("by-hand")

    def call() -> Any:
        span = tracer.start_span("functai.call capital", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "capital",
            "functai.function": "capital", "functai.path": "capital",
            "gen_ai.request.model": "gpt-test", "gen_ai.provider.name": "openai"})
        token = context.attach(trace.set_span_in_context(span))
        try:
            # the chat span is current while its request is sent (an HTTP client's span would be its child)
            chat = tracer.start_span("chat gpt-test", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-test", "gen_ai.output.type": "text",
                "functai.path": "capital", "functai.attempt": 1})
            sending = context.attach(trace.set_span_in_context(chat))
            try:
                value, record = fn.run("Peru")
            finally:
                context.detach(sending)
            usage = record.usage
            chat.set_attributes({"gen_ai.response.finish_reasons": (record.finish_reason,),
                                 "gen_ai.usage.input_tokens": usage["input_tokens"],
                                 "gen_ai.usage.output_tokens": usage["output_tokens"]})
            chat.end()
            span.set_attributes({"functai.call.id": record.id, "functai.function.version": record.version,
                                 "functai.attempts": record.attempts,
                                 "gen_ai.usage.input_tokens": usage["input_tokens"],
                                 "gen_ai.usage.output_tokens": usage["output_tokens"]})
            return value
        finally:
            context.detach(token)
            span.end()

    return call


def probe(kind: str, calls: int, chunks: int) -> dict[str, Any]:
    """One process's figures: µs per call of each case of ``kind``, CPU and wall (medians of its chunks)."""
    exporter = _sdk() if kind == "sdk" else None
    import functai
    from functai import Reply, ai
    from functai.testing import ScriptedLM

    @ai
    def capital(country: str) -> str:
        """The capital city of the country."""

    answer = Reply(text="Lima", finish_reason="stop", usage={"input_tokens": 12, "output_tokens": 1})
    functai.configure(client=ScriptedLM(reply=lambda request: answer), lm="openai/gpt-test")
    left_out = functai.settings(disable_plugins=["otel"])  # the plugin out of these calls
    plain = lambda: capital("Peru")  # noqa: E731
    cases: dict[str, tuple[Callable[[], Any], Any]] = {"plain": (plain, None)} if kind == "plain" else {
        "out": (plain, left_out), kind: (plain, None)}
    if kind == "sdk":
        cases["hand"] = (_by_hand(capital), left_out)
    for call, block in cases.values():  # warm up
        _chunk(call, block, max(calls // 4, 50))
    if ("functai_otel" in sys.modules) != (kind != "plain"):
        raise SystemExit(f"{kind}: functai-otel {'not ' if kind != 'plain' else ''}loaded; "
                         "is it installed (pip install -e ./functai_builtin_plugins/otel)?")
    if exporter is not None:
        if not any(span.name == "functai.call capital" and span.instrumentation_scope.name == "functai_otel"
                   for span in exporter.get_finished_spans()):
            raise SystemExit("sdk: the plugin made no span in the warm-up")
        exporter.clear()
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    wall: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for number in range(chunks):  # each chunk runs every case once, in a rotating order
        for name in names[number % len(names):] + names[:number % len(names)]:
            c, w = _chunk(*cases[name], calls)
            cpu[name].append(c)
            wall[name].append(w)
            if exporter is not None:
                exporter.clear()
    found: dict[str, Any] = {name: (statistics.median(cpu[name]), statistics.median(wall[name])) for name in cases}
    if kind == "nosdk":
        found["check"] = _idle_check(capital)
    return found


def _chunk(call: Callable[[], Any], block: Any, calls: int) -> tuple[float, float]:
    """µs of CPU and of wall time per call, over ``calls`` calls (inside ``block`` when given)."""
    if block is not None:
        block.__enter__()
    try:
        w, c = time.perf_counter(), time.process_time()
        for _ in range(calls):
            call()
        return (time.process_time() - c) / calls * 1e6, (time.perf_counter() - w) / calls * 1e6
    finally:
        if block is not None:
            block.__exit__(None, None, None)


def _idle_check(fn: Any, number: int = 200_000) -> float:
    """ns per call of what an idle functai-otel adds to a call, timed alone: the per-call look at its
    ``active`` check (`Resolved.now`, which compares the global provider with the one it decided on)."""
    from functai._layers import resolve

    resolved = resolve(fn.own).whole
    if not resolved.plan.gated or resolved.now() is resolved:
        raise SystemExit("nosdk: the otel plugin is not sitting calls out")
    best = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(number):
            resolved.now()
        best.append(time.process_time() - start)
    return min(best) / number * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9, help="fresh processes of each kind")
    parser.add_argument("--calls", type=int, default=1000, help="calls per case per chunk")
    parser.add_argument("--chunks", type=int, default=9, help="chunks per process (each runs every case once)")
    parser.add_argument("--kind", choices=KINDS, help=argparse.SUPPRESS)  # one process's part
    args = parser.parse_args(argv)
    if args.kind:
        print(json.dumps(probe(args.kind, args.calls, args.chunks)))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for number in range(args.rounds):
        for kind in KINDS[number % 3:] + KINDS[:number % 3]:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("FUNCTAI_", "OTEL_"))}
            env["FUNCTAI_LOAD_PLUGINS"] = "" if kind == "plain" else "otel"  # no other installed plugin
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--kind", kind, "--calls",
                                   str(args.calls), "--chunks", str(args.chunks)],
                                  capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
            runs[kind].append(json.loads(done.stdout))
    rows = {"plain": runs["plain"], "out": runs["nosdk"] + runs["sdk"], "nosdk": runs["nosdk"], "sdk": runs["sdk"],
            "hand": runs["sdk"]}
    print(f"python {sys.version.split()[0]}, {args.rounds} fresh processes of each kind, each the median of "
          f"{args.chunks} interleaved chunks x {args.calls} calls per case; medians over the processes")
    print("| case | CPU µs per call | wall µs per call |")
    print("|---|---|---|")
    for name, label in CASES.items():
        cpu = statistics.median(run[name][0] for run in rows[name])
        wall = statistics.median(run[name][1] for run in rows[name])
        print(f"| {label} | {cpu:.2f} | {wall:.2f} |")
    check = statistics.median(run["check"] for run in runs["nosdk"])
    idle = [run["nosdk"][0] - run["out"][0] for run in runs["nosdk"]]
    ratio = [(run["sdk"][0] - run["out"][0]) / (run["hand"][0] - run["out"][0]) for run in runs["sdk"]]
    added = statistics.median(run["sdk"][0] - run["out"][0] for run in runs["sdk"])
    hand = statistics.median(run["hand"][0] - run["out"][0] for run in runs["sdk"])
    print("\nagainst the same process's calls with otel left out (medians over the processes):")
    print(f"  otel with no SDK adds {statistics.median(idle):+.2f} µs CPU per call (per process: "
          f"{min(idle):+.2f} to {max(idle):+.2f}; target ≤ 2 µs)")
    print(f"  otel + SDK adds {added:.2f} µs, the same spans by hand {hand:.2f} µs: "
          f"{statistics.median(ratio):.2f}x (per process: {min(ratio):.2f}x to {max(ratio):.2f}x; target ≤ 1.3x)")
    print(f"  the idle plugin's per-call check (`Resolved.now`), timed alone: {check:.0f} ns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
