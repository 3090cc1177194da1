"""Model client overhead per call against the loopback server, next to a raw httpx.Client.

The loopback server (tests/loopback.py) runs in its own process, so this
process's CPU time is the client's alone. Cases run in interleaved rounds
(each round runs every case once, in turn) so a noisy neighbour hurts every
case alike; the figure per case is the median round, as wall time and as
process CPU time per call.

- ``httpx``: a raw ``httpx.Client`` posting the same JSON body and decoding the reply
- ``OpenAIClient``: functai's client, ``complete(Request)`` → ``Reply``
- ``openai SDK``: ``OpenAI(...).chat.completions.create`` (when ``openai`` is installed)
- ``AI function``: a whole ``fn("Peru")`` call through the client (str output)

    python benchmarks/bench_client.py [--rounds 21] [--calls 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from loopback import LoopbackServer, Scripted, completion
server = LoopbackServer(default=Scripted(body=completion("Lima", usage={"prompt_tokens": 20, "completion_tokens": 1})))
server.start()
print(server.url, flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
server.close()
"""

MESSAGES = [
    {"role": "system", "content": "The capital city of the country."},
    {"role": "user", "content": "country: Peru"},
]


def cases(url: str) -> dict[str, Callable[[], object]]:
    import functai
    from functai._models.openai import OpenAIClient
    from functai._models.request import Request

    raw = httpx.Client(headers={"Authorization": "Bearer sk-bench-0123456789"})
    body = {"model": "m", "messages": MESSAGES, "temperature": 0}

    def raw_call() -> object:
        response = raw.post(f"{url}/chat/completions", json=body)
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"]

    client = OpenAIClient(base_url=url, api_key="sk-bench-0123456789")
    request = Request(model="m", messages=MESSAGES, settings={"temperature": 0})

    @functai.ai
    def capital(country: str) -> str:
        """The capital city of the country."""

    functai.configure(lm="openai/m", base_url=url, api_key="sk-bench-0123456789", temperature=0)
    found: dict[str, Callable[[], object]] = {
        "httpx": raw_call,
        "OpenAIClient": lambda: client.complete(request).text,
    }
    try:
        import openai
    except ImportError:
        pass
    else:
        sdk = openai.OpenAI(base_url=url, api_key="sk-bench-0123456789", max_retries=0)
        found["openai SDK"] = lambda: sdk.chat.completions.create(
            model="m", messages=MESSAGES, temperature=0  # type: ignore[arg-type]
        ).choices[0].message.content
    found["AI function"] = lambda: capital("Peru")
    return found


def measure(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """Microseconds per call: (wall, process CPU)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, os.path.join(ROOT, "tests")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        found = cases(url)
        for fn in found.values():  # warm up: connections, caches, imports
            for _ in range(20):
                assert fn() == "Lima", fn()
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in found}
        for _ in range(args.rounds):
            for name, fn in found.items():
                results[name].append(measure(fn, args.calls))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)

    def figures(rows: list[tuple[float, float]]) -> tuple[float, float, float]:
        return statistics.median(w for w, _ in rows), min(w for w, _ in rows), statistics.median(c for _, c in rows)

    base = figures(results["httpx"])
    print(f"{args.rounds} rounds x {args.calls} calls; µs per call (loopback server in its own process)")
    print(f"{'case':<14} {'wall median':>11} {'× httpx':>8} {'wall min':>9} {'× httpx':>8} {'CPU median':>11} {'× httpx':>8}")
    for name, rows in results.items():
        wall, low, cpu = figures(rows)
        print(f"{name:<14} {wall:>11.0f} {wall / base[0]:>8.2f} {low:>9.0f} {low / base[1]:>8.2f} "
              f"{cpu:>11.0f} {cpu / base[2]:>8.2f}")

if __name__ == "__main__":
    main()
