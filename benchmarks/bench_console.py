"""The console's inbox over a PostgreSQL store: 1,000 waiting turns across 200 conversations.

Each conversation gets five turns that wait for a refund's approval (five trees of one turn:
a waiting turn holds only its own branch). Then the inbox is asked for straight through the
console's ASGI app (token check, routing, reading the store, rendering), so the time measured is
the server's, without network or HTTP parsing: ``cold`` is a console's first request (every conversation opened and read),
``warm`` a request of a running console (each conversation asked only for what is new — one
query each). Wall time and process CPU time per request, medians of interleaved rounds.

    python benchmarks/bench_console.py [--rounds 9] [--conversations 200] [--per 5] [--url postgresql://…]

Without ``--url`` a throw-away PostgreSQL server is started (tests/postgres_server.py).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import os
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import functai
from functai import ai, tool
from functai.testing import ScriptedLM, tool_call

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "bench-console-token-0123456789"
#: The console's session cookie for TOKEN (`functai_console.security`: derived from it, never the token).
SESSION = hmac.new(TOKEN.encode(), b"functai-console-session", hashlib.sha256).hexdigest()


@tool(effects="changes")
def refund(order: str, amount: int) -> str:
    """Refund an amount on an order."""
    return f"refunded {amount} on {order}"


@ai(tools=[refund])
def support(request: str) -> str:
    """Handle the customer's request."""


def fill(url: str, conversations: int, per: int) -> None:
    """``conversations`` conversations of ``per`` waiting turns each."""
    functai.configure(client=ScriptedLM(reply=lambda request: tool_call("refund", {"order": "A1", "amount": 40})))

    def one(number: int) -> None:
        chat = support.conversation(f"ticket-{number}", store=url, approve="changes")
        for _ in range(per):
            try:
                chat.continue_from(None)(f"Refund order A{number}")
            except functai.Waiting:
                pass

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(conversations)))


def schema_url(admin: str) -> str:
    import psycopg

    schema = "console_" + uuid.uuid4().hex[:10]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{admin}{'&' if '?' in admin else '?'}options=-csearch_path%3D{schema}"


def client(url: str) -> Any:
    from functai_console import Console, make_app

    return make_app(Console(url), TOKEN)


async def _request(app: Any, path: str) -> tuple[int, str]:
    """One GET straight into the ASGI app, as a server hands it over (no network, no HTTP parsing)."""
    target, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": target, "raw_path": target.encode(), "root_path": "", "query_string": query.encode(),
             "headers": [(b"host", b"127.0.0.1"), (b"cookie", f"functai_console_80={SESSION}".encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()


def timed(app: Any, path: str, expect: int) -> tuple[float, float]:
    """The server's time for one request: wall and process CPU, from the request to the last byte."""
    wall, cpu = time.perf_counter(), time.process_time()
    status, text = asyncio.run(_request(app, path))
    took = time.perf_counter() - wall, time.process_time() - cpu
    assert status == 200, text[:300]
    found = text.count("<tr data-key=")
    assert found == expect, f"{path} listed {found} approvals, not {expect}"
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--per", type=int, default=5)
    parser.add_argument("--url", help="a PostgreSQL server to make a schema on (default: start one)")
    args = parser.parse_args()
    server = None
    admin = args.url
    if admin is None:
        sys.path.insert(0, os.path.join(HERE, "..", "tests"))
        from postgres_server import Server

        server = Server()
        admin = server.admin
    try:
        import functai_approval

        from functai._hooks import installed  # the approval plugin as pip installs it, in this process

        installed.use(installed.Installed.of([functai_approval.plugin], distribution="functai-approval"))
        url = schema_url(admin)
        start = time.perf_counter()
        fill(url, args.conversations, args.per)
        expect = args.conversations * args.per
        print(f"{expect} waiting turns in {args.conversations} conversations written in "
              f"{time.perf_counter() - start:.1f} s")
        warm = client(url)
        timed(warm, "/", expect)  # the running console has read everything once
        samples: dict[str, list[tuple[float, float]]] = {"cold /": [], "warm /": [], "warm /inbox/rows": []}
        for _ in range(args.rounds):
            samples["cold /"].append(timed(client(url), "/", expect))
            samples["warm /"].append(timed(warm, "/", expect))
            samples["warm /inbox/rows"].append(timed(warm, "/inbox/rows", expect))
        for name, found in samples.items():
            wall = statistics.median(s[0] for s in found) * 1000
            cpu = statistics.median(s[1] for s in found) * 1000
            print(f"{name:<18} {wall:7.1f} ms wall  {cpu:7.1f} ms CPU  (median of {len(found)})")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
