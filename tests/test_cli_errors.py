"""The command line never shows a user a traceback: one line ``functai: error [code]: message``,
exit 2 for a command line that names something wrong, 1 for a failure at run time."""

import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap

import functai_approval
import pytest

import functai
from functai import Waiting
from functai._cli import main
from functai.testing import ScriptedLM, tool_call

APP = textwrap.dedent('''
    import functai
    from functai import ai, tool

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    @ai(tools=[refund])
    def support(request: str) -> str:
        """Support the customer."""

    @ai
    def count(text: str) -> int:
        """How many words the text has."""

    def plain(text: str) -> str:
        return text

    answer = support
''')

LINE = re.compile(r"^functai: error \[([a-z-]+)\]: \S.*$")


@pytest.fixture
def world(tmp_path, monkeypatch, install):
    """A folder with an app module, a call log, a store with a waiting turn and one done, and a plain file."""
    (tmp_path / "support_app.py").write_text(APP)
    (tmp_path / "broken_app.py").write_text("raise RuntimeError('the module itself is broken')\n")
    (tmp_path / "needs_yaml.py").write_text("import yaml_not_installed_here\n")
    (tmp_path / "afile.txt").write_text("not a folder\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("support_app", "broken_app", "needs_yaml"):
        sys.modules.pop(name, None)
    install(functai_approval.plugin)
    import support_app

    functai.configure(client=ScriptedLM(["hi", "hi", tool_call("refund", {"order": "A1"}), "3"]),
                      log_calls=str(tmp_path / "calls"))
    support_app.support("hello")  # two logged calls (a waiting turn's call is logged when it ends)
    chat = support_app.support.conversation("c1", store=str(tmp_path / "store"), approve="changes")
    chat("hello")
    with pytest.raises(Waiting):
        chat("refund A1")
    support_app.count("a b c")
    functai.configure(client=None)  # the CLI's process has no model unless a case gives one
    yield tmp_path
    for name in ("support_app", "broken_app", "needs_yaml"):
        sys.modules.pop(name, None)


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, out, err)
    return status, out.getvalue(), err.getvalue()


def first_id(folder):
    return next(iter(functai.read_calls(folder))).id


