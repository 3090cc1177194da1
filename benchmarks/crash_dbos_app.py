"""The program benchmarks/crash_dbos.py runs on DBOS workers: a desk that makes two payments per
turn, each approved by a person, with a payment tool that writes a plain row to a ledger (a
SQLite file, ``$FUNCTAI_CRASH_LEDGER``) keyed by `functai.tool_key` and reconciles from it.

A worker importing it kills itself, with the chance ``$FUNCTAI_CRASH_DIE``, at two points of a
turn: while sending a request (in the model) and inside the tool, right after its effect.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
from typing import Any

import functai
from functai import ai, tool
from functai.testing import ScriptedLM, tool_calls

#: Where a worker kills itself, as the supervisor counts it (a line per kill in this file).
KILLED = "FUNCTAI_CRASH_KILLED"


def _maybe_die(point: str) -> None:
    if random.random() < float(os.environ.get("FUNCTAI_CRASH_DIE") or 0):
        with open(os.environ[KILLED], "a", encoding="utf-8") as seen:  # noqa: PTH123
            seen.write(point + "\n")
            seen.flush()
            os.fsync(seen.fileno())
        os.kill(os.getpid(), signal.SIGKILL)


def _ledger() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["FUNCTAI_CRASH_LEDGER"], timeout=60)
    db.execute("CREATE TABLE IF NOT EXISTS ledger (key TEXT, payment TEXT, amount INTEGER, result TEXT)")
    return db


def settle(key: str, input: dict[str, Any]) -> str | None:
    """What the payment with this key did, from the ledger: its result, or None if it never happened."""
    db = _ledger()
    try:
        row = db.execute("SELECT result FROM ledger WHERE key = ?", (key,)).fetchone()
    finally:
        db.close()
    return None if row is None else str(row[0])


@tool(effects="changes", reconcile=settle)
def pay(payment: str, amount: int) -> str:
    """Make a payment."""
    result = f"paid {amount} for {payment}"
    db = _ledger()
    try:
        with db:  # a plain row: nothing but functai keeps a second one out
            db.execute("INSERT INTO ledger VALUES (?, ?, ?, ?)", (functai.tool_key(), payment, amount, result))
    finally:
        db.close()
    _maybe_die("in the tool, after its effect")
    return result


@ai(tools=[pay], approve="changes")
def desk(request: str) -> str:
    """Make the payments the request asks for."""
    ...


def _reply(request: Any) -> Any:
    """Two payments in one reply, then an answer once both are reported."""
    _maybe_die("while sending")
    last = request.messages[-1]
    if last["role"] == "tool":
        return "done"
    name = last["content"].removeprefix("request: ")
    return tool_calls([("pay", {"payment": f"{name}-a", "amount": 10}),
                       ("pay", {"payment": f"{name}-b", "amount": 20})])


def model() -> ScriptedLM:
    return ScriptedLM(reply=_reply)


functai.configure(client=model())
