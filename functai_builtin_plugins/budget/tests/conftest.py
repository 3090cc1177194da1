"""The budget tests use the shared test helpers in the checkout's tests/ (checkout.py)."""

from __future__ import annotations

import pathlib
import sys

TESTS = str(pathlib.Path(__file__).resolve().parents[3] / "tests")
if TESTS not in sys.path:
    sys.path.append(TESTS)