# (argv, exit status, code): every subcommand, given something wrong.
CASES = [
    ([], 2, "usage"),
    (["plugins", "doctor", "no-such-plugin"], 2, "not-found"),
    (["plugins", "doctor", "--timeout", "0"], 2, "usage"),
    (["plugins", "freeze", "extra"], 2, "usage"),
    (["install", "-r", "nothere.txt"], 2, "not-found"),
    (["nosuch"], 2, "usage"),
    (["calls", "--limit", "x"], 2, "usage"),
    (["calls", "--limit", "0"], 2, "usage"),
    (["calls", "afile.txt"], 2, "not-a-folder"),
    (["calls", "--bogus"], 2, "usage"),
    (["show"], 2, "usage"),
    (["show", "nothere", "--log", "calls"], 2, "not-found"),
    (["show", "", "--log", "calls"], 2, "call-id"),
    (["show", " ", "--log", "calls"], 2, "call-id"),
    (["show", "abc", "--log", "afile.txt"], 2, "not-a-folder"),
    (["conversation", "afile.txt", "c1"], 2, "not-a-folder"),
    (["conversation", "nostore", "c1"], 2, "not-found"),
    (["conversation", "store", "../../etc/passwd"], 2, "conversation-id"),
    (["conversation", "store", ""], 2, "conversation-id"),
    (["conversation", "store", "nobody"], 2, "not-found"),
    (["conversation", "store"], 2, "usage"),
    (["approve", "afile.txt", "c1"], 2, "not-a-folder"),
    (["approve", "store", "bad id!"], 2, "conversation-id"),
    (["approve", "store", "nobody"], 2, "not-found"),
    (["approve", "store", "c1"], 1, "no-model"),
    (["approve", "store", "c1", "--deny", "x", "extra"], 2, "usage"),
    (["approve", "store", "c1", "--function", "nothere.py:support"], 2, "not-found"),
    (["approve", "store", "c1", "--function", "support_app"], 2, "usage"),
    (["resume", "store", "c1", "--rerun", "refund", "--abandon"], 2, "usage"),
    (["plugins", "--bogus"], 2, "usage"),
    (["plugins", "extra"], 2, "usage"),
    (["plugins", "doctor", "--timeout", "inf"], 2, "usage"),
    (["plugins", "doctor", "--slow", "1e20"], 2, "usage"),
    (["rate", "nothere", "--good", "--log", "calls"], 2, "not-found"),
    (["rate", "{first}"], 2, "usage"),  # neither --good nor --bad
    (["rate", "{first}", "--good", "--bad", "--log", "calls"], 2, "usage"),
    (["rate", "x", "--good", "--log", "afile.txt"], 2, "not-a-folder"),
    (["rate", "", "--good", "--log", "calls"], 2, "call-id"),
    (["rate", "{count}", "--bad", "--correction", "notanint", "--log", "calls"], 2, "input-invalid"),
    (["evaluate", "nomod:fn"], 2, "not-found"),
    (["evaluate", "support_app"], 2, "usage"),
    (["evaluate", "support_app:"], 2, "usage"),
    (["evaluate", ":support"], 2, "usage"),
    (["evaluate", "support_app:nothere"], 2, "not-found"),
    (["evaluate", "support_app:plain"], 2, "not-ai-function"),
    (["evaluate", "broken_app:f"], 1, "import-failed"),
    (["evaluate", "needs_yaml:f"], 1, "import-failed"),
    (["evaluate", "support_app:support", "--log", "calls"], 1, "no-model"),
    (["evaluate", "support_app:support", "--workers", "none"], 2, "usage"),
    (["evaluate", "support_app:support", "--min-score", "1.5"], 2, "usage"),
    (["evaluate", "support_app:support", "--min-score", "nan"], 2, "usage"),
    (["demo", "--log", "afile.txt"], 2, "not-a-folder"),
    (["demo", "extra"], 2, "usage"),
    (["calls", "calls", "extra"], 2, "usage"),
    (["calls", "nosuch://x"], 2, "store-url"),
    (["calls", "copy", "calls"], 2, "usage"),
    (["calls", "copy", "calls", "calls"], 2, "store-copy"),
    (["calls", "copy", "calls", "afile.txt"], 2, "not-a-folder"),
    (["conversation", "sqlite:///missing.db", "c1"], 2, "not-found"),
    (["calls", "nolog"], 2, "not-found"),
    (["calls", "sqlite:///nowhere/x.db"], 2, "not-found"),
    (["calls", "sqlite:"], 2, "store-url"),
    (["calls", "postgresql://[::zz]/db"], 2, "store-url"),
    (["show", "abc", "--log", "sqlite:///nowhere/x.db"], 2, "not-found"),
    (["rate", "abc", "--good", "--log", "nolog"], 2, "not-found"),
    (["calls", "copy", "sqlite:///nowhere/x.db", "dst"], 2, "not-found"),
    (["store", "copy", "sqlite:///nowhere/x.db", "dst"], 2, "not-found"),
    (["conversation", "", "c1"], 2, "not-found"),
    (["conversation", "postgresql://nobody@127.0.0.1:1/db", "c1"], 1, "store-io"),
    (["store"], 2, "usage"),
    (["store", "copy", "store"], 2, "usage"),
    (["store", "copy", "nostore", "other"], 2, "not-found"),
    (["store", "copy", "store", "store"], 2, "store-copy"),
    (["store", "copy", "store", "nosuch://x"], 2, "store-url"),
    (["store", "copy", "store", "other", "--conversation", "../x"], 2, "conversation-id"),
]


@pytest.mark.parametrize("argv, status, code", CASES, ids=[" ".join(c[0]) or "(nothing)" for c in CASES])
def test_every_subcommand_with_bad_input_fails_in_one_coded_line(world, argv, status, code):
    count = next(r.id for r in functai.read_calls(world / "calls") if r.function == "count")
    argv = [arg.replace("{first}", first_id(world / "calls")).replace("{count}", count) for arg in argv]
    got, out, err = run(argv)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    assert lines, "nothing said on stderr"
    match = LINE.match(lines[0])
    assert match, lines[0]
    assert (got, match.group(1)) == (status, code), err
    assert all(line.startswith("  hint: ") for line in lines[1:]), err
    assert "_positive" not in err and "Namespace" not in err


def test_a_bad_number_is_explained_without_internal_names(world):
    status, _, err = run(["calls", "--limit", "x"])
    assert status == 2
    assert err.splitlines()[0] == "functai: error [usage]: argument --limit: expected a whole number, not 'x'"
    assert err.splitlines()[1] == "  hint: see `functai calls --help`"


