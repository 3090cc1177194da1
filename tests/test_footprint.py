"""What installing functai brings into a fresh venv stays small: at most 20 distributions and 15 MiB."""

import pathlib
import sys

import pytest

pytestmark = pytest.mark.venv  # slow: `python -m pytest -m "not venv"` leaves these out

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
from footprint import footprint  # noqa: E402


def test_installing_functai_brings_at_most_20_distributions_and_15_mib():
    found = footprint()
    assert "functai" in found
    assert len(found) <= 20, sorted(found)
    assert sum(found.values()) <= 15 * 2**20, {name: f"{size / 2**20:.2f} MiB" for name, size in found.items()}
