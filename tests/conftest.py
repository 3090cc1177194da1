import pytest


@pytest.fixture(autouse=True)
def _isolated(functai_isolated):
    """Every test runs isolated, with functai's own pytest fixture: no process
    settings, no FUNCTAI_* variables, no installed plugins, an empty memory store."""
    yield


@pytest.fixture
def install(installed_plugins):
    """Make plugins look installed (the outermost layer), as pip would."""
    return installed_plugins


from store_fixtures import durable_log, durable_store, postgres_server, postgres_url, pytest_terminal_summary  # noqa: E402,F401
