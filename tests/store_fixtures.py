"""Fixtures that run a test against each durable store: folder, SQLite and PostgreSQL.

``durable_store`` is the store argument a test passes as ``store=`` (and may
pass to another process): a folder path, a ``sqlite:////…`` URL or a
``postgresql://…`` URL naming a fresh schema on the session's server.
"""

from __future__ import annotations

import os
import sqlite3
import warnings

import pytest
from postgres_server import session_server

DURABLE = ["folder", "sqlite", "postgresql"]

_unavailable: list[str] = []


@pytest.fixture(scope="session")
def postgres_server():
    yield from session_server()


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh PostgreSQL schema's URL; skips (loudly) only when no server can be started."""
    if isinstance(postgres_server, str):
        why = f"no PostgreSQL server could be started: {postgres_server}"
        if os.environ.get("FUNCTAI_REQUIRE_POSTGRES"):
            pytest.fail(why + " (FUNCTAI_REQUIRE_POSTGRES is set)")
        if not _unavailable:
            warnings.warn(why, pytest.PytestWarning)
        _unavailable.append(why)
        pytest.skip(why)
    from functai._stores.opening import forget

    url = postgres_server.new_url()
    yield url
    forget(url)


def raw_sql(url):
    """Run SQL on the store's database directly, as another program would."""
    if url.startswith("sqlite:"):
        path = url[len("sqlite:///"):]

        def run(sql):
            with sqlite3.connect(path) as conn:
                return conn.execute(sql).fetchall()
    else:
        import psycopg

        def run(sql):
            with psycopg.connect(url, autocommit=True) as conn:
                cursor = conn.execute(sql)
                return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
    return run


def store_url(kind: str, tmp_path, request) -> str:
    if kind == "folder":
        return str(tmp_path / "store")
    if kind == "sqlite":
        return "sqlite:///" + str(tmp_path / "store.db")
    return request.getfixturevalue("postgres_url")


@pytest.fixture(params=DURABLE)
def durable_store(request, tmp_path):
    """``store=`` for each durable store in turn."""
    url = store_url(request.param, tmp_path, request)
    yield url
    if request.param == "sqlite":
        from functai._stores.opening import forget

        forget(url)


def pytest_terminal_summary(terminalreporter):
    if _unavailable:
        terminalreporter.write_sep("!", f"{len(_unavailable)} PostgreSQL tests SKIPPED: {_unavailable[0]}",
                                   red=True, bold=True)


@pytest.fixture(params=DURABLE)
def durable_log(request, tmp_path):
    """``log_calls=`` for each durable place in turn: a folder, a SQLite file, a PostgreSQL schema."""
    if request.param == "folder":
        yield str(tmp_path / "calls")
        return
    url = "sqlite:///" + str(tmp_path / "calls.db") if request.param == "sqlite" else request.getfixturevalue(
        "postgres_url")
    yield url
    from functai._stores.opening import forget

    forget(url)
