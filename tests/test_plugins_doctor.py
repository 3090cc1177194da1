"""`functai plugins doctor`: each installed plugin imported in a process of its own, with a time limit,
and reported as one line — a plugin that hangs, kills its process or was made for another functai
included. The plugins are real distributions (``*.dist-info`` folders and modules) on sys.path.
"""

import io
import json
import os
import sys
import textwrap

import pytest

from functai._cli import main

OK_HOOKS = '''
import functai

@functai.hookimpl
def tool_call(tool):
    return None
'''

#: entry-point name → (group, module source, Requires-Dist lines)
PLUGINS = {
    "fine": ("functai", OK_HOOKS + "print('a plugin that prints at import')\n", ["functai>=0.1"]),
    "fine-plugin": ("functai", '''
        from functai import Plugin
        plugin = Plugin("fine-plugin", version="2.0.0", before_call=lambda call: None)
    ''', []),
    "needs-tone": ("functai", '''
        from functai import Plugin
        plugin = Plugin("needs-tone", requires=["tone"], before_call=lambda call: None)
    ''', []),
    "needs-fine": ("functai", '''
        from functai import Plugin
        plugin = Plugin("needs-fine", requires=["fine"], before_call=lambda call: None)
    ''', []),
    "hangs": ("functai", '''
        import os, sys, time
        with open(os.environ["DOCTOR_PIDS"], "a") as file:
            file.write(f"{os.getpid()}\\n")
        time.sleep(3600)
    ''', []),
    "killed": ("functai", '''
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    ''', []),
    "exits": ("functai", '''
        import os
        os._exit(3)
    ''', []),
    "future": ("functai", '''
        raise RuntimeError("an incompatible plugin is never imported")
    ''', ["functai<0.0.1"]),
    "missing-dep": ("functai", '''
        import a_module_that_is_not_installed
    ''', []),
    "bad-hook": ("functai", '''
        import functai

        @functai.hookimpl
        def tool_calls(tool):
            return None
    ''', []),
    "api-two": ("functai", '''
        from functai import Plugin
        plugin = Plugin("api-two", api=2)
    ''', []),
    "two-args": ("functai", '''
        from functai import Plugin
        plugin = Plugin("two-args", before_call=lambda call, extra: None)
    ''', []),
    "factory": ("functai.builtins", '''
        def factory(**options):
            return options
    ''', []),
    "not-callable": ("functai.builtins", '''
        factory = 42
    ''', []),
    "gateway": ("functai.providers", '''
        import functai

        @functai.providerimpl
        def functai_client(provider, model, settings):
            return None
    ''', []),
    "misnamed": ("functai.providers", '''
        import functai

        @functai.providerimpl
        def functai_clients(provider, model, settings):
            return None
    ''', []),
    "lines": ("functai.stores", '''
        def open_store(url):
            raise NotImplementedError
    ''', []),
}


