"""Plugin: names, versions, API, hooks, handlers, repr; pluggy-style plugins; files."""

import os
import textwrap
import time
import types

import pluggy
import pytest

import functai
from functai import Change, Plugin, PluginError
from functai._hooks.adapt import as_plugins
from functai._hooks.hookimpls import from_hookimpls
from functai._hooks.specs import HOOKS


def test_the_spec_example_repr():
    modes = Plugin("modes", version="1.0.0")

    @modes.before_call
    def careful(call):
        return Change(sections=["Answer carefully. Cite the file you read."])

    def no_deletes(tool):
        if tool.name == "delete_file":
            raise functai.FunctAIError("deleting files is not allowed here", code="no-deletes")

    guard = Plugin("no-deletes", tool_call=no_deletes)
    assert repr((modes, guard)) == '(Plugin("modes", 1.0.0: before_call), Plugin("no-deletes", 0.0.0: tool_call))'


def test_repr_lists_hooks_in_table_order_not_registration_order():
    p = Plugin("p")
    p.on("turn_end", lambda e: None)
    p.on("before_call", lambda e: None)
    p.on("turn_start", lambda e: None)
    assert repr(p) == 'Plugin("p", 0.0.0: turn_start, before_call, turn_end)'
    assert repr(Plugin("empty")) == 'Plugin("empty", 0.0.0)'


@pytest.mark.parametrize("name", ["", "Modes", "1abc", "-x", "a b", "a.b", "x" * 65, None, 3, "é"])
def test_bad_names_refuse_plugin_name(name):
    with pytest.raises(PluginError) as info:
        Plugin(name)
    assert info.value.code == "plugin-name"
    assert "lower-case letter first" in str(info.value)


@pytest.mark.parametrize("name", ["a", "modes", "no-deletes", "a_b-9", "x" * 64])
def test_good_names(name):
    assert Plugin(name).name == name


@pytest.mark.parametrize("version", ["one", "", " ", "1.0.0 ", "latest", "1..0", "1.0.0-", None, 1, 1.0])
def test_a_version_that_is_no_version_refuses_plugin_version(version):
    with pytest.raises(PluginError) as info:
        Plugin("x", version=version)
    assert (info.value.code, info.value.plugin) == ("plugin-version", "x")
    assert "PEP 440 or semantic version" in info.value.message


@pytest.mark.parametrize("version", ["1", "2.1", "1.0.0", "0.0.0", "1.0.0rc1", "2.0b3", "1.0.post1", "1.0.dev2",
                                     "1!2.0", "1.0+local.7", "v1.2", "1.0.0-beta.2+build.5", "1.0.0-x.7.z.92"])
def test_pep440_and_semantic_versions(version):
    assert Plugin("x", version=version).version == version


@pytest.mark.parametrize("api", [0, 2, "1", 1.5, True])
def test_other_api_refuses_plugin_api(api):
    with pytest.raises(PluginError) as info:
        Plugin("p", api=api)
    assert info.value.code == "plugin-api"
    assert info.value.plugin == "p"
    assert "API" in info.value.message


def test_unknown_hook_refuses_plugin_hook_at_registration_and_suggests():
    p = Plugin("p")
    with pytest.raises(PluginError) as info:
        p.on("before_cal", lambda e: None)
    assert info.value.code == "plugin-hook"
    assert (info.value.plugin, info.value.hook) == ("p", "before_cal")
    assert "did you mean 'before_call'" in info.value.message
    with pytest.raises(PluginError) as info:
        Plugin("q", after_call=lambda e: None)
    assert info.value.code == "plugin-hook"


def test_non_callable_handler_is_a_type_error():
    with pytest.raises(TypeError):
        Plugin("p", before_call="not a function")
    with pytest.raises(TypeError):
        Plugin("p").on("tool_call", 42)


def test_one_decorator_per_hook_and_registration_order():
    p = Plugin("p")
    for hook in HOOKS:
        assert callable(getattr(p, hook))
    first = p.before_call(lambda e: 1)
    second = p.on("before_call", lambda e: 2)
    assert p.handlers("before_call") == (first, second)
    assert p.hooks == ("before_call",)


def test_hooks_come_from_the_pluggy_hookspecs():
    from functai._hooks import specs

    assert HOOKS == ("turn_start", "context", "before_call", "request", "model_error", "chunk", "reply", "tool_call",
                     "tool_error", "tool_result", "call_end", "turn_end", "turn_wait", "turn_answer")
    for hook in HOOKS:
        assert getattr(specs, hook).__doc__.strip()


# pluggy-style plugins ------------------------------------------------------


def _module(name, **functions):
    module = types.ModuleType(name)
    for key, fn in functions.items():
        setattr(module, key, fn)
    return module


def test_module_with_hookimpls_becomes_a_plugin():
    @functai.hookimpl
    def before_call(call):
        return Change(sections=["Answer in French."])

    module = _module("functai_plugin_french", before_call=before_call, __version__="2.1.0")
    plugin = from_hookimpls(module)
    assert repr(plugin) == 'Plugin("functai_plugin_french", 2.1.0: before_call)'
    assert plugin.handlers("before_call") == (before_call,)
    assert from_hookimpls(module) is plugin  # adapted once


