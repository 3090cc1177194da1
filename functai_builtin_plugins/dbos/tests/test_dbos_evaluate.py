"""``functai evaluate --runner dbos``: rows spread over worker processes through a DBOS queue of
the evaluation's own, with its concurrency and rate; a killed worker's rows in flight are asked
again by the others, rows already asked never."""

from __future__ import annotations

import io
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import eval_app
import functai_dbos
import pytest
from functai_dbos.workers import TABLE, engine
from sqlalchemy import text

import functai
from functai._cli import main

HERE = pathlib.Path(__file__).resolve().parent


def rated_log(folder: pathlib.Path, count: int) -> str:
    """A call log of ``count`` calls of eval_app.capital, each rated: good, but every tenth corrected
    to an answer the function does not give."""
    log = str(folder)
    functai.configure(client=eval_app.model(), log_calls=log)
    for n in range(count):
        eval_app.capital(f"country-{n}")
    for n, record in enumerate(functai.read_calls(log)):
        if n % 10 == 9:
            functai.rate(record.id, good=False, correction="not that city", log=log)
        else:
            functai.rate(record.id, good=True, log=log)
    functai.configure(log_calls=None)
    return log


def workers(url: str, tmp_path: pathlib.Path, count: int) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, functai_dbos.ENV: url, "FUNCTAI_DBOS_LEASE": "2", "FUNCTAI_LOAD_PLUGINS": "",
           "FUNCTAI_EVAL_ASKS": str(tmp_path / "asks.txt"), "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    procs = [subprocess.Popen([sys.executable, "-m", "functai", "worker", "--runner", "dbos", "--import", "eval_app"],
                              env={**env, "DBOS__VMID": f"w{n}"}, stderr=open(tmp_path / f"w{n}.log", "wb"))  # noqa: SIM115
             for n in range(count)]
    leases, deadline = engine(url), time.monotonic() + 120
    try:
        while True:  # until each holds its lease
            with leases.begin() as db:
                try:
                    if db.execute(text(f"SELECT count(*) FROM {TABLE}")).scalar() == count:
                        return procs
                except Exception:  # noqa: BLE001  # no table yet
                    pass
            assert all(proc.poll() is None for proc in procs) and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        leases.dispose()


def asks(tmp_path: pathlib.Path) -> list[tuple[str, float, str]]:
    """Each ask of a row: its country, when, and by which worker."""
    if not (tmp_path / "asks.txt").exists():
        return []
    lines = (tmp_path / "asks.txt").read_text().splitlines()
    return [(country, float(at), worker) for country, at, worker in (line.split() for line in lines)]


@pytest.fixture
def system(tmp_path, functai_isolated, monkeypatch):
    url = "sqlite:///" + str(tmp_path / "dbos.db")
    monkeypatch.setenv(functai_dbos.ENV, url)
    monkeypatch.syspath_prepend(str(HERE))
    yield url
    functai_dbos._clients.clear()


def evaluate(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["evaluate", "eval_app:capital", *argv], out=out, err=err), out.getvalue(), err.getvalue()


def test_a_thousand_rows_on_three_workers_one_killed_midway_each_row_once(system, tmp_path):
    log = rated_log(tmp_path / "calls", 1000)
    procs = workers(system, tmp_path, 3)
    outcome: list[tuple[int, str, str]] = []
    try:
        thread = threading.Thread(target=lambda: outcome.append(
            evaluate("--log", log, "--runner", "dbos", "--workers", "64", "--rate", "60000/min")))
        thread.start()
        while len(asks(tmp_path)) < 300:
            assert thread.is_alive(), outcome
            time.sleep(0.05)
        procs[0].send_signal(signal.SIGKILL)  # never comes back: its rows move once it is known gone
        procs[0].wait()
        killed = time.time()
        thread.join(timeout=600)
        assert not thread.is_alive()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    status, out, err = outcome[0]
    assert status == 0, err
    assert "score 0.900" in out and "1000 rows" in out
    asked: dict[str, list[tuple[float, str]]] = {}
    for country, at, worker in sorted(asks(tmp_path), key=lambda ask: ask[1]):
        asked.setdefault(country, []).append((at, worker))
    assert set(asked) == {f"country-{n}" for n in range(1000)}  # every row asked
    twice = {country: times for country, times in asked.items() if len(times) > 1}
    # Asked again only where the killed worker was asking it: first by w0 before it died, then by another.
    assert all(len(times) == 2 and times[0][1] == "w0" and times[0][0] <= killed and times[1][1] != "w0"
               for times in twice.values()), twice
    assert len(twice) <= 64  # at most the rows asked at once (--workers)


