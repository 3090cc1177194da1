"""What a new user trips on first: the README's commands and table, the demo's --log, ids, corrections,
the folder store's listing, and the quick test run."""

import argparse
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import functai
from functai._cli import main
from functai._cli.app import parser
from functai._stores import FolderStore
from functai.testing import ScriptedLM

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, out, err)
    return status, out.getvalue(), err.getvalue()


# -- README ----------------------------------------------------------------------------------------


def quick_start_blocks():
    section = README[README.index("## Quick start"):]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"^```sh\n(.*?)^```", section, flags=re.S | re.M)


def test_each_quick_start_block_makes_its_own_fresh_venv():
    blocks = quick_start_blocks()
    assert len(blocks) >= 2  # .ci/run runs the second; a fresh-clone check runs both, one after the other
    made = []
    for block in blocks[:2]:
        [venv] = re.findall(r"python3 -m venv (\S+)", block)
        assert f". {venv}/bin/activate" in block
        made.append(venv)
    assert made[0] != made[1], "the second block would reuse the venv the first one filled"
    assert "python -m pytest" in blocks[1]


def test_dot_ci_run_finds_the_test_block():
    script = (ROOT / ".ci" / "run").read_text()
    awk = re.search(r"block=\$\(awk '(.*?)' README.md\)", script).group(1)
    block = subprocess.run(["awk", awk, str(ROOT / "README.md")], capture_output=True, text=True, check=True).stdout
    assert block == quick_start_blocks()[1]


def _subcommands(top):
    """(``"show"``, its parser), (``"plugins explain"``, …) for every command and verb."""
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from ((f"{name} {verb}", inner) for verb, inner in _subcommands(sub))


def _table_commands():
    """The ``functai …`` code spans of the first column of README's command table."""
    table = README[README.index("## Command line"):].split("\n\n")[1]
    return [span for row in table.splitlines()[2:] for span in re.findall(r"`(functai [^`]*)`", row.split(" | ")[0])]


def _documented(command):
    """Whether the table shows ``functai COMMAND``, and every option it shows for it (not for a longer command:
    the options of ``plugins explain`` are not ``plugins``')."""
    length, listed, shown = len(command.split()), False, set()
    for span in _table_commands():
        words = span.split()[1:]
        if words[:length] != command.split():
            continue
        listed = True
        if len(words) == length or not re.fullmatch(r"[a-z]+", words[length]):
            shown |= set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", span))
    return listed, shown


@pytest.mark.parametrize("command", [name for name, _ in _subcommands(parser())])
def test_the_readme_command_table_shows_every_command_and_option_help_has(command):
    sub = dict(_subcommands(parser()))[command]
    options = [a.option_strings for a in sub._actions if a.option_strings and "--help" not in a.option_strings]
    listed, shown = _documented(command)
    assert listed, f"functai {command} is not in the README's command table"
    for names in options:
        assert shown & set(names), f"functai {command} {names[-1]} is missing from the README's command table"
    every = {name for names in options for name in names}
    assert shown <= every, f"the README shows options functai {command} does not have: {shown - every}"


def test_the_quick_run_is_named_and_its_marker_registered():
    assert 'python -m pytest -m "not venv"' in README
    assert re.search(r'^\s*"venv: ', (ROOT / "pyproject.toml").read_text(), flags=re.M)


