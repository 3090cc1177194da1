"""The console's tests: an isolated functai with the approval plugin installed, the example program
importable, the core tests' PostgreSQL server (tests/store_fixtures.py), and a real console process."""

from __future__ import annotations

import pathlib
import sys

import functai_approval
import pytest

HERE = pathlib.Path(__file__).resolve().parent
TESTS = str(HERE.parents[2] / "tests")
for folder in (str(HERE), TESTS):
    if folder not in sys.path:
        sys.path.append(folder)

from console_helpers import Server  # noqa: E402
from store_fixtures import postgres_server, postgres_url  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _isolated(functai_isolated, installed_plugins):
    installed_plugins(functai_approval.plugin)
    yield


@pytest.fixture(params=["folder", "sqlite", "postgresql"])
def store(request, tmp_path):
    """The store and call log of a test, of each kind functai opens."""
    if request.param == "folder":
        return str(tmp_path / "store"), str(tmp_path / "calls")
    if request.param == "sqlite":
        url = "sqlite:///" + str(tmp_path / "shop.db")
        return url, url
    url = request.getfixturevalue("postgres_url")
    return url, url


@pytest.fixture
def console_server(tmp_path):
    """Start consoles with ``console_server(STORE, "--log", CALLS, ...)``; each is stopped afterwards."""
    started = []

    def start(*args: str) -> Server:
        server = Server(*args, cwd=tmp_path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
