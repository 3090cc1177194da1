"""Subcommands installed distributions add through the entry-point group ``functai.commands``:
a good one runs like a built-in; a broken one is left out and reported, and every other command works."""

import io
import json
import warnings

import pytest

from functai._cli import main
from functai._hooks import installed


class Dist:
    def __init__(self, name, version="1.0.0"):
        self.name, self.version = name, version


class EntryPoint:
    """Stands in for an importlib-metadata entry point."""

    def __init__(self, name, found, dist):
        self.name, self.value, self._found, self.dist = name, f"{dist.replace('-', '_')}:register", found, Dist(dist)

    def load(self):
        if isinstance(self._found, BaseException):
            raise self._found
        return self._found


def hello(commands):
    sub = commands.add_parser("hello", help="say hello")
    sub.add_argument("--name", default="world")
    sub.set_defaults(run=lambda args, out: print(f"hello {args.name}", file=out) or 0)


def takes_calls(commands):
    sub = commands.add_parser("calls", help="a second 'calls'")
    sub.set_defaults(run=lambda args, out: print("not the real one", file=out) or 0)


def half_done(commands):
    commands.add_parser("half", help="registers, then fails")
    raise RuntimeError("config file missing")


def no_run(commands):
    commands.add_parser("norun", help="no run default")


GROUP = [
    EntryPoint("hello", hello, "functai-hello"),
    EntryPoint("broken", ModuleNotFoundError("No module named 'starlette'"), "functai-broken"),
    EntryPoint("calls", takes_calls, "functai-calls-again"),
    EntryPoint("half", half_done, "functai-half"),
    EntryPoint("norun", no_run, "functai-norun"),
    EntryPoint("notfn", 42, "functai-notfn"),
]


@pytest.fixture
def group(monkeypatch):
    real = installed.entry_points
    monkeypatch.setattr(installed, "entry_points",
                        lambda name: list(GROUP) if name == "functai.commands" else real(name))


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, out, err)
    return status, out.getvalue(), err.getvalue()


def test_an_installed_command_runs_like_a_builtin(group, capsys):
    assert run(["hello", "--name", "ana"])[:2] == (0, "hello ana\n")
    assert run(["--help"])[0] == 0  # argparse prints help to sys.stdout
    assert "say hello" in capsys.readouterr().out


def test_broken_entry_points_leave_every_other_command_working(group, tmp_path, capsys):
    status, out, err = run(["calls", str(tmp_path / "nowhere")])
    assert status == 2 and "functai: error [not-found]: no call log folder" in err  # the built-in, not the copy
    assert "not the real one" not in out
    for name in ("half", "norun"):
        status, _, err = run([name])
        assert status == 2 and "[usage]" in err and "invalid choice" in err
    run(["--help"])
    out = capsys.readouterr().out
    assert "say hello" in out and "registers, then fails" not in out and "no run default" not in out


def test_a_broken_command_is_warned_about_on_the_line_that_names_it(group):
    out, err = io.StringIO(), io.StringIO()
    assert main(["hello"], out, err) == 0
    lines = [line for line in err.getvalue().splitlines() if "command failed to load" in line]
    assert len(lines) == 5
    assert any("command=broken" in line and "ModuleNotFoundError: No module named 'starlette'" in line
               for line in lines)


def test_plugins_lists_each_command_entry_point_with_its_state(group):
    status, out, _ = run(["plugins"])
    assert status == 0
    section = out[out.index("entry-point group 'functai.commands'"):]
    rows = {line.split()[0]: line for line in section.splitlines()[2:] if line and not line.startswith("5 ")}
    assert rows["hello"].split()[:4] == ["hello", "functai-hello", "1.0.0", "hello"]
    assert rows["hello"].rstrip().endswith("loaded")
    assert "failed: ModuleNotFoundError: No module named 'starlette'" in rows["broken"]
    assert "failed: ValueError: it replaces the command 'calls'" in rows["calls"] or "conflicting" in rows["calls"]
    assert "failed: RuntimeError: config file missing" in rows["half"]
    assert "failed: ValueError: its command 'norun' has no run default" in rows["norun"]
    assert "failed: TypeError: it gives a int, not a function register(commands)" in rows["notfn"]
    assert "5 command entry points failed (broken, calls, half, norun, notfn)" in out

    status, out, _ = run(["plugins", "--json"])
    listed = {item["name"]: item for item in json.loads(out)["commands"]}
    assert listed["hello"] == {"name": "hello", "entry_point": "functai_hello:register", "distribution": "functai-hello",
                               "version": "1.0.0", "commands": ["hello"], "state": "loaded", "reason": None}
    assert listed["broken"]["state"] == "failed"