def test_every_test_that_builds_a_venv_is_left_out_of_the_quick_run():
    makes_a_venv = '"-m", ' + '"venv"'  # as `python -m venv` is spelled in a subprocess call (not in this file)
    builders = sorted(str(path.relative_to(ROOT)) for folder in ("tests", "functai_builtin_plugins")
                      for path in (ROOT / folder).rglob("test_*.py") if makes_a_venv in path.read_text())
    assert len(builders) >= 3
    def collect(marks):
        return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider",
                               "-m", marks, *builders], capture_output=True, text=True, cwd=ROOT)

    quick = collect("not venv")
    assert quick.returncode == 5, quick.stdout + quick.stderr  # 5: nothing collected
    slow = collect("venv")
    assert slow.returncode == 0, slow.stdout + slow.stderr
    assert {line.split("::")[0] for line in slow.stdout.splitlines() if "::" in line} == set(builders)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_what_the_demo_and_the_readme_make_is_ignored_by_git():
    for path in ("functai-demo/calls/calls.jsonl", ".venv-demo/bin/python", ".venv/bin/python"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path


# -- the demo on a SQLite store --------------------------------------------------------------------


def test_demo_logs_to_the_sqlite_database_its_log_url_names(tmp_path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run([sys.executable, "-m", "functai", "demo", "--log", "sqlite:///demo.db"],
                          capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db"] and (tmp_path / "demo.db").is_file()
    calls = list(functai.read_calls(f"sqlite:///{tmp_path / 'demo.db'}"))
    assert {r.function for r in calls} >= {"explain", "rate_clarity", "tutor"}
    steps = done.stdout[done.stdout.index("Everything the demo did is kept in sqlite:///demo.db. Look"):]
    commands = [line.split("#")[0].split() for line in steps.splitlines()[1:]]
    assert commands == [["functai", "calls", "sqlite:///demo.db"],
                        ["functai", "show", calls[0].id, "--log", "sqlite:///demo.db"],
                        ["functai", "conversation", "sqlite:///demo.db", "demo-1"]]
    for command in commands:  # each works as printed
        shown = subprocess.run([sys.executable, "-m", "functai", *command[1:]], capture_output=True, text=True,
                               cwd=tmp_path, env=env)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    again = subprocess.run([sys.executable, "-m", "functai", "demo", "--log", "sqlite:///demo.db"],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "conversation demo-2 (" in again.stdout, again.stderr


# -- call ids and where they are looked for --------------------------------------------------------


@pytest.fixture
def one_call(tmp_path, monkeypatch):
    """A call log in a folder and in SQLite, each holding one call."""
    monkeypatch.chdir(tmp_path)

    @functai.ai
    def echo(text: str) -> str:
        """Echo."""

    logs = {"folder": str(tmp_path / "calls"), "sqlite": f"sqlite:///{tmp_path / 'calls.db'}"}
    for log in logs.values():
        functai.configure(client=ScriptedLM(["x"]), log_calls=log)
        echo("x")
    functai.configure(client=None, log_calls=None)
    return logs


@pytest.mark.parametrize("kind", ["folder", "sqlite"])
@pytest.mark.parametrize("command", [["show"], ["rate", "--good"]])
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_call_id_is_refused_even_when_one_call_would_match(one_call, kind, command, empty):
    status, out, err = run([command[0], empty, *command[1:], "--log", one_call[kind]])
    assert (status, out) == (2, "")
    assert err.splitlines()[0] == "functai: error [call-id]: the call id is empty"
    assert not list(functai.read_calls(one_call[kind], rated=True))


def test_a_log_url_is_named_as_it_was_given(one_call):
    status, _, err = run(["show", "nothere", "--log", one_call["sqlite"]])
    assert status == 2
    assert err.splitlines()[0] == f"functai: error [not-found]: no call with id 'nothere' in {one_call['sqlite']}"
    status, _, err = run(["show", "nothere", "--log", one_call["folder"]])
    assert err.splitlines()[0].endswith(f"in {one_call['folder']}/")


def test_a_log_url_with_a_password_is_named_without_it():
    from functai._cli.common import location

    assert location("postgresql://app:s3cret-pw@db.internal:5432/x") == "postgresql://app@db.internal:5432/x"
    assert location("calls") == "calls/" and location("calls/") == "calls/"


# -- rate --correction --------------------------------------------------------------------------------

COUNTER = textwrap.dedent('''
    from functai import ai

    @ai
    def count(text: str) -> int:
        """How many words the text has."""

    @ai
    def words(text: str) -> list[str]:
        """The words of the text."""
''')


@pytest.fixture
def counted(tmp_path, monkeypatch):
    (tmp_path / "counter_app.py").write_text(COUNTER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("counter_app", None)
    import counter_app

    log = str(tmp_path / "calls")
    functai.configure(client=ScriptedLM(["3", '["a", "b"]']), log_calls=log)
    ids = {"count": counter_app.count.run("a b c")[1].id, "words": counter_app.words.run("a b")[1].id}
    functai.configure(client=None, log_calls=None)
    yield log, ids
    sys.modules.pop("counter_app", None)


def _rating(log, call):
    return next(r for r in functai.read_calls(log, rated=True) if r.id == call).rating


@pytest.mark.parametrize("importable", [True, False])
def test_a_correction_that_is_not_of_the_output_type_is_refused(counted, importable):
    log, ids = counted
    if not importable:  # the recorded value's kind is what is known
        os.remove("counter_app.py")
        sys.modules.pop("counter_app", None)
    for call, wrong in ((ids["count"], "notanint"), (ids["count"], "2.5"), (ids["words"], "a b")):
        status, out, err = run(["rate", call, "--bad", "--correction", wrong, "--log", log])
        assert (status, out) == (2, ""), err
        assert err.startswith(f"functai: error [input-invalid]: --correction '{wrong}' is not a ")
        assert not list(functai.read_calls(log, rated=True))  # nothing was recorded
    status, out, err = run(["rate", ids["count"], "--bad", "--correction", "4", "--log", log])
    assert (status, err) == (0, "") and out.endswith("bad, correction 4\n")
    assert _rating(log, ids["count"])["correction"] == 4  # the value, so evaluate compares 4 with 4
    status, _, err = run(["rate", ids["words"], "--bad", "--correction", '["a", "c"]', "--log", log])
    assert status == 0 and _rating(log, ids["words"])["correction"] == ["a", "c"], err


def test_a_text_correction_is_kept_as_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @functai.ai
    def capital(country: str) -> str:
        """The capital city."""

    functai.configure(client=ScriptedLM(["Quito"]), log_calls=str(tmp_path / "calls"))
    _, record = capital.run("Peru")
    status, _, err = run(["rate", record.id, "--bad", "--correction", " 42 ", "--log", str(tmp_path / "calls")])
    assert status == 0, err
    assert _rating(str(tmp_path / "calls"), record.id)["correction"] == " 42 "


# -- a folder that holds a call log and conversations ---------------------------------------------


def test_a_folder_store_does_not_list_the_call_log_beside_it_as_conversations(tmp_path):
    @functai.ai
    def echo(text: str) -> str:
        """Echo."""

    folder = str(tmp_path / "data")
    functai.configure(client=ScriptedLM(["a", "b", "c"]), log_calls=folder)
    echo.conversation("alex", store=folder)("hi")
    echo.conversation("calls.v2", store=folder)("hi")
    functai.rate(next(iter(functai.read_calls(folder))), good=True)
    assert sorted(os.listdir(folder)) == ["alex.jsonl", "calls.jsonl", "calls.v2.jsonl", "ratings.jsonl"]
    assert FolderStore(folder).conversations() == ["alex", "calls.v2"]
    status, _, err = run(["conversation", folder, "nobody"])
    assert status == 2 and err.splitlines()[1] == "  hint: the store holds: alex, calls.v2"
    copied = str(tmp_path / "copy")
    assert run(["store", "copy", folder, copied])[0] == 0
    assert sorted(os.listdir(copied)) == ["alex.jsonl", "calls.v2.jsonl"]


def test_a_conversation_named_calls_is_still_listed(tmp_path):
    @functai.ai
    def echo(text: str) -> str:
        """Echo."""

    functai.configure(client=ScriptedLM(["a"]))
    echo.conversation("calls", store=str(tmp_path))("hi")
    store = FolderStore(tmp_path)
    store.append("ratings", [{"n": 0}])  # any records but a call log's
    assert store.conversations() == ["calls", "ratings"]
