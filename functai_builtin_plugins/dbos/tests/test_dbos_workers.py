"""Worker processes: a turn handed out by a process that runs no DBOS (a client), taken by a
worker, and moved to a live worker once its own worker died and its lease lapsed."""

from __future__ import annotations

import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import time

import crash_dbos_app
import functai_approval
import functai_dbos
import pytest
from dbos import DBOS
from functai_dbos.workers import TABLE, engine
from sqlalchemy import text

import functai

BENCHMARKS = str(pathlib.Path(crash_dbos_app.__file__).resolve().parent)


@pytest.fixture
def system(tmp_path, installed_plugins, monkeypatch):
    """DBOS's system database (SQLite), named in FUNCTAI_DBOS_URL for this process; stopped after."""
    installed_plugins(functai_approval.plugin, functai_dbos.plugin)
    url = "sqlite:///" + str(tmp_path / "dbos.db")
    monkeypatch.setenv(functai_dbos.ENV, url)
    monkeypatch.setenv("FUNCTAI_CRASH_LEDGER", str(tmp_path / "ledger.db"))
    yield url
    if functai_dbos._launched:
        functai_dbos.stop()


def worker(url: str, tmp_path: pathlib.Path, executor: str) -> subprocess.Popen[bytes]:
    """``functai worker --runner dbos`` serving crash_dbos_app (which never kills itself here), once it holds its lease."""
    env = {**os.environ, functai_dbos.ENV: url, "DBOS__VMID": executor, "FUNCTAI_DBOS_LEASE": "1",
           "FUNCTAI_LOAD_PLUGINS": "approval,dbos", "FUNCTAI_CRASH_LEDGER": str(tmp_path / "ledger.db"),
           "FUNCTAI_CRASH_KILLED": str(tmp_path / "killed.txt"), "PYTHONPATH": os.pathsep.join([BENCHMARKS, *sys.path])}
    proc = subprocess.Popen([sys.executable, "-m", "functai", "worker", "--runner", "dbos", "--import", "crash_dbos_app"],
                            env=env, stderr=open(tmp_path / f"{executor}.log", "wb"))  # noqa: SIM115
    leases, deadline = engine(url), time.monotonic() + 120
    try:
        while True:
            assert proc.poll() is None, (tmp_path / f"{executor}.log").read_text()
            try:
                with leases.begin() as db:
                    if db.execute(text(f"SELECT count(*) FROM {TABLE} WHERE executor = :e"), {"e": executor}).scalar():
                        return proc
            except Exception:  # noqa: BLE001  # DBOS has not made the database yet
                pass
            assert time.monotonic() < deadline, "the worker never took its lease"
            time.sleep(0.1)
    finally:
        leases.dispose()


def until(handle: functai_dbos.Handle, state: str) -> None:
    deadline = time.monotonic() + 120
    while handle.state() != state:
        assert time.monotonic() < deadline, handle.state()
        time.sleep(0.1)


def approved_to_the_end(handle: functai_dbos.Handle, store: str, name: str) -> object:
    """Approve each payment the turn waits for (one wait each), from this process; the turn's answer."""
    deadline = time.monotonic() + 120
    while handle.state() not in ("done", "failed"):
        assert time.monotonic() < deadline, handle.state()
        turn = functai.Conversation.open(name, store).head
        if turn is not None and turn.state == "waiting" and any(a["key"] not in turn.answers for a in turn.approvals):
            turn.approve(by="ops")  # wakes the workflow through DBOS
        time.sleep(0.1)
    return handle.result(timeout=0)


def paid(tmp_path: pathlib.Path) -> list[str]:
    db = sqlite3.connect(tmp_path / "ledger.db")
    try:
        return sorted(row[0] for row in db.execute("SELECT payment FROM ledger"))
    finally:
        db.close()


def test_a_process_without_dbos_hands_a_turn_to_a_worker(system, tmp_path):
    proc = worker(system, tmp_path, "w1")
    try:
        store = "sqlite:///" + str(tmp_path / "store.db")
        handle = functai_dbos.send(crash_dbos_app.desk.conversation("c1", store=store), {"request": "c1"}, key="c1")
        assert approved_to_the_end(handle, store, "c1") == "done" and paid(tmp_path) == ["c1-a", "c1-b"]
        [status] = functai_dbos._client(system).list_workflows(workflow_ids=[handle.id])
        assert status.executor_id == "w1" and not functai_dbos._launched  # run by the worker, not here
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_workers_waiting_turn_moves_to_a_live_worker_once_its_lease_lapses(system, tmp_path):
    store = "sqlite:///" + str(tmp_path / "store.db")
    first = worker(system, tmp_path, "gone")
    handle = functai_dbos.send(crash_dbos_app.desk.conversation("c2", store=store), {"request": "c2"}, key="c2")
    until(handle, "waiting")
    first.send_signal(signal.SIGKILL)  # never comes back
    first.wait()
    functai.configure(client=crash_dbos_app.model())
    functai_dbos.launch(system, executor="live", lease=1)  # this process is the live worker now
    deadline = time.monotonic() + 60
    while DBOS.list_workflows(workflow_ids=[handle.id])[0].executor_id != "live":  # moved once "gone"'s lease lapsed
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert approved_to_the_end(handle, store, "c2") == "done" and paid(tmp_path) == ["c2-a", "c2-b"]


def test_send_without_dbos_here_needs_a_database_a_worker_has_set_up(tmp_path, installed_plugins, monkeypatch):
    installed_plugins(functai_dbos.plugin)
    chat = crash_dbos_app.desk.conversation("c3", store=str(tmp_path / "store"))
    monkeypatch.delenv(functai_dbos.ENV, raising=False)
    with pytest.raises(functai.FunctAIError) as unnamed:
        functai_dbos.send(chat, {"request": "c3"}, key="c3")
    assert unnamed.value.code == "dbos-not-launched" and functai_dbos.ENV in unnamed.value.message
    monkeypatch.setenv(functai_dbos.ENV, "sqlite:///" + str(tmp_path / "empty.db"))
    with pytest.raises(functai.FunctAIError) as empty:
        functai_dbos.send(chat, {"request": "c3"}, key="c3")
    assert empty.value.code == "dbos-not-set-up"


def test_a_worker_stopped_with_sigterm_exits_cleanly_and_gives_up_its_lease(system, tmp_path):
    proc = worker(system, tmp_path, "leaving")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, (tmp_path / "leaving.log").read_text()
    leases = engine(system)
    try:
        with leases.begin() as db:
            assert db.execute(text(f"SELECT count(*) FROM {TABLE} WHERE executor = 'leaving'")).scalar() == 0
    finally:
        leases.dispose()
