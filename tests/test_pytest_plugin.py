"""functai's pytest plugin (entry point pytest11): its fixtures, and that they isolate tests."""

pytest_plugins = ["pytester"]

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import functai
from functai import Plugin, ai
from functai._hooks import installed
from functai.testing import ScriptedLM, log_events

ROOT = pathlib.Path(__file__).resolve().parent.parent

INNER = textwrap.dedent('''
    import os

    import pytest

    import functai
    from functai import Change, Plugin, ai, tool
    from functai.testing import tool_call

    @ai
    def capital(country: str) -> str:
        """The capital city."""

    shout = Plugin("shout", version="2.0.0", before_call=lambda call: Change(sections=["SHOUT"]))

    def system(lm, i=0):
        return lm.requests[i].messages[0]["content"]

    def test_1_without_fixtures_the_outer_state_is_untouched():
        assert os.environ["FUNCTAI_LM"] == "outer/env"
        assert capital("Peru") == "outer reply"  # the outer client and the outer process plugin
        assert functai.read_calls  # (nothing else to check: no fixture, no change)

    def test_2_isolated_hides_env_settings_and_installed_plugins(functai_isolated):
        assert not {"FUNCTAI_LM", "FUNCTAI_LOAD_PLUGINS", "FUNCTAI_DISABLE_PLUGINS"} & set(os.environ)
        with pytest.raises(functai.FunctAIError) as caught:
            capital("Peru")
        assert caught.value.code == "no-model"

    def test_3_a_plugin_installed_here(scripted_lm, installed_plugins, call_records):
        lm = scripted_lm(["Lima"])
        found = installed_plugins(shout)
        assert [item.state for item in found.found] == ["loaded"]
        assert capital("Peru") == "Lima"
        assert system(lm).endswith("SHOUT")
        assert call_records.last().changes == [
            {"plugin": "shout", "version": "2.0.0", "hook": "before_call", "change": {"sections": ["SHOUT"]}}
        ]
        functai.configure(plugins=[shout], temperature=0.5)  # left behind on purpose

    def test_3b_a_conversation_without_a_store(scripted_lm):
        scripted_lm(["Lima"])
        chat = capital.conversation("alex")
        chat("Peru")
        assert len(chat.all_turns()) == 1

    def test_4_does_not_leak_into_the_next_test(scripted_lm, call_records):
        lm = scripted_lm(["Lima"])
        assert capital("Peru") == "Lima"
        assert "SHOUT" not in system(lm)
        assert "temperature" not in lm.requests[0].settings
        assert len(call_records) == 1 and call_records.last().changes == []
        assert capital.conversation("alex").all_turns() == []  # the default store starts empty

    def test_5_the_script_answers_in_order_and_records_requests(scripted_lm):
        lm = scripted_lm(reply=lambda request: "Paris" if "France" in str(request.messages) else "?")
        assert capital("France") == "Paris" and capital("Peru") == "?"
        assert len(lm.requests) == 2

    def test_6_without_fixtures_again_the_outer_state_is_back():
        assert os.environ["FUNCTAI_LM"] == "outer/env"
        assert capital("Peru") == "outer reply"
''')


def _outer_state():
    lm = ScriptedLM(reply=lambda request: "outer reply")
    outer = Plugin("outer", before_call=lambda call: None)
    functai.configure(client=lm, plugins=[outer])
    inst = installed.Installed.of([Plugin("outer-installed", before_call=lambda call: None)])
    installed.use(inst)
    return lm, inst


def test_the_plugin_is_loaded_through_its_pytest11_entry_point(request):
    plugin = request.config.pluginmanager.get_plugin("functai")
    assert plugin is not None, "functai's pytest11 entry point is not installed: pip install -e ."
    assert plugin.__name__ == "functai.pytest_plugin"
    assert '[project.entry-points.pytest11]\nfunctai = "functai.pytest_plugin"' in (ROOT / "pyproject.toml").read_text()


def test_fixtures_isolate_each_test_and_leave_the_outer_state_alone(pytester, monkeypatch):
    monkeypatch.setenv("FUNCTAI_LM", "outer/env")
    lm, inst = _outer_state()
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=7)
    # Back out here: the outer settings, installed plugins and environment are as they were.
    assert installed.installed() is inst
    assert os.environ["FUNCTAI_LM"] == "outer/env"

    @ai
    def capital(country: str) -> str:
        """The capital city."""

    value, record = capital.run("Peru")
    assert value == "outer reply" and record.model == "scripted"
    assert len(lm.requests) == 3  # two inner tests without fixtures, and this call


