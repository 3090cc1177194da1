"""Turns on DBOS workers that keep being SIGKILLed: no payment made twice, none lost, every turn ended.

Three worker processes (``functai worker --runner dbos --import crash_dbos_app``, executor ids
``slot-0`` to ``slot-2``) serve turns of ``crash_dbos_app.desk``, which this process hands out
through a DBOS client (``functai_dbos.send`` without a launch here). Each turn asks for two
payments, each approved by a person (one second payment in four denied); one turn in five is
sent with ``answer_within`` and never answered, and must end abandoned (``turn-answer-late``).

The workers die:

- by SIGKILL from here, at random moments (a turn sending, in its tool, waiting) and right
  after an approval;
- by their own hand (crash_dbos_app, ``$FUNCTAI_CRASH_DIE``): while sending a request, and
  inside the tool right after its effect;
- all at once every ``--quiet-every`` kills: while no worker runs, the waiting turns are
  answered from ``functai approve`` and from the console's inbox, then the workers start again.

A killed worker starts again under its id after a moment (DBOS gives it its turns back). The
answers come from this process's code, from ``functai approve`` (a process of its own, which
resumes the turn itself) and from the console (its app, in this process). The count is the
ledger's, not functai's records: a **duplicate** is a payment's row beyond its first, a
**lost** payment an approved payment of a turn that ended done without a row, an **extra** one
a row for a denied payment or for a turn abandoned; a **lost turn** one that never ended.

    python benchmarks/crash_dbos.py [--kills 200] [--stores sqlite,postgresql]

Both the functai store and DBOS's system database are of the store kind: SQLite files, or two
databases of a throw-away PostgreSQL server (tests/postgres_server.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = 3


class Tally:
    """One store kind: kills by kind, and what the ledger and the turns' ends say."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.kills: Counter[str] = Counter()
        self.answers: Counter[str] = Counter()
        self.ends: Counter[str] = Counter()
        self.duplicates = self.lost = self.extra = self.lost_turns = self.quiet = 0
        self.problems: list[str] = []
        self.seconds = 0.0

    @property
    def clean(self) -> bool:
        return not (self.duplicates or self.lost or self.extra or self.lost_turns) and set(self.ends) <= {
            "done", "abandoned (turn-answer-late)"}

    def rows(self) -> list[str]:
        kills = ", ".join(f"{kind} {n}" for kind, n in sorted(self.kills.items()))
        ends = ", ".join(f"{state} {n}" for state, n in sorted(self.ends.items()))
        answers = ", ".join(f"{way} {n}" for way, n in sorted(self.answers.items()))
        return [f"| {self.store} | {sum(self.kills.values())} | {sum(self.ends.values())} | {self.duplicates} | "
                f"{self.lost} | {self.extra} | {self.lost_turns} | {ends} |",
                f"  kills: {kills}", f"  answers: {answers} ({self.quiet} times with every worker down)",
                f"  {self.seconds:.0f} s"]


