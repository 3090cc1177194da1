"""Conversations a script made (its function recorded as ``__main__:NAME``): the command line
says what works, and ``--function path.py:NAME`` answers and resumes them; ``--rerun`` names
only a tool the turn started."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

#: The checkout these tests run from, on the subprocesses' path wherever pytest was started.
ROOT = pathlib.Path(__file__).resolve().parent.parent

APP = textwrap.dedent('''
    import json, os, sys
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM, tool_call

    if os.environ.get("APP_SCRIPT"):  # the model of a process that loads this file
        functai.configure(client=ScriptedLM(json.loads(os.environ["APP_SCRIPT"])))

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        if os.environ.get("APP_CRASH"):
            os._exit(0)  # the process dies inside the tool, after it was recorded as started
        with open(os.environ["APP_LEDGER"], "a") as ledger:
            ledger.write(order + "\\n")
        return f"refunded {order}"

    @ai(tools=[refund])
    def support(request: str) -> str:
        """Support the customer."""

    if __name__ == "__main__":
        store, conversation, approve = sys.argv[1], sys.argv[2], sys.argv[3] or None
        functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]))
        chat = support.conversation(conversation, store=store, approve=approve)
        try:
            chat("Refund A1")
        except functai.Waiting as waiting:
            print(waiting.turn.id)
''')


@pytest.fixture
def app(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def env(tmp_path, script=None, **more):
    found = {**os.environ, "APP_LEDGER": str(tmp_path / "ledger.txt"), "FUNCTAI_LOAD_PLUGINS": "approval",
             "PYTHONPATH": str(ROOT), **more}
    found.pop("FUNCTAI_DISABLE_PLUGINS", None)
    if script is not None:
        found["APP_SCRIPT"] = json.dumps(script)
    return found


def run_script(tmp_path, store, conversation, approve="", **more):
    """``python app.py STORE ID APPROVE``: the script, run as a program."""
    return subprocess.run([sys.executable, "app.py", store, conversation, approve], capture_output=True, text=True,
                          cwd=tmp_path, env=env(tmp_path, **more))


def functai_cli(tmp_path, *args, script=None):
    return subprocess.run([sys.executable, "-m", "functai", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env(tmp_path, script))


def refunds(tmp_path):
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def coded(done, status, code):
    assert done.returncode == status and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"functai: error [{code}]: "), done.stderr
    return done.stderr


@pytest.mark.parametrize("kind", ["folder", "sqlite"])
def test_approve_refuses_a_script_conversation_and_says_what_works_then_function_answers_it(app, kind):
    store = str(app / "store") if kind == "folder" else "sqlite:///" + str(app / "store.db")
    made = run_script(app, store, "c1", "changes")
    assert made.returncode == 0, made.stderr
    turn_id = made.stdout.strip()

    err = coded(functai_cli(app, "approve", store, "c1", script=["Refunded A1."]), 2, "script-function")
    assert "__main__:support" in err
    assert "--function path/to/script.py:support" in err and "chat.turn(TURN_ID).approve()" in err

    done = functai_cli(app, "approve", store, "c1", "--function", "app.py:support", "--by", "ops",
                       script=["Refunded A1."])
    assert done.returncode == 0, done.stderr
    assert f"{turn_id}: refund" in done.stdout and "Refunded A1." in done.stdout
    assert refunds(app) == ["A1"]  # ran once, in the command's process
    tree = functai_cli(app, "conversation", store, "c1")
    assert tree.stdout.splitlines()[0] == "conversation c1 (__main__:support, 1 turn)"  # its main block did not run
    assert " done " in tree.stdout


def test_resume_refuses_a_script_conversation_and_checks_rerun_names(app):
    store = str(app / "store")
    crashed = run_script(app, store, "c2", APP_CRASH="1")
    assert crashed.returncode == 0 and crashed.stdout == "", crashed.stderr  # died inside the tool

    err = coded(functai_cli(app, "resume", store, "c2", script=["Done."]), 2, "script-function")
    assert "--function path/to/script.py:support" in err and "--abandon" in err
    err = coded(functai_cli(app, "resume", store, "c2", "--rerun", "refnud", script=["Done."]), 2,
                "rerun-not-started")
    assert "'refnud'" in err and "only refund can be run again" in err
    coded(functai_cli(app, "resume", store, "c2", "--rerun", "refund", "--abandon"), 2, "usage")
    coded(functai_cli(app, "resume", store, "c2", "--function", "nothere.py:support"), 2, "not-found")
    assert refunds(app) == []

    done = functai_cli(app, "resume", store, "c2", "--function", "app.py:support", "--rerun", "refund",
                       script=["Refunded it after all."])
    assert done.returncode == 0, done.stderr
    assert "Refunded it after all." in done.stdout
    assert refunds(app) == ["A1"]  # --rerun ran the tool that had started and never recorded a result
