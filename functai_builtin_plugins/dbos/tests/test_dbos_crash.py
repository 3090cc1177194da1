"""Turns on three DBOS worker processes that keep being SIGKILLed — at random moments, right after
an approval, by their own hand while sending and after a tool's effect, and all at once while
turns are answered from the CLI and the console — on SQLite and on PostgreSQL: no payment twice,
none lost, every turn done or abandoned with its code. benchmarks/crash_dbos.py makes the full
count; this runs its harness with fewer kills."""

from __future__ import annotations

import uuid

import crash_dbos
import functai_approval
import functai_dbos
import pytest

KILLS = 16


@pytest.fixture(params=["sqlite", "postgresql"])
def databases(request, tmp_path, installed_plugins):
    """DBOS's system database and the functai store, both of one kind."""
    installed_plugins(functai_approval.plugin, functai_dbos.plugin)  # answers given here wake the workflows
    if request.param == "sqlite":
        return "sqlite", "sqlite:///" + str(tmp_path / "dbos.db"), "sqlite:///" + str(tmp_path / "store.db")
    store = request.getfixturevalue("postgres_url")
    server = request.getfixturevalue("postgres_server")
    return "postgresql", server.url("dbos_" + uuid.uuid4().hex[:12]), store


def test_killed_workers_pay_each_approved_payment_once_and_end_every_turn(databases, tmp_path):
    kind, system, store = databases
    tally = crash_dbos.run(system, store, kind, str(tmp_path), KILLS, quiet_every=6, settle=300)
    assert sum(tally.kills.values()) >= KILLS and tally.quiet >= 1, tally.rows()
    assert (tally.duplicates, tally.lost, tally.extra, tally.lost_turns) == (0, 0, 0, 0), tally.problems
    assert set(tally.ends) <= {"done", "abandoned (turn-answer-late)"} and tally.ends["done"], tally.rows()
    assert {"code", "cli", "console"} <= set(tally.answers), tally.answers