class Workers:
    """The worker processes, each started again under its slot's executor id after it dies."""

    def __init__(self, env: dict[str, str], rng: random.Random, tally: Tally, killed_file: str, log: Any) -> None:
        self.env, self.rng, self.tally, self.killed_file, self.log = env, rng, tally, killed_file, log
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * WORKERS
        self.due: list[float] = [0.0] * WORKERS  # when a dead slot starts again
        self.ours: set[int] = set()  # pids this process killed
        self.seen_self = 0

    def start(self, slot: int) -> None:
        self.procs[slot] = subprocess.Popen(
            [sys.executable, "-m", "functai", "worker", "--runner", "dbos", "--import", "crash_dbos_app"],
            env={**self.env, "DBOS__VMID": f"slot-{slot}"}, stdout=subprocess.DEVNULL, stderr=self.log)

    def tend(self, quiet: bool = False) -> None:
        """Note who died by its own hand; start again the slots whose moment has come."""
        for slot, proc in enumerate(self.procs):
            if proc is not None and proc.poll() is not None:
                if proc.pid not in self.ours and proc.returncode != -signal.SIGKILL:
                    self.tally.problems.append(f"worker slot-{slot} exited {proc.returncode}")
                self.procs[slot] = None
                self.due[slot] = time.monotonic() + self.rng.uniform(0.0, 1.0)
            if self.procs[slot] is None and not quiet and time.monotonic() >= self.due[slot]:
                self.start(slot)
        with open(self.killed_file, encoding="utf-8") as seen:
            points = seen.read().split("\n")[:-1]
        for point in points[self.seen_self:]:
            self.tally.kills[f"by itself {point}"] += 1
        self.seen_self = len(points)

    def kill(self, why: str, slot: int | None = None) -> None:
        alive = [n for n, proc in enumerate(self.procs) if proc is not None and proc.poll() is None]
        if slot is None and alive:
            slot = self.rng.choice(alive)
        if slot is None or slot not in alive:
            return
        proc = self.procs[slot]
        assert proc is not None
        self.ours.add(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.tally.kills[why] += 1

    def kill_all(self, why: str) -> None:
        for slot in range(WORKERS):
            self.kill(why, slot)
        self.tend(quiet=True)

    def stop(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()


def _ledger_rows(ledger: str) -> list[tuple[str, str]]:
    db = sqlite3.connect(ledger, timeout=60)
    try:
        db.execute("CREATE TABLE IF NOT EXISTS ledger (key TEXT, payment TEXT, amount INTEGER, result TEXT)")
        return [(str(k), str(p)) for k, p in db.execute("SELECT key, payment FROM ledger").fetchall()]
    finally:
        db.close()


class Sent:
    def __init__(self, name: str, handle: Any, deny: bool, late: bool) -> None:
        self.name, self.handle, self.deny, self.late = name, handle, deny, late


def _answer(sent: Sent, store: str, way: str, env: dict[str, str], console: Any, tally: Tally) -> bool:
    """Answer ``sent``'s waiting turn, all its approvals, ``way``: code, cli or console; whether it was waiting."""
    import functai

    turn = functai.Conversation.open(sent.name, store).head
    if turn is None or turn.state != "waiting":
        return False
    open_ = [a for a in turn.approvals if a["key"] not in turn.answers]
    if not open_:
        return False
    denied = [a["key"] for a in open_ if sent.deny and a["input"]["payment"].endswith("-b")]
    if way == "code":
        for approval in open_:
            if approval["key"] in denied:
                turn.deny(approval["key"], reason="not this one", by="code")
            else:
                turn.approve(approval["key"], by="code")
    elif way == "cli":
        base = [sys.executable, "-m", "functai", "approve", store, sent.name, "--by", "cli"]
        for key in denied:
            subprocess.run([*base, "--key", key, "--deny", "not this one"], env=env, capture_output=True, timeout=300)
        subprocess.run(base, env=env, capture_output=True, timeout=300)  # answers the rest and resumes the turn
    else:
        from functai_console.security import csrf_token

        for approval in open_:
            action = "deny" if approval["key"] in denied else "approve"
            page = console.post("/inbox/answer", data={
                "csrf": csrf_token(TOKEN), "conversation": sent.name, "turn": turn.id, "key": approval["key"],
                "by": "console", "action": action, "reason": "not this one"})
            assert page.status_code == 303, page.text
    tally.answers[way] += 1
    return True


TOKEN = "crash-" + os.urandom(8).hex()


def run(system: str, store: str, label: str, work: str, kills: int, seed: int = 7, quiet_every: int = 25,
        die: float = 0.06, settle: float = 600.0) -> Tally:
    """Turns on 3 workers until ``kills`` kills have been made, then until every turn ended."""
    import functai_dbos

    rng = random.Random(seed)
    tally = Tally(label)
    ledger, killed = os.path.join(work, f"ledger-{label}.db"), os.path.join(work, f"killed-{label}.txt")
    open(killed, "w").close()  # noqa: SIM115
    env = {**os.environ, functai_dbos.ENV: system, "FUNCTAI_CRASH_LEDGER": ledger, "FUNCTAI_CRASH_KILLED": killed,
           "FUNCTAI_LOAD_PLUGINS": "approval,dbos", "PYTHONPATH": os.pathsep.join([HERE, *sys.path])}
    was = os.environ.get(functai_dbos.ENV)
    os.environ[functai_dbos.ENV] = system  # turns handed to the workers, answers wake them: through this database
    try:
        return _run(env, store, label, kills, rng, tally, work, ledger, killed, quiet_every, die, settle)
    finally:
        if was is None:
            del os.environ[functai_dbos.ENV]
        else:
            os.environ[functai_dbos.ENV] = was


def _run(env: dict[str, str], store: str, label: str, kills: int, rng: random.Random, tally: Tally, work: str,
         ledger: str, killed: str, quiet_every: int, die: float, settle: float) -> Tally:
    import functai_dbos
    import sqlalchemy
    from functai_console import Console, make_app
    from functai_dbos.workers import TABLE, engine
    from starlette.testclient import TestClient

    import functai

    os.environ["FUNCTAI_CRASH_LEDGER"] = ledger  # crash_dbos_app's settle, when this process resumes a turn
    sys.path.insert(0, HERE)
    import crash_dbos_app

    console = TestClient(make_app(Console(store), TOKEN), follow_redirects=False)
    console.get(f"/?token={TOKEN}")
    started = time.monotonic()
    with open(os.path.join(work, f"workers-{label}.log"), "wb") as log:
        workers = Workers({**env, "FUNCTAI_CRASH_DIE": str(die)}, rng, tally, killed, log)
        for slot in range(WORKERS):
            workers.start(slot)
        leases = engine(env[functai_dbos.ENV])
        while True:  # until every worker has launched (DBOS has made its tables) and holds its lease
            with contextlib.suppress(Exception), leases.begin() as db:
                if db.execute(sqlalchemy.text(f"SELECT count(*) FROM {TABLE}")).scalar() == WORKERS:
                    break
            time.sleep(0.2)
        leases.dispose()
        pending: list[Sent] = []
        ended: list[Sent] = []
        n, next_kill, next_quiet = 0, time.monotonic() + 1.0, quiet_every
        # The ways answers come, in turn (each in turn when every worker is down).
        ways, down_ways = deque(["code", "cli", "code", "console"]), deque(["cli", "console"])
        deadline: float | None = None
        try:
            while pending or sum(tally.kills.values()) < kills:
                total = sum(tally.kills.values())
                if total < kills and len(pending) < 6:
                    name = f"{label}-{n}"
                    n += 1
                    sent = Sent(name, None, deny=rng.random() < 0.25, late=rng.random() < 0.2)
                    chat = crash_dbos_app.desk.conversation(name, store=store)
                    sent.handle = functai_dbos.send(chat, {"request": name}, key=name,
                                                    answer_within=4.0 if sent.late else None)
                    pending.append(sent)
                if total >= kills and deadline is None:
                    deadline = time.monotonic() + settle
                if deadline is not None and time.monotonic() > deadline:
                    break
                if total >= next_quiet and total < kills:  # every worker down: answers from the CLI and the console
                    next_quiet += quiet_every
                    workers.kill_all("all at once, turns answered meanwhile")
                    tally.quiet += 1
                    for sent in pending:
                        if not sent.late and _answer(sent, store, down_ways[0], env, console, tally):
                            down_ways.rotate(-1)
                workers.tend()
                for sent in list(pending):
                    state = sent.handle.state()
                    if state in ("done", "failed"):
                        pending.remove(sent)
                        ended.append(sent)
                    elif state == "waiting" and not sent.late and rng.random() < 0.5:
                        if _answer(sent, store, ways[0], env, console, tally):
                            ways.rotate(-1)
                            if total < kills and rng.random() < 0.3:
                                workers.kill("right after an approval")
                if total < kills and time.monotonic() >= next_kill:
                    workers.kill("at a random moment")
                    next_kill = time.monotonic() + rng.uniform(0.3, 1.5)
                time.sleep(0.05)
        finally:
            workers.stop()
    tally.seconds = time.monotonic() - started
    tally.lost_turns = len(pending)
    tally.problems += [f"{sent.name}: never ended ({sent.handle.state()})" for sent in pending]
    rows = _ledger_rows(ledger)
    per_payment = Counter(payment for _, payment in rows)
    tally.duplicates = sum(c - 1 for c in per_payment.values())
    for sent in ended:
        try:
            assert sent.handle.result(timeout=0) == "done"
            end = "done"
        except functai.FunctAIError as error:
            end = f"abandoned ({error.code})" if error.code == "turn-answer-late" else f"failed ({error.code})"
        tally.ends[end] += 1
        made = {p for p in per_payment if p.rsplit("-", 1)[0] == sent.name}
        expected = {f"{sent.name}-a"} | (set() if sent.deny else {f"{sent.name}-b"}) if end == "done" else set()
        if end == "done" and not sent.late:
            tally.lost += len(expected - made)
        tally.extra += len(made - expected)
        if made != expected or end != "done" and not sent.late:
            tally.problems.append(f"{sent.name}: ended {end}, paid {sorted(made)}, expected {sorted(expected)}")
    return tally


def _stores(names: list[str], work: str) -> Iterator[tuple[str, str, str]]:
    for name in names:
        if name == "sqlite":
            yield name, "sqlite:///" + os.path.join(work, "dbos.db"), "sqlite:///" + os.path.join(work, "store.db")
        elif name == "postgresql":
            sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
            from postgres_server import Server

            server = Server()
            try:
                yield name, server.url("functai_dbos_system"), server.new_url()
            finally:
                server.stop()
        else:
            raise SystemExit(f"--stores takes sqlite and postgresql, not {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="kills per store kind (default 200)")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"command: python benchmarks/crash_dbos.py --kills {args.kills} --stores {args.stores} --seed {args.seed}")
    print("| store | kills | turns | duplicates | lost | extra | lost turns | ends |")
    print("|---|---|---|---|---|---|---|---|")
    clean = True
    os.environ["FUNCTAI_LOAD_PLUGINS"] = "approval,dbos"  # here too: answers given here wake the workflows
    with tempfile.TemporaryDirectory(prefix="functai-crash-dbos-") as work:
        for label, system, store in _stores(args.stores.split(","), work):
            tally = run(system, store, label, work, args.kills, args.seed)
            print("\n".join(tally.rows()), flush=True)
            for problem in tally.problems[:10]:
                print("   ", problem)
            clean = clean and tally.clean
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
