"""The budget tests use the shared test helpers in the checkout's tests/ (checkout.py)."""

from __future__ import annotations

import pathlib
import sys

TESTS = str(pathlib.Path(__file__).resolve().parents[3] / "tests")
if TESTS not in sys.path:
    sys.path.append(TESTS)


import pytest  # noqa: E402


@pytest.fixture
def without_genai_prices(monkeypatch):
    """As where genai-prices is not installed: prices come from ``prices=`` and the shipped table."""
    from functai_budget import prices

    monkeypatch.setitem(sys.modules, "genai_prices", None)  # importing it raises ImportError
    monkeypatch.setattr(prices, "_GENAI_PRICES", {})
