"""The console's tests: an isolated functai with the approval plugin installed, the example program
importable, the core tests' PostgreSQL server (tests/store_fixtures.py), and a real console process."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

import functai_approval
import pytest

HERE = pathlib.Path(__file__).resolve().parent
TESTS = str(HERE.parents[2] / "tests")
for folder in (str(HERE), TESTS):
    if folder not in sys.path:
        sys.path.append(folder)

from store_fixtures import postgres_server, postgres_url  # noqa: E402,F401

TOKEN = "console-test-token-0123456789"


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


def environment(**more: str) -> dict[str, str]:
    """What a child process needs: the example modules importable, no FUNCTAI_* settings of the developer's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(more)
    return env


class Server:
    """``functai console`` in its own process; ``url`` is the address it printed (with the token)."""

    def __init__(self, *args: str, cwd: pathlib.Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "functai", "console", *args], cwd=cwd,
                                        env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError("the console exited: " + "".join(lines) + self.process.stderr.read())
            lines.append(line)
            found = re.search(r"open: (http://\S+)", line)
            if found:
                self.url = found.group(1)
                self.base = self.url.split("/?")[0]
                return
        raise AssertionError("the console printed no address: " + "".join(lines))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


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
