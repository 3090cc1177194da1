"""Tool effects exactly once across SIGKILLs: a payment tool keyed by `functai.tool_key`, killed
at four points, resumed from another process.

Each round is one conversation turn in which the model asks for two payments in one reply
(``pay(<round>-a)`` and ``pay(<round>-b)``), each of which a person approves (``approve="changes"``:
the turn waits, is answered, is resumed; ``b`` is denied in one round out of four). ``pay`` writes
a plain row — no unique constraint — to a ledger of its own (a SQLite file), keyed by
``functai.tool_key()``; its ``reconcile`` looks that key up there. A process forked for the round
runs the turn and is SIGKILLed at one point of one approved call:

- ``before-started``: just before the ``started`` record of the tool call is written;
- ``after-started``: just after it (the tool has not run);
- ``after-effect``: inside the tool, once its ledger row is committed;
- ``after-result``: just after the tool call's result is recorded.

Another forked process (never the killed one) then opens the conversation and carries the
turn to its end: resumes it while interrupted, answers what it waits for — or, in one round
out of four where it waits, abandons it. The rounds are counted from the ledger, not from
functai's records: a **duplicate** is a row beyond a payment's first, a **lost** payment
one an approved payment of a turn that ended with no row, an
**extra** one a row for a payment that was denied or abandoned before it ran. At the end the
store is opened again and every turn's state counted.

    FUNCTAI_LOAD_PLUGINS=approval python benchmarks/crash_tools.py [--kills 250] [--stores sqlite,postgresql]

PostgreSQL is a throw-away server started from the machine's binaries (tests/postgres_server.py),
or the one ``FUNCTAI_TEST_POSTGRES_URL`` names. Each process is an ``os.fork()`` of this one,
which imported functai once and never opens the store until the end (no connection is shared
across a fork).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Callable, Iterator

import functai
from functai import Waiting, ai, tool
from functai._conversations.scope import TurnScope
from functai.testing import ScriptedLM, tool_calls

POINTS = ("before-started", "after-started", "after-effect", "after-result")

#: The ledger file ``pay`` writes to (set by `run`), and the kill armed in a turn's process: (point, order).
LEDGER: list[str] = []
ARMED: list[tuple[str, str]] = []


def _ledger() -> sqlite3.Connection:
    db = sqlite3.connect(LEDGER[0], timeout=30)
    db.execute("CREATE TABLE IF NOT EXISTS ledger (key TEXT, payment TEXT, amount INTEGER, result TEXT)")
    return db


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


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
    if ARMED and ARMED[0] == ("after-effect", payment):
        _die()
    return result


@ai(tools=[pay])
def desk(request: str) -> str:
    """Make the payments the request asks for."""


def _reply(request: Any) -> Any:
    """Two payments in one reply, then an answer once both are reported."""
    last = request.messages[-1]
    if last["role"] == "tool":
        return "done"
    name = last["content"].removeprefix("request: ")
    return tool_calls([("pay", {"payment": f"{name}-a", "amount": 10}),
                       ("pay", {"payment": f"{name}-b", "amount": 20})])


def model() -> ScriptedLM:
    return ScriptedLM(reply=_reply)


def _arm(point: str, payment: str) -> None:
    """In the turn's process only: SIGKILL it at ``point`` of the tool call for ``payment``."""
    ARMED[:] = [(point, payment)]
    if point == "after-effect":
        return
    hook = "tool_started" if point.endswith("started") else "tool_done"
    original = getattr(TurnScope, hook)

    def killing(self: TurnScope, site: str, entry: Any, *rest: Any, **named: Any) -> None:
        hit = entry.get("name") == "pay" and (entry.get("input") or {}).get("payment") == payment
        if hit and point == "before-started":
            _die()
        original(self, site, entry, *rest, **named)
        if hit:
            _die()

    setattr(TurnScope, hook, killing)


def _answer(turn: Any, deny: str) -> None:
    for approval in turn.approvals:
        if approval["key"] in turn.answers:
            continue
        if approval["input"]["payment"] == deny:
            turn.deny(approval["key"], reason="not this one", by="crash test")
        else:
            turn.approve(approval["key"], by="crash test")


def _turn_process(store: str, name: str, point: str, target: str, deny: str) -> None:
    """The killed process: send the turn, answer each approval, resume, until killed."""
    functai.configure(client=model())
    _arm(point, target)
    chat = desk.conversation(name, store=store, approve="changes")
    try:
        chat(name)
        return
    except Waiting as waiting:
        turn = waiting.turn
    while True:
        _answer(turn, deny)
        try:
            turn.resume()
            return
        except Waiting as waiting:
            turn = waiting.turn


def _resume_process(store: str, name: str, deny: str, abandon: bool) -> dict[str, Any]:
    """Another process: carry the turn to its end; its state, and whether it was abandoned."""
    functai.configure(client=model())
    chat = desk.conversation(name, store=store, approve="changes")
    abandoned = False
    for _ in range(8):
        turn = chat.all_turns()[-1]
        if turn.state not in ("waiting", "interrupted", "running"):
            break
        if turn.state == "waiting":
            if abandon:
                turn.abandon(reason="given up after the crash", by="crash test")
                abandoned = True
                continue
            _answer(turn, deny)
        try:
            turn.resume()
        except Waiting:
            pass
    final = chat.all_turns()[-1]
    return {"turn": final.id, "state": final.state, "abandoned": abandoned, "why": final.why}


