"""The OpenAI-compatible client's connection pools: CPU per request, async and threaded.

1. ``--async``: CPU per ``acomplete`` of the OpenAI-compatible client, one at a
   time (the per-request cost of finding the loop's pool) and ``--concurrent``
   at once, against bench_async's loopback server (its own process; it answers
   after 50 ms). Medians of rounds; run it once per checkout, alternating, with
   ``PYTHONPATH=<checkout>`` to compare two.
2. ``--threads``: one `httpx.Client` (httpx's own pool, as the plain
   ``complete`` uses) shared by 1…``--most-threads`` threads, each making
   requests one after another: CPU per request, and the share of the
   process's CPU spent in httpcore's ``_assign_requests_to_connections`` (the
   pass over every connection and every queued request, made each time a
   request starts or a response is closed). Limits as httpx's defaults, and
   with as many kept-alive connections as threads (so reconnecting does not
   hide the pool's own cost).

    python benchmarks/bench_pools.py --async [--rounds 5] [--calls 300] [--concurrent 200]
    python benchmarks/bench_pools.py --threads [--requests 20] [--rounds 5] [--most-threads 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_async import serve  # noqa: E402  (the asyncio loopback server, in its own process)

import functai  # noqa: E402
from functai._models.request import Request  # noqa: E402

REQUEST = Request(model="m", messages=({"role": "user", "content": "q"},))


async def sequential(url: str, calls: int) -> float:
    """CPU µs per `acomplete`, one after another (after a warm-up call)."""
    from functai._models.openai import OpenAIClient

    client = OpenAIClient(base_url=url, api_key="", name="loopback", max_retries=0)
    await client.acomplete(REQUEST)
    started = time.process_time()
    for _ in range(calls):
        await client.acomplete(REQUEST)
    cpu = time.process_time() - started
    await client.aclose()
    return cpu / calls * 1e6


async def concurrent(url: str, n: int) -> float:
    """CPU µs per `acomplete`, n at once."""
    from functai._models.openai import OpenAIClient

    client = OpenAIClient(base_url=url, api_key="", name="loopback", max_retries=0)
    await client.acomplete(REQUEST)
    started = time.process_time()
    await asyncio.gather(*(client.acomplete(REQUEST) for _ in range(n)))
    cpu = time.process_time() - started
    await client.aclose()
    return cpu / n * 1e6


def run_async(url: str, args: argparse.Namespace) -> None:
    one, many = [], []
    for _ in range(args.rounds):  # interleaved
        one.append(asyncio.run(sequential(url, args.calls)))
        many.append(asyncio.run(concurrent(url, args.concurrent)))
    where = os.path.dirname(os.path.dirname(os.path.abspath(functai.__file__)))
    print(f"| {where} | acomplete one at a time: {statistics.median(one):.1f} µs CPU per call | "
          f"{args.concurrent} at once: {statistics.median(many):.1f} µs CPU per call | (medians of {args.rounds}) |")


def threaded(url: str, threads: int, requests: int, keep_all: bool) -> tuple[float, float, float]:
    """CPU µs per request, the share of CPU in the pool's pass, and wall seconds."""
    import httpcore
    import httpx

    spent = [0.0]
    lock = threading.Lock()
    original = httpcore.ConnectionPool._assign_requests_to_connections

    def timed(self: Any) -> Any:
        started = time.thread_time()
        try:
            return original(self)
        finally:
            took = time.thread_time() - started
            with lock:
                spent[0] += took

    httpcore.ConnectionPool._assign_requests_to_connections = timed  # type: ignore[method-assign]
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=threads if keep_all else 20)
    body = {"model": "loopback", "messages": [{"role": "user", "content": "q"}]}
    try:
        with httpx.Client(limits=limits, timeout=60.0) as http:
            http.post(f"{url}/chat/completions", json=body)
            go = threading.Barrier(threads + 1)

            def work() -> None:
                go.wait()
                for _ in range(requests):
                    assert http.post(f"{url}/chat/completions", json=body).status_code == 200

            workers = [threading.Thread(target=work) for _ in range(threads)]
            for worker in workers:
                worker.start()
            spent[0] = 0.0
            go.wait()
            started, cpu = time.perf_counter(), time.process_time()
            for worker in workers:
                worker.join()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        httpcore.ConnectionPool._assign_requests_to_connections = original  # type: ignore[method-assign]
    total = threads * requests
    return cpu / total * 1e6, spent[0] / cpu if cpu else 0.0, wall


def run_threads(url: str, args: argparse.Namespace) -> None:
    counts = [n for n in (1, 10, 50, 100, 200) if n <= args.most_threads]
    for keep_all in (False, True):
        runs: dict[int, list[tuple[float, float, float]]] = {n: [] for n in counts}
        for _ in range(args.rounds):  # interleaved
            for n in counts:
                runs[n].append(threaded(url, n, args.requests, keep_all))
        keep = "as many kept alive as threads" if keep_all else "httpx's default limits (20 kept alive)"
        for n in counts:
            cpu = statistics.median(r[0] for r in runs[n])
            share = statistics.median(r[1] for r in runs[n])
            wall = statistics.median(r[2] for r in runs[n])
            print(f"| {n} threads, {keep} | {cpu:.0f} µs CPU per request | {share:.1%} of it in the pool's pass | "
                  f"{wall:.2f} s wall for {n * args.requests} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--async", dest="do_async", action="store_true")
    parser.add_argument("--threads", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--most-threads", type=int, default=200)
    args = parser.parse_args()
    proc, url = serve()
    try:
        if args.do_async:
            run_async(url, args)
        if args.threads:
            run_threads(url, args)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
