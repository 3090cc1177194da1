"""The runner seam: ``functai evaluate``, ``functai resume`` and ``functai worker`` run where
``--runner NAME`` says — a runner a distribution adds to the entry-point group ``functai.runners`` —
and, without it, in the process that asks, as they always have."""

from __future__ import annotations

import io
import os
import sys
import textwrap

import functai_approval
import pytest

import functai
from functai import ai, tool
from functai._cli import main
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")

RUNNER = textwrap.dedent('''
    """A runner that notes what it is asked to do, and does it in this process."""
    import functai._runners as runners

    asked = []

    class Noting:
        def evaluate(self, program, *, log, workers, progress_to):
            asked.append(("evaluate", program.name, workers))
            return runners.InProcess().evaluate(program, log=log, workers=workers, progress_to=progress_to)

        def resume(self, chat, turn_id, *, rerun):
            asked.append(("resume", chat.id, turn_id))
            return runners.InProcess().resume(chat, turn_id, rerun=rerun)

        def worker(self, imports):
            asked.append(("worker", tuple(imports)))
            return 0

    def make():
        return Noting()

    class Classy(Noting):
        """A runner class as the entry point: made with no arguments."""

    class Broken:
        def __init__(self):
            raise RuntimeError("no engine here")

    def exits():
        raise SystemExit("no config")
''')


@pytest.fixture
def noting(tmp_path, monkeypatch):
    """A distribution installed on sys.path whose entry points add the runners ``noting`` and ``broken``."""
    (tmp_path / "noting_runner.py").write_text(RUNNER)
    info = tmp_path / "noting_runner-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: noting-runner\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[functai.runners]\nnoting = noting_runner:make\n"
                                           "broken = noting_runner:Broken\nclassy = noting_runner:Classy\n"
                                           "exits = noting_runner:exits\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("noting_runner", None)
    import noting_runner

    yield noting_runner
    sys.modules.pop("noting_runner", None)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@ai(tools=[refund])
def desk(request: str) -> str:
    """Help the customer."""


def test_resume_goes_through_the_runner_named(noting, install, tmp_path):
    install(functai_approval.plugin)
    store = str(tmp_path / "store")
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."]), approve="changes")
    with pytest.raises(functai.Waiting) as waiting:
        desk.conversation("c", store=store)("refund A1")
    waiting.value.turn.approve()
    status, out, err = run("resume", store, "c", "--runner", "noting")
    assert status == 0, err
    assert noting.asked == [("resume", "c", waiting.value.turn.id)] and "Refunded." in out


def test_evaluate_goes_through_the_runner_named(noting, tmp_path, monkeypatch):
    log = str(tmp_path / "calls")
    (tmp_path / "graded.py").write_text(textwrap.dedent('''
        from functai import ai

        @ai
        def capital(country: str) -> str:
            """The capital city of the country."""
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("graded", None)
    import graded

    functai.configure(client=ScriptedLM(["Lima", "Lima"]), log_calls=log)
    graded.capital("Peru")
    [record] = functai.read_calls(log)
    functai.rate(record.id, good=True, log=log)
    status, out, err = run("evaluate", "graded:capital", "--log", log, "--workers", "2", "--runner", "noting")
    assert status == 0, err
    assert noting.asked == [("evaluate", "capital", 2)] and "1.000" in out
    status, _, err = run("evaluate", "graded:capital", "--log", log, "--rate", "10/min")  # in this process: no queue
    assert status == 2 and "[runner-unsupported]" in err and "--rate" in err
    status, _, err = run("evaluate", "graded:capital", "--log", log, "--rate", "ten/min", "--runner", "noting")
    assert status == 2 and "not a rate" in err


def test_a_worker_imports_its_modules_then_serves_its_runner(noting, tmp_path):
    (tmp_path / "worker_app.py").write_text("IMPORTED = True\n")
    (tmp_path / "broken_app.py").write_text("import a_dependency_not_installed\n")
    status, _, err = run("worker", "--runner", "noting", "--import", "broken_app")
    assert status == 1 and "[import-failed]" in err and "a_dependency_not_installed" in err
    status, _, err = run("worker", "--runner", "noting", "--import", "worker_app")
    assert status == 0, err
    assert noting.asked == [("worker", ("worker_app",))] and sys.modules["worker_app"].IMPORTED
    status, _, err = run("worker", "--runner", "classy", "--import", "worker_app")
    assert status == 0 and noting.asked[-1] == ("worker", ("worker_app",)), err


def test_the_default_runner_has_no_workers_and_an_unknown_or_broken_runner_is_named(noting):
    status, _, err = run("worker", "--runner", "process")
    assert status == 2 and "[runner-no-workers]" in err
    status, _, err = run("worker", "--runner", "nosuch")
    assert status == 2 and "[runner-unknown]" in err and "noting" in err and "process" in err
    status, _, err = run("worker", "--runner", "broken")
    assert status == 1 and "[runner-load]" in err and "no engine here" in err
    status, _, err = run("worker", "--runner", "exits")  # not a silent end of the command
    assert status == 1 and "[runner-load]" in err and "SystemExit: no config" in err
    status, _, err = run("worker", "--runner", "noting", "--import", "no_such_module_here")
    assert status == 2 and "[not-found]" in err and "no_such_module_here" in err and noting.asked == []
