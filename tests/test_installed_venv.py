"""Installed plugins for real: pip installs into a fresh venv, entry points found by functai.

Slow (a venv and real pip installs), so the venv is made once per session.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROGRAM = textwrap.dedent('''
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM, tool_call

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    @ai(tools=[refund])
    def answer(question: str) -> str:
        """Answer."""

    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), approve="changes")
    try:
        answer("refund A1")
    except functai.FunctAIError as error:
        print(error.code, "|", error.message)
''')


@pytest.fixture(scope="session")
def venv(tmp_path_factory):
    path = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(ROOT), str(ROOT / "functai_builtin_plugins" / "approval")], check=True)
    return python


def run(python, code, **env):
    result = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd="/",
        env={**{k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}, **env},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_installed_approval_is_found_and_uninstalling_it_makes_approve_refuse(venv):
    assert run(venv, PROGRAM).startswith("approval-required |")
    assert run(venv, PROGRAM, FUNCTAI_DISABLE_PLUGINS="approval").startswith("approval-missing |")
    assert run(venv, PROGRAM, FUNCTAI_LOAD_PLUGINS="").startswith("approval-missing |")
    subprocess.run([str(venv), "-m", "pip", "uninstall", "-q", "-y", "functai-approval"], check=True)
    try:
        out = run(venv, PROGRAM)
        assert out.startswith("approval-missing |") and "functai-approval" in out
    finally:
        subprocess.run([str(venv), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        str(ROOT / "functai_builtin_plugins" / "approval")], check=True)
    assert run(venv, PROGRAM).startswith("approval-required |")