def test_installed_plugins_adapts_modules_names_them_and_loads_entry_points(installed_plugins, scripted_lm, pytester,
                                                                         monkeypatch):
    pytester.makepyfile(
        functai_plugin_house=textwrap.dedent('''
            import functai

            @functai.hookimpl
            def before_call(call):
                return functai.Change(sections=["House style."])
        '''),
    )
    monkeypatch.syspath_prepend(str(pytester.path))
    import functai_plugin_house as house

    lm = scripted_lm(["a", "b", "c"])

    @ai
    def answer(question: str) -> str:
        """Answer."""

    found = installed_plugins(house=house)
    assert [(i.name, i.version, i.distribution, i.state) for i in found.found] == [("house", "0.0.0", "test", "loaded")]
    value, record = answer.run("q")
    assert record.changes[0]["plugin"] == "house" and lm.requests[0].messages[0]["content"].endswith("House style.")

    # A module on its own is named as functai names it: the module's last name part.
    assert [item.name for item in installed_plugins(house).found] == ["functai_plugin_house"]

    # A plugin file.
    (pytester.path / "modes.py").write_text(
        "from functai import Plugin, Change\n"
        "plugin = Plugin('modes', version='1.1.0', before_call=lambda c: Change(sections=['Careful.']))\n"
    )
    found = installed_plugins(str(pytester.path / "modes.py"))
    assert [(i.name, i.version) for i in found.found] == [("modes", "1.1.0")]

    # A name is an entry point of the group `functai`, loaded as pip-installed plugins are: a broken one fails closed.
    class EntryPoint:
        def __init__(self, name, found):
            self.name, self.value, self._found = name, f"{name}_module", found
            self.dist = type("Dist", (), {"name": f"functai-{name}", "version": "3.0.0"})()

        def load(self):
            if isinstance(self._found, Exception):
                raise self._found
            return self._found

    entry_points = [EntryPoint("house", house), EntryPoint("broken", ImportError("no yaml"))]
    monkeypatch.setattr(installed, "entry_points", lambda group: entry_points if group == "functai" else [])
    found = installed_plugins("house")
    assert [(i.name, i.version, i.distribution) for i in found.found] == [("house", "3.0.0", "functai-house")]
    value, record = answer.run("q")
    assert record.changes[0]["version"] == "3.0.0"
    with log_events() as logged:
        installed_plugins("house", "broken")
    assert logged.named("failed to load")
    with pytest.raises(functai.PluginError) as caught:
        answer("q")
    assert caught.value.code == "plugin-load" and "functai-broken" in str(caught.value)
    with pytest.raises(functai.PluginError) as caught:
        installed_plugins("nothere")
    assert caught.value.code == "plugin-load" and "pip install" in str(caught.value)

    # Mistakes are refused.
    with pytest.raises(TypeError, match="entry-point name must be the plugin's name"):
        installed_plugins(other=Plugin("house"))
    with pytest.raises(functai.PluginError) as caught:
        installed_plugins(Plugin("house"), house=house)
    assert caught.value.code == "plugin-name"

    # None installed.
    assert installed_plugins().found == ()
    value, record = answer.run("q")
    assert record.changes == []


def test_call_records_reads_back_this_tests_calls_only(scripted_lm, call_records):
    scripted_lm(["one", "two"])

    @ai
    def echo(text: str) -> str:
        """Echo."""

    assert len(call_records) == 0
    with pytest.raises(AssertionError, match="no call was recorded"):
        call_records.last()
    echo("a")
    echo("b")
    records = call_records.read()
    assert [r.output for r in records] == ["one", "two"]
    assert call_records.last().inputs == {"text": "b"}
    assert call_records.folder.is_dir()


def test_importing_the_plugin_changes_nothing_and_scans_no_entry_points():
    code = textwrap.dedent('''
        import importlib.metadata, sys
        calls = []
        # functai's own reader opens entry_points.txt files; importlib.metadata is counted too
        sys.addaudithook(lambda event, args: event == "open" and str(args[0]).endswith("entry_points.txt")
                         and calls.append(args))
        real = importlib.metadata.entry_points
        importlib.metadata.entry_points = lambda *a, **k: calls.append(a) or real(*a, **k)
        try:
            import importlib_metadata
            real2 = importlib_metadata.entry_points
            importlib_metadata.entry_points = lambda *a, **k: calls.append(a) or real2(*a, **k)
        except ImportError:
            pass
        import functai.pytest_plugin
        from functai import _layers as layers
        from functai._hooks import installed
        heavy = [m for m in ("httpx", "structlog", "functai._models.openai", "functai._hooks.entrypoints")
                 if m in sys.modules]
        print(len(calls), heavy, installed._installed is None, layers._process is layers.EMPTY)
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "FUNCTAI_LM": "x/y"})
    assert out.stdout.split() == ["0", "[]", "True", "True"]
