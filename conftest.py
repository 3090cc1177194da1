"""The behaviour suite under both drivers of the one pipeline; and a copy of this checkout to install.

Every test of the modules below runs twice: with plain calls as they are
(``sync``), and with every plain call made through the async driver
(``async``: ``fn(...)``/``fn.run(...)`` become ``asyncio.run(fn.arun(...))``,
``chat(...)`` and ``turn.resume()`` become ``chat.acall(...)`` and ``turn.aresume()``,
so tools run in worker threads or are awaited, async handlers are awaited,
and turns are answered through the async path). Records, changes, waiting
turns and replay must come out the same.
"""

from __future__ import annotations

import asyncio
import pathlib
import shutil

import pytest

#: Test modules whose calls can run under the async driver as they are.
BOTH_DRIVERS = {
    "test_functions", "test_tools", "test_engine", "test_limits", "test_hearing_hooks", "test_conversations",
    "test_waiting_turns", "test_builtins", "test_outputs", "test_model_replies",
    "test_approval_rules", "test_compaction", "test_delegate",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "call_driver" in metafunc.fixturenames and metafunc.module.__name__.rsplit(".", 1)[-1] in BOTH_DRIVERS:
        metafunc.parametrize("call_driver", ["sync", "async"], indirect=True)


def _through_async_driver(fn, args, kwargs):  # type: ignore[no-untyped-def]
    from functai._calls.run import call_steps, drive
    from functai._calls.steps import adrive

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(adrive(call_steps(fn, args, kwargs)))
    return drive(call_steps(fn, args, kwargs))  # a plain call made inside async code stays plain


def _run(coroutine_function, plain):  # type: ignore[no-untyped-def]
    def run(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coroutine_function(*args, **kwargs))
        return plain(*args, **kwargs)

    return run


@pytest.fixture(autouse=True)
def call_driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which driver runs the plain calls of this test: ``sync`` or ``async``."""
    driver = getattr(request, "param", "sync")
    if driver == "async":
        from functai._calls import function

        from functai._conversations.conversation import Conversation, Turn

        monkeypatch.setattr(function, "run_call", _through_async_driver)
        monkeypatch.setattr(Conversation, "__call__", _run(Conversation.acall, Conversation.__call__))
        monkeypatch.setattr(Turn, "resume", _run(Turn.aresume, Turn.resume))
    return driver


@pytest.fixture(scope="session")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """This checkout, copied, for tests that ``pip install`` it: pip builds a local folder in place, and
    the ``build/`` setuptools leaves there would be packed into every later build (a renamed module's
    old copy with it). So the checkout is never written to."""
    into = tmp_path_factory.mktemp("source") / "functai"  # the folder name users give it
    shutil.copytree(pathlib.Path(__file__).resolve().parent, into, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "__pycache__", ".*_cache", "node_modules"))
    return into
