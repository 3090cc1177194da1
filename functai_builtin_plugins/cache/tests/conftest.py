"""The cache tests' stores: each kind by name, PostgreSQL on the tests' own server (tests/postgres_server.py)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import warnings

import pytest

TESTS = pathlib.Path(__file__).resolve().parents[3] / "tests"


def _postgres_server_module():
    spec = importlib.util.spec_from_file_location("functai_cache_postgres_server", TESTS / "postgres_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def postgres_server():
    yield from _postgres_server_module().session_server()


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh schema's URL on the tests' PostgreSQL server (as tests/store_fixtures.py gives)."""
    if isinstance(postgres_server, str):
        why = f"no PostgreSQL server could be started: {postgres_server}"
        if os.environ.get("FUNCTAI_REQUIRE_POSTGRES"):
            pytest.fail(why + " (FUNCTAI_REQUIRE_POSTGRES is set)")
        warnings.warn(why, pytest.PytestWarning)
        pytest.skip(why)
    return postgres_server.new_url()


@pytest.fixture(params=["memory", "folder", "sqlite", "postgresql"])
def store_name(request, tmp_path):
    if request.param == "memory":
        return "memory:"
    if request.param == "folder":
        return str(tmp_path / "cache")
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "cache.db")
    return request.getfixturevalue("postgres_url")
