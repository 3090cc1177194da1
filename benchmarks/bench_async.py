"""Async and streamed calls: concurrency, CPU overhead, time to first text.

1. ``--concurrent`` (200) ``acall``s at once against a loopback chat-completions
   server (in its own process, so its CPU is not counted) that answers each
   request after 50 ms: wall and process CPU time, and the most threads this
   process had meanwhile (no thread per call); next to the same requests made
   with httpx alone, same client settings and body, over httpx's own pool and
   over functai's (`functai._models.pool`). Medians of interleaved rounds.
2. CPU per call (``time.process_time``) of ``await fn.acall(...)`` and of the
   plain ``fn(...)`` on ScriptedLM, interleaved rounds, median: their ratio.
3. Time to the first ``"text"`` event of ``fn.stream`` / ``fn.astream`` against
   the loopback server streaming 20 chunks 10 ms apart, next to the time to
   ``"done"``.

    python benchmarks/bench_async.py [--concurrent 200] [--concurrent-rounds 5] [--rounds 9] [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import functai
from functai import ai
from functai.testing import ScriptedLM

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = f"""
import asyncio, json, sys
sys.path.insert(0, {os.path.join(HERE, os.pardir, "tests")!r})
from loopback import chunks, completion

# An asyncio HTTP/1.1 server on 127.0.0.1 (keep-alive): a whole answer after 50 ms, or with
# "stream": true 20 server-sent events 10 ms apart. (tests/loopback.py's threaded server
# takes a thread per connection, which on 2 busy cores is what a 200-call run would measure.)
ANSWER = json.dumps(completion("ok")).encode()