def _forked(work: Callable[[], Any]) -> tuple[int, Any]:
    """Run ``work`` in a forked process: its wait status, and what it returned (JSON), if it returned."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            os.close(read_end)
            out = work()
            os.write(write_end, json.dumps(out).encode())
        except BaseException as error:  # noqa: BLE001  # the child never returns into the parent's code
            os.write(write_end, json.dumps({"error": f"{type(error).__name__}: {error}"}).encode())
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode()
    return status, (json.loads(text) if text else None)


class Tally:
    """One store and point: kills, duplicates, lost and extra payments, and how the turns ended."""

    def __init__(self, store: str, point: str) -> None:
        self.store, self.point = store, point
        self.kills = self.unkilled = self.duplicates = self.lost = self.extra = self.same_keys = 0
        self.ends: Counter[str] = Counter()
        self.problems: list[str] = []

    def row(self) -> str:
        ends = ", ".join(f"{state} {n}" for state, n in sorted(self.ends.items()))
        return (f"| {self.store} | {self.point} | {self.kills} | {self.duplicates} | {self.lost} | {self.extra} "
                f"| {ends} |")

    @property
    def clean(self) -> bool:
        return (not self.unkilled and not self.duplicates and not self.lost and not self.extra and not self.same_keys
                and set(self.ends) <= {"done", "abandoned"})


def _rows(name: str) -> list[tuple[str, str]]:
    db = _ledger()
    try:
        return [(str(k), str(p)) for k, p in
                db.execute("SELECT key, payment FROM ledger WHERE payment LIKE ?", (name + "-%",)).fetchall()]
    finally:
        db.close()


def rounds(store: str, label: str, point: str, kills: int, rng: random.Random, prefix: str) -> Tally:
    """``kills`` rounds killed at ``point`` on ``store``, each resumed from another process."""
    tally = Tally(label, point)
    for n in range(kills):
        name = f"{prefix}-{point}-{n}"
        deny = f"{name}-b" if rng.random() < 0.25 else ""
        target = f"{name}-a" if deny or rng.random() < 0.5 else f"{name}-b"  # a denied payment never runs
        abandon = rng.random() < 0.25
        status, _ = _forked(functools.partial(_turn_process, store, name, point, target, deny))
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            tally.kills += 1
        else:
            tally.unkilled += 1
            tally.problems.append(f"{name}: the turn's process was not killed (status {status})")
        status, ended = _forked(functools.partial(_resume_process, store, name, deny, abandon))
        if not ended or "error" in ended:
            tally.ends["error"] += 1
            tally.problems.append(f"{name}: resuming failed: {ended}")
            continue
        tally.ends[ended["state"]] += 1
        rows = _rows(name)
        per_payment = Counter(payment for _, payment in rows)
        per_key = {key for key, _ in rows}
        tally.duplicates += sum(c - 1 for c in per_payment.values())  # effects beyond the first
        if len(per_key) < len(per_payment):  # two payments under one key: the keys do not tell calls apart
            tally.same_keys += 1
            tally.problems.append(f"{name}: two payments under one key: {rows}")
        expected = {f"{name}-a"} | ({f"{name}-b"} if not deny and not ended["abandoned"] else set())
        if ended["state"] == "done" or ended["abandoned"]:
            tally.lost += len(expected - set(per_payment))
        tally.extra += len(set(per_payment) - expected)
        if any(c != 1 for c in per_payment.values()) or expected != set(per_payment):
            tally.problems.append(f"{name}: ledger {rows}, expected {sorted(expected)}, ended {ended}")
    return tally


def final_states(store: str, prefix: str, count: int) -> Counter[str]:
    """Every round's turn state, read again at the end (after the last fork)."""
    from functai._stores.opening import forget

    functai.configure(client=model())
    states: Counter[str] = Counter()
    for point in POINTS:
        for n in range(count):
            for turn in desk.conversation(f"{prefix}-{point}-{n}", store=store).all_turns():
                states[turn.state] += 1
    forget(store)  # its connection closed: a later fork shares none
    return states


def run(store: str, label: str, ledger: str, kills: int, seed: int = 23, prefix: str = "r",
        points: tuple[str, ...] = POINTS) -> list[Tally]:
    """Each point on one store: a `Tally` each (this process never opens the store meanwhile)."""
    LEDGER[:] = [ledger]
    rng = random.Random(seed)
    return [rounds(store, label, point, kills, rng, prefix) for point in points]


def _stores(names: list[str], work: str) -> Iterator[tuple[str, str, Any]]:
    for name in names:
        if name == "sqlite":
            yield name, "sqlite:///" + os.path.join(work, "store.db"), None
        elif name == "postgresql":
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
            from postgres_server import Server

            server = Server()
            try:
                yield name, server.new_url(), server
            finally:
                server.stop()
        else:
            raise SystemExit(f"--stores takes sqlite and postgresql, not {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=250, help="kills per point per store (default 250)")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    if os.environ.get("FUNCTAI_LOAD_PLUGINS") is None:
        os.environ["FUNCTAI_LOAD_PLUGINS"] = "approval"  # the approval plugin, and no other installed one
    print("command: FUNCTAI_LOAD_PLUGINS=approval python benchmarks/crash_tools.py "
          f"--kills {args.kills} --stores {args.stores} --seed {args.seed}")
    print("| store | point | kills | duplicates | lost | extra | end states |")
    print("|---|---|---|---|---|---|---|")
    clean = True
    with tempfile.TemporaryDirectory(prefix="functai-crash-") as work:
        for label, url, _server in _stores(args.stores.split(","), work):
            started = time.perf_counter()
            tallies = run(url, label, os.path.join(work, f"ledger-{label}.db"), args.kills, args.seed)
            for tally in tallies:
                print(tally.row(), flush=True)
                for problem in tally.problems[:5]:
                    print("   ", problem)
                clean = clean and tally.clean
            states = final_states(url, "r", args.kills)
            clean = clean and set(states) <= {"done", "abandoned"}
            print(f"  {label}: every turn read again at the end: {dict(states)}; "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
