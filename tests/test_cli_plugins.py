"""`functai plugins`: every installed plugin and its state, even while one is broken."""

import json
import types
import warnings

import pytest

from functai.testing import log_events

import functai
from functai import Plugin
from functai._cli import main
from functai._hooks import installed


class Dist:
    def __init__(self, name, version):
        self.name, self.version = name, version


class EntryPoint:
    """Stands in for an importlib-metadata entry point."""

    def __init__(self, name, value, found, dist, version="1.0.0"):
        self.name, self.value, self._found = name, value, found
        self.dist = Dist(dist, version)

    def load(self):
        if isinstance(self._found, BaseException):
            raise self._found
        return self._found


guard_module = types.ModuleType("functai_guard")


@functai.hookimpl
def tool_call(tool):
    if tool.name == "delete_file":
        raise functai.FunctAIError("no", code="no-deletes")
    return None


@functai.hookimpl
def before_call(call):
    return None


guard_module.tool_call = tool_call
guard_module.before_call = before_call

PLUGINS = [
    EntryPoint("guard", "functai_guard", guard_module, "functai-guard", "2.1.0"),
    EntryPoint("modes", "functai_modes:plugin", Plugin("modes", version="0.3.0", before_call=lambda c: None),
               "functai-modes", "0.9.0"),
    EntryPoint("broken", "functai_broken:plugin", ModuleNotFoundError("No module named 'yaml'"), "functai-broken"),
    EntryPoint("off", "functai_off:plugin", RuntimeError("must not be imported"), "functai-off", "4.0.0"),
]
BUILTINS = [
    EntryPoint("compaction", "functai_compaction:compaction", None, "functai-compaction", "0.1.0"),
    EntryPoint("delegate", "other_delegate:delegate", None, "other-delegate", "2.0.0"),
]


@pytest.fixture
def fake_entry_points(monkeypatch):
    groups = {"functai": PLUGINS, "functai.builtins": BUILTINS}
    monkeypatch.setattr(installed, "entry_points", lambda group: sorted(groups.get(group, []), key=lambda e: e.name))
    monkeypatch.setenv("FUNCTAI_DISABLE_PLUGINS", "off")


def test_text_lists_each_plugin_with_its_state_and_says_how_to_unblock_calls(fake_entry_points, capsys):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["plugins"]) == 0  # a diagnostic: 0 even though one failed
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "installed plugins (entry-point group 'functai'):"
    assert lines[1].split() == ["NAME", "VERSION", "DISTRIBUTION", "API", "HOOKS", "STATE"]
    rows = {line.split()[0]: line for line in lines[2:6]}
    assert rows["guard"].split() == ["guard", "2.1.0", "functai-guard", "1", "before_call,tool_call", "loaded"]
    assert rows["modes"].split() == ["modes", "0.3.0", "functai-modes", "1", "before_call", "loaded"]
    assert rows["broken"].split()[:5] == ["broken", "1.0.0", "functai-broken", "-", "-"]
    assert rows["broken"].endswith("failed: ModuleNotFoundError: No module named 'yaml'")
    assert rows["off"].split() == ["off", "4.0.0", "functai-off", "-", "-", "disabled", "(FUNCTAI_DISABLE_PLUGINS)"]
    assert lines[6] == (
        "1 plugin failed to load (broken): every call refuses plugin-load until it is fixed, uninstalled, "
        "or disabled with FUNCTAI_DISABLE_PLUGINS=off,broken"
    )
    assert lines[7] == ""
    assert lines[8] == "built-in factories (entry-point group 'functai.builtins'):"
    assert lines[10].split() == ["compaction", "functai-compaction", "0.1.0", "functai_compaction:compaction"]
    assert lines[11].split() == ["delegate", "other-delegate", "2.0.0", "other_delegate:delegate"]
    assert captured.err == ""  # nothing printed beside the table
    assert not [w for w in seen if "functai" in str(w.message)]  # the listing says it; no repeated warning


