"""The cache tests' stores: each kind by name, PostgreSQL on the tests' own server (tests/store_fixtures.py)."""

from __future__ import annotations

import pathlib
import sys

import pytest

TESTS = str(pathlib.Path(__file__).resolve().parents[3] / "tests")
if TESTS not in sys.path:
    sys.path.append(TESTS)

from store_fixtures import postgres_server, postgres_url  # noqa: E402,F401


@pytest.fixture(params=["memory", "folder", "sqlite", "postgresql"])
def store_name(request, tmp_path):
    if request.param == "memory":
        return "memory:"
    if request.param == "folder":
        return str(tmp_path / "cache")
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "cache.db")
    return request.getfixturevalue("postgres_url")