def test_object_with_hookimpls_and_declared_name():
    class Guard:
        plugin_name = "guard"
        plugin_version = "1.0"

        @functai.hookimpl
        def tool_call(self, tool):
            return None

    plugin = from_hookimpls(Guard())
    assert repr(plugin) == 'Plugin("guard", 1.0: tool_call)'


def test_unknown_hookimpl_refuses_plugin_hook_through_pluggy():
    @functai.hookimpl
    def before_cal(call):
        return None

    with pytest.raises(PluginError) as info:
        from_hookimpls(_module("typo", before_cal=before_cal))
    assert info.value.code == "plugin-hook"
    assert info.value.hook == "before_cal"
    assert isinstance(info.value.__cause__, pluggy.PluginValidationError)


def test_hookimpl_with_an_argument_the_spec_lacks_refuses_plugin_hook():
    @functai.hookimpl
    def before_call(call, extra):
        return None

    with pytest.raises(PluginError) as info:
        from_hookimpls(_module("extra", before_call=before_call))
    assert info.value.code == "plugin-hook"
    assert info.value.hook == "before_call"
    assert "extra" in info.value.message


def test_a_class_is_not_a_plugin_but_its_instance_is():
    class Guard:
        plugin_name = "guard"

        @functai.hookimpl
        def tool_call(self, tool):
            return None

    with pytest.raises(TypeError, match="instance"):
        functai.configure(plugins=[Guard])
    functai.configure(plugins=[Guard()])


def test_object_without_hookimpls_is_not_a_plugin():
    with pytest.raises(TypeError, match="hookimpl"):
        from_hookimpls(_module("nothing", helper=lambda: 1))


def test_wrapper_hookimpls_are_refused():
    with pytest.raises(PluginError) as info:  # at once, by functai's marker
        @functai.hookimpl(wrapper=True)
        def before_call(call):
            yield
    assert info.value.code == "plugin-hook"

    @pluggy.HookimplMarker("functai")(wrapper=True)  # pluggy's own marker: when the plugin is given
    def before_call(call):
        yield

    with pytest.raises(PluginError) as info:
        from_hookimpls(_module("wrapped", before_call=before_call))
    assert info.value.code == "plugin-hook"


# the plugins setting ---------------------------------------------------------


def test_plugins_setting_must_be_a_list():
    p = Plugin("p")
    with pytest.raises(TypeError, match="must be a list"):
        functai.configure(plugins=p)
    with pytest.raises(TypeError, match="must be a list"):
        functai.settings(plugins="plugins/p.py")
    with pytest.raises(TypeError):
        functai.configure(plugins=[42])


def test_two_different_plugins_with_one_name_in_one_layer_refuse():
    with pytest.raises(PluginError) as info:
        functai.configure(plugins=[Plugin("x"), Plugin("x")])
    assert info.value.code == "plugin-name"
    assert info.value.plugin == "x"
    p = Plugin("x")
    assert as_plugins([p, p], "test") == (p,)


# plugin files --------------------------------------------------------------


def _write(path, text):
    path.write_text(textwrap.dedent(text))


def test_load_plugin_from_a_file_and_cache_by_mtime(tmp_path):
    path = tmp_path / "modes.py"
    _write(path, """
        from functai import Plugin, Change
        plugin = Plugin("modes", version="1.0.0", before_call=lambda c: Change(sections=["one"]))
    """)
    first = functai.load_plugin(path)
    assert first.version == "1.0.0"
    assert functai.load_plugin(str(path)) is first
    _write(path, """
        from functai import Plugin, Change
        plugin = Plugin("modes", version="1.0.1", before_call=lambda c: Change(sections=["two"]))
    """)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    second = functai.load_plugin(path)
    assert second is not first and second.version == "1.0.1"
    assert as_plugins([str(path)], "test") == (second,)


def test_load_plugin_file_with_hookimpls_object(tmp_path):
    path = tmp_path / "french.py"
    _write(path, """
        import functai

        class French:
            plugin_name = "french"

            @functai.hookimpl
            def before_call(self, call):
                return functai.Change(sections=["In French."])

        plugin = French()
    """)
    assert repr(functai.load_plugin(path)) == 'Plugin("french", 0.0.0: before_call)'


def test_load_plugin_errors(tmp_path):
    with pytest.raises(PluginError) as info:
        functai.load_plugin(tmp_path / "missing.py")
    assert info.value.code == "plugin-load" and "missing.py" in info.value.message

    nothing = tmp_path / "nothing.py"
    _write(nothing, "x = 1\n")
    with pytest.raises(PluginError) as info:
        functai.load_plugin(nothing)
    assert info.value.code == "plugin-load" and "defines no `plugin`" in info.value.message

    broken = tmp_path / "broken.py"
    _write(broken, "import not_a_module_anywhere\n")
    with pytest.raises(PluginError) as info:
        functai.load_plugin(broken)
    assert info.value.code == "plugin-load"
    assert isinstance(info.value.__cause__, ModuleNotFoundError)

    wrong = tmp_path / "wrong.py"
    _write(wrong, "plugin = 42\n")
    with pytest.raises(PluginError) as info:
        functai.load_plugin(wrong)
    assert info.value.code == "plugin-load"


def test_installed_plugin_name_that_is_not_installed():
    with pytest.raises(PluginError) as info:
        functai.configure(plugins=["not-installed-anywhere"])
    assert info.value.code == "plugin-load"