def test_json_has_every_field_and_parses_while_a_plugin_is_broken(fake_entry_points, capsys):
    assert main(["plugins", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)  # nothing but JSON on stdout
    by_name = {p["name"]: p for p in data["plugins"]}
    assert [p["name"] for p in data["plugins"]] == ["broken", "guard", "modes", "off"]
    assert by_name["guard"] == {
        "name": "guard", "version": "2.1.0", "distribution": "functai-guard", "hooks": ["before_call", "tool_call"],
        "api": 1, "state": "loaded", "reason": None, "entry_point": "functai_guard", "distribution_version": "2.1.0",
    }
    assert by_name["modes"]["version"] == "0.3.0" and by_name["modes"]["distribution_version"] == "0.9.0"
    assert by_name["broken"]["state"] == "failed"
    assert by_name["broken"]["reason"] == "ModuleNotFoundError: No module named 'yaml'"
    assert by_name["broken"]["hooks"] == [] and by_name["broken"]["api"] is None
    assert (by_name["off"]["state"], by_name["off"]["reason"]) == ("disabled", "FUNCTAI_DISABLE_PLUGINS")
    assert [(b["name"], b["distribution"], b["version"]) for b in data["builtins"]] == [
        ("compaction", "functai-compaction", "0.1.0"), ("delegate", "other-delegate", "2.0.0"),
    ]


def test_blocked_by_functai_load_plugins(fake_entry_points, monkeypatch, capsys):
    monkeypatch.setenv("FUNCTAI_LOAD_PLUGINS", "guard")
    monkeypatch.delenv("FUNCTAI_DISABLE_PLUGINS")
    assert main(["plugins", "--json"]) == 0
    states = {p["name"]: (p["state"], p["reason"]) for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert states == {
        "broken": ("blocked", "not in FUNCTAI_LOAD_PLUGINS"),
        "guard": ("loaded", None),
        "modes": ("blocked", "not in FUNCTAI_LOAD_PLUGINS"),
        "off": ("blocked", "not in FUNCTAI_LOAD_PLUGINS"),
    }
    assert main(["plugins"]) == 0
    assert "failed to load" not in capsys.readouterr().out


def test_runs_a_fresh_discovery_not_the_cached_one(monkeypatch, capsys):
    # The process's cached set (conftest: none installed) must not hide what pip installed.
    loaded = installed.InstalledPlugin(EntryPoint("guard", "functai_guard", guard_module, "functai-guard"))
    loaded.load()
    failed = installed.InstalledPlugin(EntryPoint("broken", "x:y", ImportError("boom"), "functai-broken"))
    with log_events() as logged:
        failed.load()
    assert logged.named("plugin failed to load")
    capsys.readouterr()
    monkeypatch.setattr(installed.Installed, "discover", classmethod(lambda cls: cls([loaded, failed])))
    monkeypatch.setattr(installed, "entry_points", lambda group: [])
    assert installed.installed().found == ()
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "guard" in out and "failed: ImportError: boom" in out
    assert "built-in factories" not in out  # the section only when some are installed
    assert installed.installed().found == ()  # and it left the process's set alone


def test_nothing_installed(monkeypatch, capsys):
    monkeypatch.setattr(installed, "entry_points", lambda group: [])
    assert main(["plugins"]) == 0
    assert capsys.readouterr().out == "no installed plugins (entry-point group 'functai')\n"
    assert main(["plugins", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"plugins": [], "builtins": []}


def test_a_distribution_providing_a_builtin_twice_is_flagged(monkeypatch, capsys):
    two = [
        EntryPoint("compaction", "a:compaction", None, "functai-compaction"),
        EntryPoint("compaction", "b:compaction", None, "better-compaction"),
    ]
    monkeypatch.setattr(installed, "entry_points", lambda group: two if group == "functai.builtins" else [])
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert out.count("(2 distributions provide 'compaction': uninstall all but one)") == 2


def test_a_plugin_that_exits_at_import_is_a_load_failure_not_the_end_of_the_listing(monkeypatch, capsys):
    exits = [
        EntryPoint("quits", "functai_quits:plugin", SystemExit(3), "functai-quits"),
        EntryPoint("modes", "functai_modes:plugin", Plugin("modes", version="0.3.0"), "functai-modes"),
    ]
    monkeypatch.setattr(installed, "entry_points", lambda group: exits if group == "functai" else [])
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "failed: SystemExit: 3" in out and "modes" in out
    with log_events() as logged:
        found = installed.Installed.discover()
    assert logged.named("plugin failed to load: plugin=quits")
    with pytest.raises(functai.FunctAIError) as refused:  # calls fail closed
        found.layer()
    assert refused.value.code == "plugin-load" and "'quits'" in refused.value.message


def test_ctrl_c_while_a_plugin_imports_still_stops(monkeypatch):
    stop = [EntryPoint("slow", "functai_slow:plugin", KeyboardInterrupt(), "functai-slow")]
    monkeypatch.setattr(installed, "entry_points", lambda group: stop if group == "functai" else [])
    with pytest.raises(KeyboardInterrupt):
        installed.Installed.discover()


def test_with_several_broken_plugins_the_error_says_to_disable_them_all(monkeypatch):
    broken = [
        EntryPoint("first", "a:plugin", ImportError("no a"), "functai-a"),
        EntryPoint("fine", "f:plugin", Plugin("fine"), "functai-fine"),
        EntryPoint("second", "b:plugin", SyntaxError("bad b"), "functai-b"),
        EntryPoint("third", "c:plugin", SystemExit("c quits"), "functai-c"),
    ]
    monkeypatch.setattr(installed, "entry_points", lambda group: broken if group == "functai" else [])
    monkeypatch.setenv("FUNCTAI_DISABLE_PLUGINS", "off")
    found = installed.Installed.discover()
    with pytest.raises(functai.FunctAIError) as refused:
        found.layer()
    message = refused.value.message
    assert "(and 2 more: second, third)" in message
    assert "until they are fixed" in message
    assert "FUNCTAI_DISABLE_PLUGINS=off,first,second,third " in message
    with pytest.raises(functai.FunctAIError) as narrowed:  # narrowed by settings: only those that would run
        found.layer(disable=["first"])
    assert "FUNCTAI_DISABLE_PLUGINS=off,second,third " in narrowed.value.message


def uninstall_at_a_terminal(command, answer, cwd):
    """Run ``command`` (a `functai uninstall`) with stdin a real terminal (a pty) that types ``answer``."""
    import os
    import pty
    import subprocess

    terminal, stdin = pty.openpty()
    try:
        proc = subprocess.Popen(command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=cwd, env={k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")})
        os.close(stdin)
        os.write(terminal, answer.encode() + b"\n")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(terminal)
    return proc.returncode, out, err


def test_uninstall_at_a_terminal_asks_once_and_no_changes_nothing(tmp_path):
    # Answered yes, pip would run in the environment running the tests: that case is in
    # test_installed_venv.py, against a throw-away venv.
    import sys

    command = [sys.executable, "-m", "functai", "uninstall", "functai-not-installed-here"]
    status, out, err = uninstall_at_a_terminal(command, "n", tmp_path)
    assert (status, out) == (0, "nothing was uninstalled\n"), err
    assert err.startswith("uninstall functai-not-installed-here from ") and err.endswith("? [y/N] ")
    assert "Traceback" not in err
