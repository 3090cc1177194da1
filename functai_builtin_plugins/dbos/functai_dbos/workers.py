"""Worker leases: which workers are alive, so that a live one moves a dead one's turns.

DBOS keeps a workflow with the executor that took it, and gives it back only to a process that
starts again under the same executor id. A worker that never comes back (a machine scaled
away) would keep its turns forever. So each launched process renews a row of the table
`TABLE`, in DBOS's system database, every sixth of its lease (as functai renews a turn's
lease); once a row is older than the lease, the live worker whose id sorts first asks DBOS to
resume that worker's pending turns, which puts them on a queue any live worker takes from. A
turn's workflow run twice for a while is harmless: it sends its turn under its own id as the
key, so the second run finds the turn already made.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import sqlalchemy as sa

#: The table of worker leases: executor id, and when it was last renewed (seconds since the epoch).
TABLE = "functai_dbos_workers"


def engine(url: str) -> sa.Engine:
    """An engine on the system database (PostgreSQL through psycopg, as DBOS connects)."""
    made = sa.make_url(url)
    if made.drivername == "postgresql":
        made = made.set(drivername="postgresql+psycopg")
    return sa.create_engine(made)


class Leases:
    """This process's worker lease, renewed by a daemon thread, and the sweep of gone workers."""

    def __init__(self, url: str, executor: str, lease: float) -> None:
        self.executor, self.lease = executor, lease
        self._engine = engine(url)
        self._stop = threading.Event()
        with self._engine.begin() as db:
            db.execute(sa.text(f"CREATE TABLE IF NOT EXISTS {TABLE} "
                               "(executor VARCHAR(200) PRIMARY KEY, seen DOUBLE PRECISION NOT NULL)"))
        self.renew()
        self._thread = threading.Thread(target=self._run, name="functai-dbos-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def renew(self) -> None:
        with self._engine.begin() as db:
            found = db.execute(sa.text(f"UPDATE {TABLE} SET seen = :t WHERE executor = :e"),
                               {"t": time.time(), "e": self.executor})
            if not found.rowcount:
                db.execute(sa.text(f"INSERT INTO {TABLE} (executor, seen) VALUES (:e, :t)"),
                           {"t": time.time(), "e": self.executor})

    def sweep(self, workflow: str) -> list[str]:
        """When this worker sorts first among the live ones: resume the pending ``workflow``s of
        every worker that is gone (its lease lapsed, or it has none); their ids."""
        from dbos import DBOS

        now = time.time()
        with self._engine.begin() as db:
            rows = db.execute(sa.text(f"SELECT executor, seen FROM {TABLE}")).all()
        live = sorted(str(executor) for executor, seen in rows if now - float(seen) <= self.lease)
        if not live or live[0] != self.executor:
            return []
        pending = DBOS.list_workflows(status="PENDING", name=workflow, load_input=False, load_output=False)
        moved = [status.workflow_id for status in pending if status.executor_id not in live]
        for workflow_id in moved:
            DBOS.resume_workflow(workflow_id)
        gone = [str(executor) for executor, seen in rows if now - float(seen) > self.lease]
        if gone:
            with self._engine.begin() as db:
                db.execute(sa.text(f"DELETE FROM {TABLE} WHERE executor = :e AND seen < :t"),
                           [{"e": executor, "t": now - self.lease} for executor in gone])
        return moved

    def _run(self) -> None:
        from .workflow import WORKFLOW

        while not self._stop.wait(self.lease / 6):
            try:
                self.renew()
                self.sweep(WORKFLOW)
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