def test_a_built_in_command_does_not_load_the_installed_ones(monkeypatch, tmp_path):
    """A distribution's register that hangs or ends the process cannot take `functai calls` with it."""
    loaded = []

    class Exits(EntryPoint):
        def load(self):
            loaded.append(self.name)
            raise SystemExit(3)  # stands for os._exit or a hang: it must not be reached at all

    monkeypatch.setattr(installed, "entry_points",
                        lambda name: [Exits("bye", hello, "functai-bye")] if name == "functai.commands" else [])
    status, _, err = run(["--debug", "calls", str(tmp_path / "nowhere")])
    assert status == 2 and "[not-found]" in err
    assert loaded == []
    assert run(["bye"])[0] == 2 and loaded == ["bye"]  # a line naming no built-in loads them


def rewrites_plugins(commands):
    commands.choices["plugins"].set_defaults(run=lambda args, out: print("not the real one", file=out) or 0)
    sub = commands.add_parser("sneaky", help="changes a built-in")
    sub.set_defaults(run=lambda args, out: 0)


def test_a_command_that_changes_a_built_in_parser_is_left_out(monkeypatch):
    monkeypatch.setattr(installed, "entry_points", lambda name: [EntryPoint("sneaky", rewrites_plugins, "functai-sneaky")]
                        if name == "functai.commands" else [])
    status, out, err = run(["plugins"])
    assert status == 0 and "not the real one" not in out
    assert "failed: ValueError: it changes the built-in command 'plugins'" in out
    assert run(["sneaky"])[0] == 2


def test_plugins_doctor_and_explain_do_not_load_the_installed_commands(monkeypatch):
    loaded = []

    class Counts(EntryPoint):
        def load(self):
            loaded.append(self.name)
            return hello

    monkeypatch.setattr(installed, "entry_points",
                        lambda name: [Counts("hi", hello, "functai-hi")] if name == "functai.commands" else [])
    run(["plugins", "explain", "no_such_module_here:f"])
    run(["plugins", "--json"])
    assert loaded == ["hi"]  # the bare listing only


def sets_json(commands):
    commands.choices["plugins"].set_defaults(json=True)
    commands.choices["plugins"].add_argument("--sneaky", action="store_true")
    commands.choices["plugins"].add_argument_group("sneaky group").add_argument("--sneaky-too")
    commands.choices["plugins"].add_mutually_exclusive_group().add_argument("--sneaky-three")
    sub = commands.add_parser("quiet", help="changes a built-in's argument")
    sub.set_defaults(run=lambda args, out: 0)


def test_a_command_that_changes_a_built_in_argument_is_left_out_and_the_argument_put_back(monkeypatch, capsys):
    monkeypatch.setattr(installed, "entry_points", lambda name: [EntryPoint("quiet", sets_json, "functai-quiet")]
                        if name == "functai.commands" else [])
    status, out, _ = run(["plugins"])
    assert status == 0 and not out.lstrip().startswith("{")  # a table, as asked: not JSON
    assert "failed: ValueError: it changes the built-in command 'plugins'" in out
    assert run(["plugins", "--sneaky"])[0] == 2
    capsys.readouterr()
    assert run(["plugins", "--help"])[0] == 0  # the bare listing's line: the commands are loaded, then taken back
    out = capsys.readouterr().out
    assert "--json" in out and "sneaky" not in out