def test_the_queue_holds_rows_to_the_rate_asked(system, tmp_path, monkeypatch):
    import functai_dbos.rows

    monkeypatch.setattr(functai_dbos.rows, "IDLE", 2.0)  # a worker takes a row sooner: nothing to say
    log = rated_log(tmp_path / "calls", 20)
    procs = workers(system, tmp_path, 1)
    try:
        status, out, err = evaluate("--log", log, "--runner", "dbos", "--rate", "5/s")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert status == 0 and "score 0.900" in out and "no worker" not in err, err
    times = sorted(at for _, at, _ in asks(tmp_path))
    # 5 a second: the last five start 3 s after the first five, which a worker just started may ask late.
    assert len(times) == 20 and times[-1] - times[0] >= 1.5, times


def test_a_row_cancelled_in_dbos_ends_the_evaluation_with_a_code_rather_than_a_wait_forever(system, tmp_path):
    from functai_dbos.workflow import ROW

    log = rated_log(tmp_path / "calls", 6)
    procs = workers(system, tmp_path, 1)
    client = functai_dbos._client(system)
    cancelled: list[str] = []

    def cancel_one() -> None:
        deadline = time.monotonic() + 60
        while not cancelled and time.monotonic() < deadline:
            waiting = client.list_workflows(name=ROW, status=["ENQUEUED"], load_input=False, load_output=False)
            if waiting:
                client.cancel_workflow(waiting[-1].workflow_id)
                cancelled.append(waiting[-1].workflow_id)
            time.sleep(0.05)

    canceller = threading.Thread(target=cancel_one)
    canceller.start()
    outcome: list[tuple[int, str, str]] = []
    evaluation = threading.Thread(target=lambda: outcome.append(
        evaluate("--log", log, "--runner", "dbos", "--rate", "1/s")), daemon=True)
    try:
        evaluation.start()
        evaluation.join(timeout=120)  # a cancelled row must not leave it waiting for ever
        canceller.join()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert outcome, "the evaluation still waits for a row DBOS cancelled"
    status, _, err = outcome[0]
    assert cancelled and status == 1 and "dbos-row-failed" in err and cancelled[0] in err, (status, err)


def test_an_evaluation_given_up_midway_cancels_the_rows_not_yet_asked(system, tmp_path, monkeypatch):
    import functai_dbos.rows
    from functai_dbos.workflow import ROW

    log = rated_log(tmp_path / "calls", 6)
    with pytest.raises(functai.FunctAIError) as fresh:  # no worker ever started on it: no DBOS tables
        functai_dbos.Runner().evaluate(eval_app.capital, log=log, workers=None, progress_to=None)
    assert fresh.value.code == "dbos-not-set-up"
    for proc in workers(system, tmp_path, 1):  # one starts (making the tables) and is gone
        proc.kill()
        proc.wait()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as Ctrl-C while the rows wait on the queue

    monkeypatch.setattr(functai_dbos.rows, "_await", interrupted)
    with pytest.raises(KeyboardInterrupt):  # no worker runs: every row is still on the queue
        functai_dbos.Runner().evaluate(eval_app.capital, log=log, workers=None, progress_to=None)
    rows = functai_dbos._client(system).list_workflows(name=ROW, load_input=False, load_output=False)
    assert len(rows) == 6 and {row.status for row in rows} == {"CANCELLED"}


@pytest.mark.parametrize("told", ["on the error stream", "as a log event"])
def test_an_evaluation_no_worker_takes_says_so_once_and_waits_on(system, tmp_path, monkeypatch, told):
    """A worker started on the system database once and is gone: the rows wait on the queue, and
    after IDLE seconds the evaluation says how to start one (then Ctrl-C here gives it up)."""
    import logging

    import functai_dbos.rows

    log = rated_log(tmp_path / "calls", 3)
    for proc in workers(system, tmp_path, 1):
        proc.kill()
        proc.wait()
    monkeypatch.setattr(functai_dbos.rows, "IDLE", 0.5)
    said: list[str] = []
    started = time.monotonic()

    def heard(text: str) -> None:
        said.append(text)
        if "no worker" in text:
            raise KeyboardInterrupt  # the person read it and gives up

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            heard(text)
            return len(text)

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            heard(record.getMessage())

    handler = Handler(logging.WARNING)
    logging.getLogger("functai_dbos").addHandler(handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            functai_dbos.Runner().evaluate(eval_app.capital, log=log, workers=None,
                                           progress_to=Stream() if told == "on the error stream" else None)
    finally:
        logging.getLogger("functai_dbos").removeHandler(handler)
    notice = [text for text in said if "no worker" in text]
    assert len(notice) == 1 and time.monotonic() - started >= 0.5
    assert "functai worker --runner dbos --import eval_app" in notice[0] and "0.5 s" in notice[0]