def test_approve_without_a_model_refuses_before_recording_the_answer(world):
    store = world / "store" / "c1.jsonl"
    before = store.read_bytes()
    status, out, err = run(["approve", str(world / "store"), "c1"])
    assert status == 1 and err.startswith("functai: error [no-model]: no model is configured for support")
    assert store.read_bytes() == before  # nothing recorded: the turn still waits, and can be answered later
    assert out == ""
    functai.configure(client=ScriptedLM(["Refunded A1."]))
    status, out, err = run(["approve", str(world / "store"), "c1", "--by", "ops"])
    assert (status, err) == (0, ""), err
    assert "refund" in out and "approved" in out and "Refunded A1." in out


def test_approve_reports_a_turn_that_fails_after_resuming_in_one_line(world):
    functai.configure(client=ScriptedLM([]))  # a model that has nothing left to say
    status, out, err = run(["approve", str(world / "store"), "c1"])
    assert status == 1
    assert LINE.match(err.splitlines()[0]).group(1) == "scripted-exhausted"
    assert "failed [scripted-exhausted]" in out


def test_approve_after_a_contrary_answer_is_refused_in_one_line(world):
    import support_app

    chat = support_app.support.conversation("c1", store=str(world / "store"))
    (turn,) = [t for t in chat.all_turns() if t.state == "waiting"]
    turn.deny(reason="no receipt", by="manager")
    functai.configure(client=ScriptedLM(["Refunded A1."]))
    status, out, err = run(["approve", str(world / "store"), "c1", "--by", "intern"])
    assert status == 1 and LINE.match(err.splitlines()[0]).group(1) == "approval-answered", err
    assert "already denied (no receipt) by manager at " in err and "Traceback" not in err
    assert out == f"{turn.id}: not answered [approval-answered]\n"
    assert chat.turn(turn.id).state == "waiting"  # the refused command resumed nothing


def test_approve_with_nothing_waiting(world):
    functai.configure(client=ScriptedLM(["Refunded."]))
    assert run(["approve", str(world / "store"), "c1"])[0] == 0
    status, _, err = run(["approve", str(world / "store"), "c1"])
    assert status == 1 and err.startswith("functai: error [nothing-waiting]: nothing waits in conversation 'c1'")


def test_approve_of_a_turn_that_is_not_waiting_says_so(world):
    import support_app

    done = support_app.support.conversation("c1", store=str(world / "store")).turns[0]
    functai.configure(client=ScriptedLM(["Refunded."]))
    for answer in ([], ["--deny", "no"]):
        status, out, err = run(["approve", str(world / "store"), done.id, *answer])
        assert status == 1 and err.startswith(f"functai: error [turn-not-waiting]: turn {done.id!r} is done"), err


def test_an_edit_of_a_call_two_waiting_turns_ask_for_names_one_turn(world):
    """The same tool call asked on two branches shares its key: an edit changes one call, refused here."""
    import support_app

    chat = support_app.support.conversation("c1", store=str(world / "store"), approve="changes")
    first = chat.turns[0]
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]))
    with pytest.raises(Waiting):
        chat.continue_from(first)("refund A1")
    waiting = [t for t in chat.all_turns() if t.state == "waiting"]
    [key] = {approval["key"] for turn in waiting for approval in turn.approvals}
    assert len(waiting) == 2
    status, out, err = run(["approve", str(world / "store"), "c1", "--key", key, "--input", "order=B2"])
    assert status == 2 and "[input-invalid]" in err and "2 waiting turns" in err, err
    assert all(not t.answers for t in chat.all_turns() if t.state == "waiting")  # nothing recorded


def test_a_copy_of_a_conversation_the_store_lacks_is_refused(world):
    status, out, err = run(["store", "copy", str(world / "store"), str(world / "copy"), "--conversation", "c2"])
    assert status != 0 and "[store-copy]" in err and not (world / "copy").exists(), err


def test_a_function_whose_module_exits_at_import_is_an_import_failure(world):
    (world / "exits.py").write_text("import sys\nsys.exit(0)\n")
    status, out, err = run(["approve", str(world / "store"), "c1", "--function", "exits.py:f"])
    assert status == 1 and "[import-failed]" in err and "SystemExit" in err, err


