"""Tool effects exactly once across SIGKILLs, on SQLite and PostgreSQL stores: the harness of
benchmarks/crash_tools.py (which does the full count) with a few kills at each of its four points."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import functai_approval
import pytest
from store_fixtures import store_url

ROOT = pathlib.Path(__file__).resolve().parent.parent
KILLS = 5

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crashes are forked processes")


@pytest.fixture
def crash_tools(install):
    install(functai_approval.plugin)
    spec = importlib.util.spec_from_file_location("crash_tools", ROOT / "benchmarks" / "crash_tools.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_tools"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("crash_tools", None)


@pytest.fixture(params=["sqlite", "postgresql"])
def crash_store(request, tmp_path):
    url = store_url(request.param, tmp_path, request)
    yield request.param, url
    from functai._stores.opening import forget

    forget(url)


def test_every_kill_point_leaves_each_approved_payment_exactly_once(crash_tools, crash_store, tmp_path):
    kind, url = crash_store
    tallies = crash_tools.run(url, kind, str(tmp_path / "ledger.db"), KILLS)
    assert [t.point for t in tallies] == list(crash_tools.POINTS)
    for tally in tallies:
        assert tally.kills == KILLS and tally.unkilled == 0, tally.problems
        assert (tally.duplicates, tally.lost, tally.extra, tally.same_keys) == (0, 0, 0, 0), tally.problems
        assert set(tally.ends) <= {"done", "abandoned"}, tally.problems
    assert sum(sum(t.ends.values()) for t in tallies) == 4 * KILLS
    states = crash_tools.final_states(url, "r", KILLS)  # read again, after the last process ended
    assert sum(states.values()) == 4 * KILLS and set(states) <= {"done", "abandoned"}


def test_the_count_sees_a_payment_made_twice_or_lost(crash_tools, tmp_path):
    """The same harness with a reconcile that knows nothing: it counts what the real one prevents."""
    url = "sqlite:///" + str(tmp_path / "store.db")
    crash_tools.pay.reconcile = lambda key, input: None  # "it had no effect", whatever the ledger says
    twice = crash_tools.run(url, "sqlite", str(tmp_path / "ledger.db"), 3, points=("after-effect",))
    assert twice[0].kills == 3 and twice[0].duplicates == 3 and twice[0].lost == 0
    crash_tools.pay.reconcile = None  # no reconcile: a call started and killed before its effect stays unknown
    lost = crash_tools.run(url, "sqlite", str(tmp_path / "ledger.db"), 3, prefix="n", points=("after-started",))
    assert lost[0].kills == 3 and lost[0].lost == 3 and lost[0].duplicates == 0
