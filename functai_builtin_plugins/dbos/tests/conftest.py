"""functai-dbos's tests: the core tests' PostgreSQL server (tests/store_fixtures.py) and the crash
harness with its program (benchmarks/crash_dbos.py, crash_dbos_app.py) importable. Not this
distribution's folder: it is installed, and its egg-info there would show to every later test
that reads entry points."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
for folder in (str(ROOT / "tests"), str(ROOT / "benchmarks")):
    if folder not in sys.path:
        sys.path.append(folder)

from store_fixtures import postgres_server, postgres_url  # noqa: E402,F401