def _distribution(site, name, group, source, requires):
    module = "doctor_" + name.replace("-", "_")
    dist = f"functai-doctor-{name}"
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0.0\n"
                                   + "".join(f"Requires-Dist: {line}\n" for line in requires))
    target = {"functai": module if "plugin = " not in source else f"{module}:plugin", "functai.providers": module,
              "functai.builtins": f"{module}:factory", "functai.stores": f"{module}:open_store"}[group]
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {target}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The plugins above installed in a folder at the front of sys.path (the children get the same sys.path)."""
    folder = tmp_path / "site"
    folder.mkdir()
    for name, (group, source, requires) in PLUGINS.items():
        _distribution(folder, name, group, source, requires)
    monkeypatch.setattr(sys, "path", [str(folder), *sys.path])
    monkeypatch.setenv("DOCTOR_PIDS", str(tmp_path / "pids"))
    monkeypatch.delenv("FUNCTAI_DISABLE_PLUGINS", raising=False)
    return tmp_path


def doctor(*args):
    out, err = io.StringIO(), io.StringIO()
    status = main(["plugins", "doctor", *args], out, err)
    return status, out.getvalue(), err.getvalue()


def rows(out):
    """The line of each plugin, by name, each checked to be there once."""
    lines = [line for line in out.splitlines() if not line.startswith("to run calls without")]
    found = {}
    for line in lines[1:-1]:
        status, kind, name, *rest = line.split()
        assert name not in found, f"{name} has two lines"
        found[name] = (status, kind, " ".join(rest))
    return found


def test_each_plugin_costs_one_line_whatever_its_import_does(site):
    status, out, err = doctor(*PLUGINS, "--timeout", "3")
    assert status == 1, err
    assert "Traceback" not in out + err and err == ""
    lines = rows(out)
    assert set(lines) == set(PLUGINS)
    assert out.splitlines()[0].split() == ["STATUS", "KIND", "NAME", "DISTRIBUTION", "CHECK"]
    assert out.splitlines()[-2].endswith(f"(limit 3 s): 7 ok, 0 slow, {len(PLUGINS) - 7} broken")
    off = "api-two,bad-hook,exits,future,hangs,killed,missing-dep,two-args"  # not not-callable: not a plugin
    assert out.splitlines()[-1] == ("to run calls without the broken plugins until they are fixed or uninstalled: "
                                    f"FUNCTAI_DISABLE_PLUGINS={off}")

    def check(name):
        status, kind, rest = lines[name]
        assert rest.startswith(f"functai-doctor-{name} 1.0.0 "), rest
        return status, kind, rest.removeprefix(f"functai-doctor-{name} 1.0.0 ")

    for name in ("fine", "fine-plugin"):
        state, kind, said = check(name)
        assert (state, kind) == ("ok", "plugin") and said.startswith("imported in ")
    assert check("fine")[2].endswith("hooks tool_call; API 1")
    assert check("fine-plugin")[2].endswith("hooks before_call; API 1")
    assert check("factory")[:2] == ("ok", "builtin")
    assert check("gateway")[:2] == ("ok", "provider") and check("lines")[:2] == ("ok", "store")

    # a plugin that requires one not installed works, and says so: a program may give it
    assert check("needs-tone")[0] == "ok" and check("needs-tone")[2].endswith(
        "hooks before_call; API 1; requires tone, not installed: a program must give it "
        "(else its calls refuse plugin-requires)")
    assert check("needs-fine")[0] == "ok" and check("needs-fine")[2].endswith("hooks before_call; API 1")

    fine = ("fine", "fine-plugin", "factory", "gateway", "lines", "needs-tone", "needs-fine")
    broken = {name: check(name)[2] for name in PLUGINS if name not in fine}
    assert all(check(name)[0] == "broken" for name in broken)
    assert broken["hangs"] == "plugin-timeout: its import did not finish within 3 s; its process was stopped"
    assert broken["killed"] == "plugin-crashed: its import ended its process (killed by SIGKILL) before it finished"
    assert broken["exits"] == "plugin-crashed: its import ended its process (exit status 3) before it finished"
    assert broken["future"].startswith("plugin-incompatible: functai-doctor-future 1.0.0 supports functai<0.0.1, "
                                       "but this is functai ")
    assert broken["missing-dep"] == ("plugin-load: ModuleNotFoundError: "
                                     "No module named 'a_module_that_is_not_installed'")
    assert broken["bad-hook"].startswith("plugin-hook: plugin 'bad-hook' failed pluggy validation: "
                                         "unknown hook 'tool_calls'")
    assert broken["api-two"].startswith("plugin-api: plugin 'api-two' was written for plugin API 2")
    assert broken["two-args"].startswith("plugin-hook: plugin 'two-args': its before_call handler ")
    assert "(call, extra) cannot be called with the one argument a hook passes" in broken["two-args"]
    assert broken["not-callable"] == "plugin-load: it gives an object of type int, not a function to call"
    assert broken["misnamed"].startswith("plugin-hook: pluggy refuses its hookimpls: ")
    assert "functai_clients" in broken["misnamed"]

    # the hanging import's process was stopped, not left behind
    [pid] = (site / "pids").read_text().split()
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)


def test_all_ok_exits_0_and_names_or_distributions_choose_what_is_checked(site):
    status, out, err = doctor("fine", "functai-doctor-factory")
    assert status == 0, err
    assert set(rows(out)) == {"fine", "factory"}
    assert out.splitlines()[-1].endswith("2 ok, 0 slow, 0 broken")

    status, out, err = doctor("no-such-plugin")
    assert status == 2 and "error [not-found]: no installed plugin or plugin distribution named 'no-such-plugin'" in err
    status, out, err = doctor("fine", "--timeout", "0")
    assert status == 2 and "error [usage]" in err and "--timeout" in err


def test_json_has_a_row_per_plugin_and_the_count_of_broken_ones(site):
    status, out, _ = doctor("fine", "future", "exits", "--json")
    assert status == 1
    data = json.loads(out)
    assert data["broken"] == 2
    by_name = {row["name"]: row for row in data["plugins"]}
    assert by_name["fine"]["status"] == "ok" and by_name["fine"]["code"] is None
    assert by_name["fine"]["hooks"] == ["tool_call"] and by_name["fine"]["api"] == 1
    assert isinstance(by_name["fine"]["seconds"], float)
    assert (by_name["future"]["code"], by_name["future"]["seconds"]) == ("plugin-incompatible", None)
    assert by_name["exits"]["code"] == "plugin-crashed"
    assert {row["distribution"] for row in data["plugins"]} == {f"functai-doctor-{n}" for n in ("fine", "future", "exits")}


def test_an_import_slower_than_the_limit_given_is_slow_not_broken(site, tmp_path):
    (site / "site" / "doctor_fine.py").write_text(OK_HOOKS + "import time\ntime.sleep(0.3)\n")
    status, out, _ = doctor("fine", "--slow", "0.2")
    assert status == 0
    state, _, said = rows(out)["fine"]
    assert state == "slow" and "(slower than 0.2 s)" in said
    status, out, _ = doctor("fine", "--slow", "60")
    assert rows(out)["fine"][0] == "ok"


def test_nothing_installed(tmp_path, monkeypatch):
    from functai._hooks import installed

    monkeypatch.setattr(installed, "entry_points", lambda group: [])
    status, out, _ = doctor()
    assert status == 0 and out.startswith("no installed plugins (entry-point groups functai, functai.builtins")


SPAWNING = {
    "spawns": '''
        import os, subprocess, sys
        import functai

        @functai.hookimpl
        def tool_call(tool):
            return None

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
        with open(os.environ["DOCTOR_PIDS"], "a") as file:
            file.write(f"{child.pid}\\n")
    ''',
    "spawns-and-hangs": '''
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time; "
                                  "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'], "
                                  "start_new_session=True); open(os.environ['DOCTOR_PIDS'], 'a').write(f'{g.pid}\\\\n'); "
                                  "time.sleep(3600)"], start_new_session=True)
        with open(os.environ["DOCTOR_PIDS"], "a") as file:
            file.write(f"{child.pid}\\n")
        time.sleep(3600)
    ''',
}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the child is a subreaper on Linux")
def test_whatever_an_import_starts_in_a_session_of_its_own_is_ended_and_a_finished_import_is_timed(tmp_path,
                                                                                                   monkeypatch):
    import time

    folder = tmp_path / "site"
    folder.mkdir()
    for name, source in SPAWNING.items():
        _distribution(folder, name, "functai", source, [])
    monkeypatch.setattr(sys, "path", [str(folder), *sys.path])
    monkeypatch.setenv("DOCTOR_PIDS", str(tmp_path / "pids"))
    monkeypatch.delenv("FUNCTAI_DISABLE_PLUGINS", raising=False)
    started = time.monotonic()
    status, out, err = doctor("spawns", "--timeout", "4")
    assert status == 0, out + err
    assert time.monotonic() - started < 4  # the process it left, holding no pipe of ours, did not hold the check
    assert rows(out)["spawns"][0] == "ok"
    status, out, err = doctor("spawns-and-hangs", "--timeout", "2")
    assert status == 1 and "plugin-timeout: its import did not finish within 2 s" in rows(out)["spawns-and-hangs"][2]
    pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 3  # the first plugin's child; the second's child and grandchild
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in pids if _alive(pid)] == []