def test_evaluate_without_a_model_exits_1_not_a_score_of_zero(world):
    functai.configure(client=ScriptedLM(["Lima"]), log_calls=str(world / "calls"))
    import support_app

    support_app.support("capital of Peru?")
    record = list(functai.read_calls(world / "calls"))[-1]
    functai.rate(record, good=True, log=str(world / "calls"))
    functai.configure(client=None)
    status, out, err = run(["evaluate", "support_app:support", "--log", str(world / "calls")])
    assert (status, out) == (1, "")
    assert "score" not in err and err.startswith("functai: error [no-model]: ")
    functai.configure(client=ScriptedLM(["Lima"]))
    status, out, err = run(["evaluate", "support_app:support", "--log", str(world / "calls")])
    assert status == 0 and "1.000" in out, err


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(world, monkeypatch):
    from functai._cli import calls

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(calls, "table", broken)
    status, _, err = run(["calls", "calls"])
    assert status == 1 and "Traceback" not in err
    assert err.splitlines()[0] == "functai: error [internal]: ZeroDivisionError: division by zero"
    assert "--debug" in err.splitlines()[1]
    for argv in (["--debug", "calls", "calls"], ["calls", "calls", "--debug"]):
        status, _, err = run(argv)
        assert status == 1
        assert err.startswith("Traceback (most recent call last):") and "ZeroDivisionError" in err
        assert err.splitlines()[-1] == "functai: error [internal]: ZeroDivisionError: division by zero"


def test_debug_shows_the_traceback_of_a_coded_error_too(world):
    status, _, err = run(["--debug", "evaluate", "broken_app:f"])
    assert status == 1 and "Traceback" in err and "RuntimeError: the module itself is broken" in err
    assert err.splitlines()[-1].startswith("functai: error [import-failed]: ")


