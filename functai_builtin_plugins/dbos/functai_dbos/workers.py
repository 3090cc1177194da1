"""Worker leases: which workers are alive, so that a live one moves a dead one's turns.

DBOS keeps a workflow with the executor that took it, and gives it back only to a process that
starts again under the same executor id. A worker that never comes back (a machine scaled
away) would keep its turns forever. So each launched process renews a row of the table
`TABLE`, in DBOS's system database, every sixth of its lease (as functai renews a turn's
lease); once a row is older than the lease, the live worker whose id sorts first asks DBOS to
resume that worker's pending turns, which puts them on a queue any live worker takes from.

A worker on this machine (same host, same boot, same pid namespace) is judged by its process instead, as functai
judges a turn's owner: gone when its pid is gone or is another process, alive while it runs,
however late its renewal (a busy machine can starve the renewing thread). A turn's workflow run
twice for a while is harmless anyway: it sends its turn under its own id as the key, so the
second run finds the turn already made; an evaluation's row would be asked twice.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import sqlalchemy as sa

#: The table of worker leases: executor id, and when it was last renewed (seconds since the epoch).
TABLE = "functai_dbos_workers"


def _place() -> str:
    """This machine since it booted, and the process-id namespace pids are read in: containers on
    one host share its name and boot, but not their pids."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
    except OSError:
        boot = ""
    try:
        pids = os.readlink("/proc/self/ns/pid")
    except OSError:
        pids = ""
    return f"{socket.gethostname()} {boot} {pids}"


def _started(pid: int) -> str:
    """When the process started, in clock ticks since boot (with its pid it names one process), or ''."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
    except OSError:
        return ""
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else ""  # a zombie is gone


def _runs(pid: int, started: str) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        pass
    return not started or _started(pid) == started


def engine(url: str) -> sa.Engine:
    """An engine on the system database (PostgreSQL through psycopg, as DBOS connects)."""
    made = sa.make_url(url)
    if made.drivername in ("postgresql", "postgres"):
        made = made.set(drivername="postgresql+psycopg")
    return sa.create_engine(made)


class Leases:
    """This process's worker lease, renewed by a daemon thread, and the sweep of gone workers."""

    def __init__(self, url: str, executor: str, lease: float) -> None:
        self.executor, self.lease = executor, lease
        self.place = _place()
        self._engine = engine(url)
        self._stop = threading.Event()
        with self._engine.begin() as db:
            db.execute(sa.text(f"CREATE TABLE IF NOT EXISTS {TABLE} "
                               "(executor VARCHAR(200) PRIMARY KEY, seen DOUBLE PRECISION NOT NULL, "
                               "place VARCHAR(300) NOT NULL, pid INTEGER NOT NULL, started VARCHAR(40) NOT NULL)"))
        self.renew()
        self._thread = threading.Thread(target=self._run, name="functai-dbos-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def renew(self) -> None:
        me = {"t": time.time(), "e": self.executor, "place": self.place, "pid": os.getpid(),
              "started": _started(os.getpid())}
        with self._engine.begin() as db:
            found = db.execute(sa.text(f"UPDATE {TABLE} SET seen = :t, place = :place, pid = :pid, started = :started "
                                       "WHERE executor = :e"), me)
            if not found.rowcount:
                db.execute(sa.text(f"INSERT INTO {TABLE} (executor, seen, place, pid, started) "
                                   "VALUES (:e, :t, :place, :pid, :started)"), me)

    def _alive(self, seen: float, place: str, pid: int, started: str, now: float) -> bool:
        if place == self.place:  # this machine: its process tells
            return _runs(pid, started)
        return now - seen <= self.lease

    def sweep(self, workflows: list[str]) -> list[str]:
        """When this worker sorts first among the live ones: resume the pending workflows (those
        named ``workflows``) of every worker that is gone (its lease lapsed, or it has none), each
        on the queue it came from; their ids."""
        from dbos import DBOS

        now = time.time()
        with self._engine.begin() as db:
            rows = db.execute(sa.text(f"SELECT executor, seen, place, pid, started FROM {TABLE}")).all()
        alive = {str(row[0]): self._alive(float(row[1]), str(row[2]), int(row[3]), str(row[4]), now) for row in rows}
        live = sorted(executor for executor, up in alive.items() if up)
        if not live or live[0] != self.executor:
            return []
        pending = DBOS.list_workflows(status="PENDING", name=workflows, load_input=False, load_output=False)
        moved = [status for status in pending if status.executor_id not in live]
        for status in moved:
            DBOS.resume_workflow(status.workflow_id, queue_name=status.queue_name)
        gone = [executor for executor, up in alive.items() if not up]
        if gone:  # unless it renewed meanwhile (a worker that started again under its id)
            with self._engine.begin() as db:
                db.execute(sa.text(f"DELETE FROM {TABLE} WHERE executor = :e AND seen <= :t"),
                           [{"e": row[0], "t": float(row[1])} for row in rows if str(row[0]) in gone])
        return [status.workflow_id for status in moved]

    def _run(self) -> None:
        from .workflow import ROW, WORKFLOW

        while not self._stop.wait(self.lease / 6):
            try:
                self.renew()
                self.sweep([WORKFLOW, ROW])
            except Exception as error:  # noqa: BLE001  # a database down for a moment: the next round tries again
                _warn(error)

    def stop(self) -> None:
        """Stop renewing and give the lease up: this worker's pending turns move at the next sweep."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._engine.begin() as db:
            db.execute(sa.text(f"DELETE FROM {TABLE} WHERE executor = :e"), {"e": self.executor})
        self._engine.dispose()


def _warn(error: Any) -> None:
    import logging

    logging.getLogger("functai_dbos").warning("worker lease: %s: %s", type(error).__name__, error)
