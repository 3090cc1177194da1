import pytest

from functai import layers
from functai.hooks import installed
from functai.conversations.store import MemoryStore
from functai.models import providers


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    """Every test starts with no process settings, no FUNCTAI_LM, and no installed plugins."""
    monkeypatch.delenv("FUNCTAI_LM", raising=False)
    layers.reset()
    previous = installed.use(installed.Installed.of([]))
    monkeypatch.setattr("functai.conversations.store._shared_memory", MemoryStore())  # conversation ids are per test
    yield
    installed.use(previous)
    layers.reset()
    providers.close_clients()


@pytest.fixture
def install():
    """Make plugins look installed (the outermost layer), as pip would."""

    def install(*plugins):
        installed.use(installed.Installed.of(plugins))

    return install