def test_help_still_exits_0(capsys):
    assert main(["--help"]) == 0
    assert main(["calls", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: functai calls" in out


def _cli(args, cwd, **env):
    return subprocess.run([sys.executable, "-m", "functai", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env})


def test_the_console_command_reports_in_one_line(tmp_path):
    (tmp_path / "afile.txt").write_text("x")
    for args, status, code in ((["calls", "afile.txt"], 2, "not-a-folder"),
                               (["conversation", "afile.txt", "c1"], 2, "not-a-folder"),
                               (["evaluate", "nomod:fn"], 2, "not-found"),
                               (["calls", "--limit", "x"], 2, "usage")):
        done = _cli(args, tmp_path)
        assert done.returncode == status and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"functai: error [{code}]: ")


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`functai plugins --json | head`: the reader is gone before functai writes."""
    read, write = os.pipe()
    os.close(read)  # nobody will ever read: the first write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "functai", "plugins", "--json"], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    finally:
        os.close(write)
    assert done.returncode == 1
    assert done.stderr == ""  # no traceback, no "Exception ignored" at exit


def test_a_pipe_closed_midway_ends_quietly(tmp_path):
    folder = tmp_path / "calls"
    folder.mkdir()
    line = json.dumps({"id": "0" * 16, "function": "f", "version": "v", "inputs": {}, "started": "2026"})
    (folder / "calls.jsonl").write_text((line + "\n") * 20000)
    proc = subprocess.Popen([sys.executable, "-m", "functai", "calls", str(folder), "--limit", "20000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 1
    assert first.split()[0] == "STARTED" and err == ""


def test_a_warning_while_a_command_runs_is_one_plain_line(world, monkeypatch):
    import warnings

    from functai._cli import calls

    real = calls.read_calls

    def warning_read(folder, **kwargs):
        warnings.warn("functai: something odd: at=here", RuntimeWarning)
        return real(folder, **kwargs)

    monkeypatch.setattr(calls, "read_calls", warning_read)
    status, out, err = run(["calls", "calls"])
    assert status == 0 and out
    assert err == "functai: warning: something odd: at=here\n"


READING = [
    ["calls", "{missing}"],
    ["show", "abc", "--log", "{missing}"],
    ["rate", "abc", "--good", "--log", "{missing}"],
    ["evaluate", "support_app:support", "--log", "{missing}"],
    ["conversation", "{missing}", "c1"],
    ["calls", "copy", "{missing}", "dst"],
    ["store", "copy", "{missing}", "dst"],
]


@pytest.mark.parametrize("missing", ["sqlite:///nowhere/x.db", "sqlite:///x.db", "x.sqlite", "nowhere/log"])
@pytest.mark.parametrize("argv", READING, ids=[" ".join(argv[:2]) for argv in READING])
def test_a_command_that_reads_creates_nothing_and_says_not_found(world, argv, missing):
    before = sorted(p.relative_to(world) for p in world.rglob("*"))
    status, out, err = run([arg.replace("{missing}", missing) for arg in argv])
    assert (status, LINE.match(err.splitlines()[0]).group(1)) == (2, "not-found"), err
    assert sorted(p.relative_to(world) for p in world.rglob("*")) == before  # no file, no folder, no table


def test_an_empty_call_log_is_not_a_missing_one(world):
    (world / "empty").mkdir()
    sqlite3.connect(world / "empty.db").close()  # a database with no tables yet
    for log, named in (("empty", "empty/"), ("sqlite:///empty.db", "sqlite:///empty.db")):  # a folder is named with its /
        status, out, err = run(["calls", log])
        assert (status, out, err) == (0, f"no calls recorded in {named}\n", "")
    assert sorted(p.name for p in world.iterdir() if p.name.startswith("empty")) == ["empty", "empty.db"]


def test_a_turn_answered_elsewhere_is_shown_answered_and_functai_resume_resumes_it(world):
    store = str(world / "store")
    view = functai.Conversation.open("c1", store=store)  # as the console answers: by id alone
    (turn,) = [t for t in view.all_turns() if t.state == "waiting"]
    turn.approve(by="ana")
    status, out, err = run(["conversation", store, "c1"])
    assert status == 0, err
    assert "answered, to resume: refund" in out and "— approved" in out and "waits for" not in out
    assert f"1 answered waiting turn: `functai resume {store} c1` resumes it" in out
    functai.configure(client=ScriptedLM(["Refunded A1."]))
    status, out, err = run(["resume", store, "c1"])
    assert (status, err) == (0, ""), err
    assert out.splitlines() == [f'{turn.id}: resuming (answered: refund {{"order": "A1"}} — approved)',
                                f"{turn.id}: Refunded A1."]
    status, _, err = run(["resume", store, "c1"])
    assert status == 1 and "none waits with its approvals answered" in err


def test_approve_prints_who_gave_the_answer_that_holds(world):
    store = str(world / "store")
    view = functai.Conversation.open("c1", store=store)
    (turn,) = [t for t in view.all_turns() if t.state == "waiting"]
    turn.approve(turn.approvals[0]["key"], inputs={"order": "A2"}, by="ana")
    functai.configure(client=ScriptedLM(["Refunded A2."]))
    status, out, err = run(["approve", store, "c1", "--input", "order=A2", "--by", "intern"])  # the same answer
    assert (status, err) == (0, ""), err
    assert f'{turn.id}: refund {{"order": "A2"}} — approved (edited by ana)' in out.splitlines()
    assert "intern" not in out


def test_approve_reads_an_input_as_strict_json_else_as_text(world):
    store = str(world / "store")
    view = functai.Conversation.open("c1", store=store)
    (turn,) = [t for t in view.all_turns() if t.state == "waiting"]
    functai.configure(client=ScriptedLM(["Refunded NaN."]))
    status, out, err = run(["approve", store, "c1", "--input", "order=NaN", "--by", "ana"])
    assert (status, err) == (0, ""), err
    assert f'{turn.id}: refund {{"order": "NaN"}} — approved (edited by ana)' in out.splitlines()


def test_a_contrary_approve_names_the_command_that_goes_on_with_the_answer_that_holds(world):
    import support_app

    chat = support_app.support.conversation("c1", store=str(world / "store"))
    (turn,) = [t for t in chat.all_turns() if t.state == "waiting"]
    turn.deny(reason="no receipt", by="manager")
    functai.configure(client=ScriptedLM(["Refunded A1."]))
    status, out, err = run(["approve", str(world / "store"), "c1", "--by", "intern"])
    assert status == 1 and f"`functai resume {world / 'store'} c1` goes on with the answer that holds" in err


def test_version_and_each_subcommands_own_help(capsys):
    import functai

    assert run(["--version"])[0] == 0
    assert capsys.readouterr().out == f"functai {functai.__version__}\n"
    status, out, _ = run(["calls", "copy", "--help"])
    assert status == 0 and out.startswith("usage: functai calls copy [-h] SRC DST")
    status, out, _ = run(["calls", "--help"])
    assert status == 0 and out.startswith("usage: functai calls [-h] [--limit LIMIT] [folder]")


def test_every_subcommand_has_its_own_help(capsys):
    from functai._cli.app import parser

    commands = next(action for action in parser()._actions if action.dest == "command").choices
    assert len(commands) > 10
    for name in commands:
        status, out, _ = run([name, "--help"])
        printed = out + capsys.readouterr().out  # argparse prints to sys.stdout, `calls` to the stream given
        assert status == 0 and printed.startswith(f"usage: functai {name}"), name


@pytest.mark.parametrize("names", [["functai[postgres]"], ["FunctAI==2.0.0"], ["functai @ file:///x"],
                                   ["-r", "requirements.txt"]])
def test_uninstall_never_hands_functai_or_a_requirements_file_to_pip(names):
    status, _, err = run(["uninstall", "-y", "--", *names])
    assert status == 2 and ("it is functai itself" in err or "not pip's options" in err), err


def test_a_command_started_with_stdout_and_stderr_closed_ends_with_its_status(tmp_path):
    """``functai calls >&-``: Python gives no stdout at all; the command runs and says nothing."""
    (tmp_path / "calls").mkdir()
    for argv, status in ((["calls", str(tmp_path / "calls")], 0), (["calls", str(tmp_path / "none")], 2)):
        done = subprocess.run([sys.executable, "-m", "functai", *argv],
                              preexec_fn=lambda: (os.close(1), os.close(2)))  # as the shell's >&- 2>&- do
        assert done.returncode == status, argv


def test_install_runs_pip_and_the_plugins_table_from_the_environment_not_the_current_folder(tmp_path, monkeypatch):
    """A ``pip.py`` or a ``functai/`` in the folder ``functai install`` is run from is never run."""
    from functai._cli import manage

    for name in ("pip", "functai"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"open({str(tmp_path / (name + '.ran'))!r}, 'w').close()\n")
        (tmp_path / name / "__main__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    manage._table(out)
    manage._pip(["--version"], "version")
    assert "installed plugins" in out.getvalue()
    assert not (tmp_path / "pip.ran").exists() and not (tmp_path / "functai.ran").exists()


def test_a_folder_name_that_is_not_utf8_is_shown_escaped_on_a_strict_stdout(tmp_path):
    folder = tmp_path / os.fsdecode(b"calls-\xff")
    folder.mkdir()
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "LC_ALL": "C.UTF-8"}
    done = subprocess.run([sys.executable, "-m", "functai", "calls", str(folder)], capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    assert b"calls-\\udcff" in done.stdout and b"internal" not in done.stderr


def test_approve_reads_an_input_as_text_where_the_tool_takes_text_and_not_the_json(world):
    """`--input order=123` for a tool whose order is text: 123 is the order's name, not a number."""
    store = str(world / "store")
    view = functai.Conversation.open("c1", store=store)
    (turn,) = [t for t in view.all_turns() if t.state == "waiting"]
    functai.configure(client=ScriptedLM(["Refunded 123."]))
    status, out, err = run(["approve", store, "c1", "--input", "order=123", "--by", "ana"])
    assert (status, err) == (0, ""), err
    assert f'{turn.id}: refund {{"order": "123"}} — approved (edited by ana)' in out.splitlines()


def test_conversation_and_resume_show_an_approved_edit_as_it_will_run(world):
    """What runs is the edit: `functai conversation` and `functai resume` show it, and who made it."""
    store = str(world / "store")
    view = functai.Conversation.open("c1", store=store)
    (turn,) = [t for t in view.all_turns() if t.state == "waiting"]
    turn.approve(turn.approvals[0]["key"], inputs={"order": "A2"}, by="ana")
    status, out, err = run(["conversation", store, "c1"])
    assert (status, err) == (0, ""), err
    assert 'answered, to resume: refund {"order": "A2"} (approval) — approved, edited by ana' in out
    functai.configure(client=ScriptedLM(["Refunded A2."]))
    status, out, err = run(["resume", store, "c1"])
    assert (status, err) == (0, ""), err
    assert f'{turn.id}: resuming (answered: refund {{"order": "A2"}} — approved, edited by ana)' in out.splitlines()


def test_approve_with_an_input_the_call_already_has_records_no_edit(world):
    store = str(world / "store")
    functai.configure(client=ScriptedLM(["Refunded A1."]))
    status, out, err = run(["approve", store, "c1", "--input", "order=A1", "--by", "ana"])
    assert (status, err) == (0, ""), err
    view = functai.Conversation.open("c1", store=store)
    [turn] = [t for t in view.all_turns() if t.waits]
    [answer] = turn.waits[-1]["answers"].values()
    assert "edited" not in out and answer.get("inputs") is None and answer["by"] == "ana"
