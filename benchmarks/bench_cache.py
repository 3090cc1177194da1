"""What a functai-cache hit costs over a plain call, for a ~4 KB request.

Process CPU time (``time.process_time``) per call: a plain call on ScriptedLM
(no cache), then the same call answered from ``cache("memory:")`` and from
``cache("sqlite:///…")`` (filled beforehand, so every timed call is a hit).
Medians of interleaved rounds (each round runs every case once, in turn).
Beside them: what the hooks cost with handlers that do nothing (``idle``),
what the core's answering costs (``canned``: a request handler returning one
constant answer), and the floors of a hit: the canonical JSON of the request,
its SHA-256, and a SQLite primary-key read of the entry.

    python benchmarks/bench_cache.py [--rounds 15] [--calls 2000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

import functai
from functai import Change, Plugin, Reply, ai
from functai.testing import ScriptedLM
from functai_cache import cache, canonical, request_key
from functai_cache.stores import SQLiteCache

QUESTION = ("My order 1234 was due on Monday and has not come; the tracking page says 'in transit' since "
            "last week. Where is it, and can I get a refund if it does not come by Friday? ") * 22


@ai
def support(question: str) -> str:
    """Answer the customer's question about their order, politely and briefly. Quote the order number,
    say what the tracking shows, and what happens next. Never promise a delivery date."""


def per_call(fn: Callable[[], object], calls: int, plugins: list[Plugin] | None = None) -> float:
    """CPU seconds per call of ``fn``, with ``plugins`` in a settings block around all the calls."""
    with functai.settings(plugins=plugins or []):
        start = time.process_time()
        for _ in range(calls):
            fn()
        return (time.process_time() - start) / calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)

    lm = ScriptedLM(reply=lambda request: "Your order is in transit.")
    folder = tempfile.mkdtemp(prefix="bench-cache-")
    memory = cache("memory:")
    sqlite_url = "sqlite:///" + os.path.join(folder, "cache.db")
    sqlite = cache(sqlite_url)
    with functai.settings(client=lm):
        for plugin in (memory, sqlite):  # one paid call each fills the cache
            with functai.settings(plugins=[plugin]):
                support(QUESTION)
        request = lm.requests[-1]
        lm.requests.clear()
        text = canonical(request)
        key = request_key(request)
        assert key is not None
        table = SQLiteCache(os.path.join(folder, "cache.db"))

        def ask() -> object:
            lm.requests.clear()  # ScriptedLM keeps every request: keep its list short
            return support(QUESTION)

        idle = Plugin("idle", version="1.0.0")  # the hooks' own cost: handlers that do nothing
        idle.request(lambda event: None)
        idle.reply(lambda event: None)
        canned = Plugin("canned", version="1.0.0")  # the core's cost of an answer: a constant one
        answer = Change(reply=Reply(text="Your order is in transit.", finish_reason="stop"), note="canned")
        canned.request(lambda event: answer)
        canned.reply(lambda event: None)

        cases: dict[str, tuple[Callable[[], object], list[Plugin]]] = {
            "plain call": (ask, []),
            "idle request+reply": (ask, [idle]),
            "canned answer": (ask, [canned]),
            "hit, memory:": (ask, [memory]),
            "hit, sqlite:///": (ask, [sqlite]),
            "floor: canonical JSON": (lambda: canonical(request), []),
            "floor: SHA-256 of it": (lambda: hashlib.sha256(text.encode()).hexdigest(), []),
            "floor: SQLite key read": (lambda: table.get(key), []),
        }
        for run, plugins in cases.values():  # warm up
            per_call(run, 50, plugins)
        seconds: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (run, plugins) in cases.items():
                lm.requests.clear()
                seconds[name].append(per_call(run, args.calls, plugins))
                if name.startswith(("hit", "canned")) and lm.requests:
                    raise SystemExit(f"{name}: the model was asked; the cache did not answer")

    medians = {name: statistics.median(values) * 1e6 for name, values in seconds.items()}
    base = medians["plain call"]
    print(f"request: {len(text.encode())} bytes of canonical JSON; {args.rounds} interleaved rounds of "
          f"{args.calls} calls; CPU µs per call (median)\n")
    print(f"{'case':<24}{'µs':>9}{'over plain':>12}")
    for name, value in medians.items():
        over = f"{value - base:+.1f}" if not name.startswith(("plain", "floor")) else ""
        print(f"{name:<24}{value:>9.1f}{over:>12}")
    print(f"\ntargets: memory: <= +40 µs, SQLite <= +120 µs over a plain call\n"
          f"command: python benchmarks/bench_cache.py --rounds {args.rounds} --calls {args.calls}  "
          f"(Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
