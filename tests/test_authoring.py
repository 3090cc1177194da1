"""Authoring plugins: the decorator form of `on`, `describe`, refused pluggy ordering
options, a module plugin's version, and installed plugins that do not fit this functai."""

import functools
import types
import warnings

import pluggy
import pytest

import functai
from functai import Change, Plugin, PluginError, ai
from functai._hooks import installed as installed_module
from functai._hooks.hookimpls import from_hookimpls
from functai._hooks.installed import FAILED, Installed, InstalledPlugin
from functai.testing import ScriptedLM, log_events, tool_call


@functai.tool(effects="changes")
def delete_file(path: str) -> str:
    """Delete a file."""
    return "deleted"


@ai(tools=[delete_file])
def tidy(request: str) -> str:
    """Tidy up."""


def test_on_without_a_handler_is_a_decorator():
    guard = Plugin("guard", version="1.0.0")

    @guard.on("tool_call")
    def no_deletes(tool):
        if tool.name == "delete_file":
            raise functai.FunctAIError("no deleting", code="no-deletes")
        return None

    assert no_deletes.__name__ == "no_deletes"  # the decorator returns the function itself
    assert guard.handlers("tool_call") == (no_deletes,)
    functai.configure(client=ScriptedLM([tool_call("delete_file", {"path": "a"}), "ok"]), plugins=[guard])
    value, record = tidy.run("x")
    assert record.tool_calls[0]["blocked"] == "guard"


def test_the_decorator_form_checks_the_hook_name_at_once():
    guard = Plugin("guard")
    with pytest.raises(PluginError) as info:
        guard.on("tool_cal")
    assert info.value.code == "plugin-hook" and "tool_call" in info.value.message


def helper_handler(call):
    return None


def test_describe_names_version_api_and_each_hooks_handlers():
    plugin = Plugin("audit", version="2.0.0", description="Keeps an audit trail.")

    @plugin.before_call
    def note(call):
        return None

    plugin.on("before_call", helper_handler)
    plugin.on("call_end", lambda call: None)
    text = plugin.describe()
    assert text.splitlines() == [
        "audit 2.0.0 (plugin API 1)",
        "  Keeps an audit trail.",
        f"  before_call: {__name__}.test_describe_names_version_api_and_each_hooks_handlers.<locals>.note, "
        f"{__name__}.helper_handler",
        f"  call_end: {__name__}.test_describe_names_version_api_and_each_hooks_handlers.<locals>.<lambda>",
    ]
    assert Plugin("empty").describe() == "empty 0.0.0 (plugin API 1)\n  no handlers"


def test_describe_of_a_hookimpl_module_names_its_functions():
    module = types.ModuleType("my_rules")
    module.plugin_name = "my-rules"

    @functai.hookimpl
    def before_call(call):
        return None

    @functai.hookimpl
    def call_end():  # a hookimpl may take fewer arguments than the spec
        return None

    module.before_call, module.call_end = before_call, call_end
    lines = from_hookimpls(module).describe().splitlines()
    assert lines[0] == "my-rules 0.0.0 (plugin API 1)"
    where = f"{__name__}.test_describe_of_a_hookimpl_module_names_its_functions.<locals>"
    assert lines[1:] == [f"  before_call: {where}.before_call", f"  call_end: {where}.call_end"]


@pytest.mark.parametrize("option", ["tryfirst", "trylast", "hookwrapper", "wrapper"])
def test_hookimpl_ordering_options_are_refused_saying_order_comes_from_layers(option):
    with pytest.raises(PluginError) as info:
        @functai.hookimpl(**{option: True})
        def before_call(call):
            return None
    assert info.value.code == "plugin-hook"
    assert f"{option}=True" in info.value.message and "layers" in info.value.message


def test_the_same_options_from_pluggys_own_marker_are_refused_when_the_plugin_is_given():
    mark = pluggy.HookimplMarker("functai")
    module = types.ModuleType("ordered")

    @mark(tryfirst=True)
    def before_call(call):
        return None

    module.before_call = before_call
    with pytest.raises(PluginError) as info:
        functai.configure(plugins=[module])
    assert info.value.code == "plugin-hook" and info.value.plugin == "ordered" and info.value.hook == "before_call"
    assert "tryfirst=True" in info.value.message and "layers" in info.value.message


def test_a_plugin_file_with_tryfirst_says_so_not_just_that_it_failed_to_load(tmp_path):
    path = tmp_path / "ordered.py"
    path.write_text("import functai\n@functai.hookimpl(trylast=True)\ndef before_call(call):\n    return None\n")
    with pytest.raises(PluginError) as info:
        functai.load_plugin(str(path))
    assert info.value.code == "plugin-hook" and "trylast=True" in info.value.message


def test_plain_hookimpl_options_still_work():
    module = types.ModuleType("fine")

    @functai.hookimpl(specname="before_call")
    def add_section(call):
        return Change(sections=["fine"])

    module.add_section = add_section
    assert from_hookimpls(module).hooks == ("before_call",)


def test_a_hookimpl_module_takes_its_version_from_its_distribution():
    # a module under the top-level package of an installed distribution (pluggy), declaring no version
    module = types.ModuleType("pluggy.functai_rules")

    @functai.hookimpl
    def before_call(call):
        return None

    module.before_call = before_call
    plugin = from_hookimpls(module, name="rules")
    import importlib.metadata

    assert plugin.version == importlib.metadata.version("pluggy") != "0.0.0"

    own = types.ModuleType("pluggy.versioned")
    own.__version__ = "7.7.7"
    own.before_call = before_call
    assert from_hookimpls(own, name="versioned").version == "7.7.7"

    nowhere = types.ModuleType("no_such_distribution_here")
    nowhere.before_call = before_call
    assert from_hookimpls(nowhere, name="nowhere").version == "0.0.0"