async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\\r\\n\\r\\n")
            length = 0
            for line in head.split(b"\\r\\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = json.loads(await reader.readexactly(length)) if length else {{}}
            if body.get("stream"):
                writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: text/event-stream\\r\\n"
                             b"Transfer-Encoding: chunked\\r\\n\\r\\n")
                for n, event in enumerate([*map(json.dumps, chunks(*["word "] * 20)), "[DONE]"]):
                    if n:
                        await asyncio.sleep(0.01)
                    piece = f"data: {{event}}\\n\\n".encode()
                    writer.write(f"{{len(piece):x}}\\r\\n".encode() + piece + b"\\r\\n")
                    await writer.drain()
                writer.write(b"0\\r\\n\\r\\n")
            else:
                await asyncio.sleep(0.05)
                writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n"
                             + f"Content-Length: {{len(ANSWER)}}\\r\\n\\r\\n".encode() + ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(f"http://127.0.0.1:{{server.sockets[0].getsockname()[1]}}/v1", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


@ai
def answer(question: str) -> str:
    """Answer."""


def serve() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


async def concurrent(url: str, n: int) -> tuple[float, float, int]:
    """Wall and CPU seconds of n concurrent acalls (after one warm-up call), and the most threads."""
    OpenAIClient = functai.OpenAIClient

    client = OpenAIClient(base_url=url, api_key="", name="loopback", max_retries=0)
    most = threading.active_count()
    done = False

    async def watch() -> None:
        nonlocal most
        while not done:
            most = max(most, threading.active_count())
            await asyncio.sleep(0.005)

    with functai.settings(client=client):
        await answer.acall("warm up")  # the pool's first connection
        watcher = asyncio.create_task(watch())
        started, cpu = time.perf_counter(), time.process_time()
        values = await asyncio.gather(*(answer.acall(f"q{i}") for i in range(n)))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        done = True
        await watcher
    assert values == ["ok"] * n
    await client.aclose()
    return wall, cpu, most


async def bare_httpx(url: str, n: int, lean: bool) -> tuple[float, float]:
    """The same n requests made with httpx alone (no functai), with the client settings and
    body functai's client uses: over httpx's own pool, or (``lean``) over functai's."""
    import httpx

    transport = None
    if lean:
        from functai._models.pool import LeanTransport

        transport = LeanTransport()
    body = {"model": "loopback", "messages": [{"role": "system", "content": "Answer."},
                                              {"role": "user", "content": "question: q"}]}
    async with httpx.AsyncClient(transport=transport, follow_redirects=False,
                                 headers={"Accept": "application/json"}, timeout=httpx.Timeout(60.0)) as http:
        await http.post(f"{url}/chat/completions", json=body)
        started, cpu = time.perf_counter(), time.process_time()
        responses = await asyncio.gather(*(http.post(f"{url}/chat/completions", json=body) for _ in range(n)))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert all(response.status_code == 200 for response in responses)
    return wall, cpu


def cpu_per_call(calls: int, rounds: int) -> tuple[float, float]:
    lm = ScriptedLM(reply=lambda request: "ok")
    sync_runs, async_runs = [], []

    async def many() -> None:
        for _ in range(calls):
            await answer.acall("q")

    with functai.settings(client=lm):
        for _ in range(rounds):
            lm.requests.clear()
            started = time.process_time()
            for _ in range(calls):
                answer("q")
            sync_runs.append((time.process_time() - started) / calls * 1e6)
            lm.requests.clear()
            started = time.process_time()
            asyncio.run(many())
            async_runs.append((time.process_time() - started) / calls * 1e6)
    return statistics.median(sync_runs), statistics.median(async_runs)


def first_text(url: str, rounds: int = 5) -> dict[str, float]:
    """Median seconds to the first text event and to done (after one warm-up stream each)."""
    OpenAIClient = functai.OpenAIClient

    client = OpenAIClient(base_url=url, api_key="", name="loopback", max_retries=0)
    runs: dict[str, list[float]] = {"sync first": [], "sync done": [], "async first": [], "async done": []}
    with functai.settings(client=client):
        for _ in range(rounds + 1):
            started, first = time.perf_counter(), None
            for event in answer.stream("q"):
                if event.kind == "text" and first is None:
                    first = time.perf_counter() - started
            runs["sync first"].append(first or 0.0)
            runs["sync done"].append(time.perf_counter() - started)

        async def main() -> None:
            for _ in range(rounds + 1):
                started, first = time.perf_counter(), None
                async for event in answer.astream("q"):
                    if event.kind == "text" and first is None:
                        first = time.perf_counter() - started
                runs["async first"].append(first or 0.0)
                runs["async done"].append(time.perf_counter() - started)
            await client.aclose()

        asyncio.run(main())
    return {key: statistics.median(values[1:]) for key, values in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrent-rounds", type=int, default=5)
    args = parser.parse_args()
    from functai._layers import reset

    reset()
    proc, url = serve()
    try:
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
        cases = {
            f"{args.concurrent} concurrent acalls, server answers after 50 ms": lambda: concurrent(url, args.concurrent),
            "the same requests, httpx alone (its own pool)": lambda: bare_httpx(url, args.concurrent, False),
            "the same requests, httpx alone over functai's pool": lambda: bare_httpx(url, args.concurrent, True),
        }
        if importlib.util.find_spec("functai._models.pool") is None:  # a checkout from before the pool
            del cases["the same requests, httpx alone over functai's pool"]
        runs: dict[str, list[tuple[float, ...]]] = {name: [] for name in cases}
        for _ in range(args.concurrent_rounds):  # interleaved: a busy neighbour hurts each case alike
            for name, case in cases.items():
                runs[name].append(asyncio.run(case()))
        for name, results in runs.items():
            wall = statistics.median(r[0] for r in results)
            cpu = statistics.median(r[1] for r in results)
            threads = f"at most {max(r[2] for r in results)} threads in this process" if len(results[0]) > 2 else ""
            print(f"| {name} (median of {args.concurrent_rounds}) | {wall:.3f} s wall | {cpu:.3f} s CPU | "
                  f"{cpu / args.concurrent * 1e3:.2f} ms CPU per call | {threads} |")
        sync_us, async_us = cpu_per_call(args.calls, args.rounds)
        print(f"| CPU per call on ScriptedLM (median of {args.rounds} x {args.calls}) | sync {sync_us:.1f} µs | "
              f"acall {async_us:.1f} µs | {async_us / sync_us:.2f}x |")
        times = first_text(url)
        print(f"| stream, 20 chunks 10 ms apart | first text {times['sync first'] * 1000:.1f} ms | "
              f"done {times['sync done'] * 1000:.1f} ms |")
        print(f"| astream, 20 chunks 10 ms apart | first text {times['async first'] * 1000:.1f} ms | "
              f"done {times['async done'] * 1000:.1f} ms |")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
