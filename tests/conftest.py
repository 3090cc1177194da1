import pytest

from functai import layers


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch):
    """Every test starts with no process settings and no FUNCTAI_LM."""
    monkeypatch.delenv("FUNCTAI_LM", raising=False)
    layers.reset()
    yield
    layers.reset()