class _Dist:
    def __init__(self, requires, name="functai-old", version="3.0.0"):
        self.name, self.version, self.requires = name, version, requires


class _EntryPoint:
    def __init__(self, name, dist, target):
        self.name, self.value, self.dist, self._target = name, f"{name}_module", dist, target
        self.loaded = False

    def load(self):
        self.loaded = True
        return self._target


def _load(requires, target=None):
    target = target or Plugin("old", before_call=lambda call: Change(sections=["old"]))
    entry_point = _EntryPoint("old", _Dist(requires), target)
    item = InstalledPlugin(entry_point)
    with log_events() as caught:
        item.load()
    return item, entry_point, caught


def test_two_installed_plugins_of_one_name_refuse_every_call_until_one_goes(monkeypatch):
    twins = [_EntryPoint("dup", _Dist([], name=f"fx-dup{n}", version="1.0"),
                         Plugin("dup", before_call=lambda call, n=n: Change(sections=[f"from {n}"])))
             for n in (1, 2)]
    twins[1].value = "dup_module_two"
    monkeypatch.setattr(installed_module, "entry_points", lambda group: list(twins))
    with log_events() as caught:
        found = Installed.discover()
    assert {item.state for item in found.found} == {FAILED} and caught.named("plugins of one name")
    installed_module.use(found)
    functai.configure(client=ScriptedLM(["ok"]))
    with pytest.raises(PluginError) as info:
        tidy("x")
    assert info.value.code == "plugin-name" and "fx-dup1" in info.value.message and "fx-dup2" in info.value.message
    functai.configure(disable_plugins=["dup"])
    assert tidy("x") == "ok"
    monkeypatch.setattr(installed_module, "entry_points", lambda group: [twins[0], twins[0]])  # one, found twice
    assert [item.state for item in Installed.discover().found] == ["loaded", "loaded"]


def test_a_name_no_installed_plugin_has_in_the_load_or_disable_list_is_logged(monkeypatch):
    one = _EntryPoint("guard", _Dist([], name="fx-guard", version="1.0"), Plugin("guard"))
    monkeypatch.setattr(installed_module, "entry_points", lambda group: [one])
    monkeypatch.setenv("FUNCTAI_LOAD_PLUGINS", "gaurd")
    monkeypatch.setenv("FUNCTAI_DISABLE_PLUGINS", "nothing, guard")
    with log_events() as caught:
        Installed.discover()
    said = caught.named("no installed plugin of that name")
    assert len(said) == 2 and "FUNCTAI_LOAD_PLUGINS names=gaurd" in said[0]
    assert "FUNCTAI_DISABLE_PLUGINS names=nothing installed=guard" in said[1]


def test_an_installed_plugin_whose_functai_range_excludes_this_one_fails_closed():
    item, entry_point, caught = _load(["functai>=9,<10", "attrs"])
    assert item.state == FAILED and item.code == "plugin-incompatible" and not entry_point.loaded
    assert "supports functai<10,>=9" in item.reason
    assert f"functai {functai.__version__}" in item.reason and "functai-old 3.0.0" in item.reason
    assert caught.named("plugin incompatible")
    installed_module.use(Installed([item]))
    functai.configure(client=ScriptedLM(["ok"]))
    with pytest.raises(PluginError) as info:
        tidy("x")
    assert info.value.code == "plugin-incompatible" and info.value.plugin == "old"
    assert functai.__version__ in info.value.message and "FUNCTAI_DISABLE_PLUGINS=old" in info.value.message
    functai.configure(disable_plugins=["old"])
    assert tidy("x") == "ok"


@pytest.mark.parametrize("requires", [
    ["functai>=0.1"], ["functai>=2,<3"], ["functai"], ["attrs>=1"], None,
    ["functai>=99; extra == 'never'"], ["functai>=99; python_version < '3'"],
])
def test_a_range_that_includes_this_functai_or_does_not_apply_loads(requires):
    item, entry_point, _ = _load(requires)
    assert item.state == "loaded" and entry_point.loaded


def test_an_incompatible_plugin_is_listed_as_failed_with_the_reason():
    item, _, _ = _load(["functai<0.0.1"])
    data = item.as_dict()
    assert data["state"] == "failed" and "supports functai<0.0.1" in data["reason"]


@pytest.mark.parametrize("handler", [lambda: None, lambda call, extra: None, lambda *, call: None])
def test_a_handler_that_cannot_take_the_event_is_refused_when_registered(handler):
    with pytest.raises(functai.FunctAIError) as info:
        functai.Plugin("guard", before_call=handler)
    assert info.value.code == "plugin-hook"
    assert "its before_call handler" in str(info.value) and "functai.events.BeforeCall" in str(info.value)
    plugin = functai.Plugin("guard")
    with pytest.raises(functai.FunctAIError):
        plugin.on("request", handler)
    assert plugin.hooks == ()


def test_handlers_that_take_the_event_in_any_form_are_kept():
    def decorated(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    @decorated
    def traced(call):
        return None

    seen = []
    plugin = functai.Plugin("fine", before_call=lambda call, more=1: None, request=seen.append, reply=print,
                            tool_call=traced, call_end=lambda *events: None)
    assert plugin.hooks == ("before_call", "request", "reply", "tool_call", "call_end")


def test_a_hookimpl_pluggy_refuses_is_named_on_one_line():
    module = types.ModuleType("two_args")

    @functai.hookimpl
    def before_call(call, extra):
        return None

    module.before_call = before_call
    with pytest.raises(functai.FunctAIError) as info:
        from_hookimpls(module)
    assert info.value.code == "plugin-hook" and "\n" not in str(info.value)
    assert "Argument(s) {'extra'} are declared in the hookimpl" in str(info.value)
