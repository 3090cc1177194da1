"""functai's pytest plugin: fixtures for testing plugins and AI functions.

Installed with functai (entry point ``pytest11``), so pytest loads it in every
project where functai is installed. Importing it therefore only defines
fixtures: it imports the light ``functai`` package (no model clients, no
entry-point scan), everything else only when a test asks for a fixture, and
it changes nothing unless a fixture is used.

- ``functai_isolated``: no process settings, no ``FUNCTAI_LM`` /
  ``FUNCTAI_LOAD_PLUGINS`` / ``FUNCTAI_DISABLE_PLUGINS``, no installed
  plugins, and an empty default conversation store for the test; everything
  as it was afterwards.
- ``scripted_lm``: ``scripted_lm(["reply", ...])`` or ``scripted_lm(reply=fn)``
  makes a `functai.testing.ScriptedLM` the process ``client``.
- ``installed_plugins``: ``installed_plugins(plugin, module, "entry-point", name=module)``
  makes those the installed plugins (the outermost layer), as pip would.
- ``call_records``: a fresh ``log_calls`` folder, and its records read back.

Every fixture depends on ``functai_isolated``. See docs/writing-plugins.md.
"""

from __future__ import annotations

import os
import pathlib
from typing import TYPE_CHECKING, Callable, Iterator, Sequence, TypeGuard

import pytest

if TYPE_CHECKING:
    from .calls.records import CallRecord
    from .hooks.installed import Installed, InstalledPlugin
    from .hooks.plugin import Plugin
    from .models.request import Request
    from .testing import Scripted, ScriptedLM

#: Environment variables that would let the machine running the tests change them.
ENVIRONMENT = ("FUNCTAI_LM", "FUNCTAI_LOAD_PLUGINS", "FUNCTAI_DISABLE_PLUGINS", "FUNCTAI_LOG_CALLS")


@pytest.fixture
def functai_isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that cannot see, or leave behind, process-wide functai state.

    The process settings start empty, the ``FUNCTAI_*`` variables that pick a
    model, plugins or a call log are unset, no installed plugin runs (so a plugin
    pip-installed on the developer's machine cannot change the result), and
    conversations opened without a store start from an empty in-memory store
    (so conversation ``"alex"`` of one test is not continued by the next).
    The previous state comes back afterwards, and model clients made during
    the test are closed.
    """
    from . import layers
    from .stores import memory
    from .hooks import installed
    from .models import providers

    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(memory, "shared", memory.MemoryStore())
    with layers._process_lock:
        settings_before = layers._process
    layers.reset()
    installed_before = installed.use(installed.Installed.of([]))
    try:
        yield
    finally:
        installed.use(installed_before)
        with layers._process_lock:
            layers._process = settings_before
        providers.close_clients()


class ScriptedLMFactory:
    """``scripted_lm(replies)`` / ``scripted_lm(reply=fn)``: a ScriptedLM as the process client."""

    def __init__(self) -> None:
        #: Every ScriptedLM made in this test, oldest first.
        self.made: list[ScriptedLM] = []

    def __call__(
        self,
        replies: Sequence[Scripted] | None = None,
        *,
        reply: Callable[[Request], Scripted] | None = None,
    ) -> ScriptedLM:
        """Make a ScriptedLM and configure it as the process ``client`` (the latest one wins)."""
        import functai
        from .testing import ScriptedLM

        lm = ScriptedLM(replies, reply=reply)
        functai.configure(client=lm)
        self.made.append(lm)
        return lm


@pytest.fixture
def scripted_lm(functai_isolated: None) -> ScriptedLMFactory:
    """A factory: ``lm = scripted_lm(["Paris"])`` answers every call of the test from a script.

    ``lm.requests`` keeps what each call sent; a call after the script ran
    out refuses ``scripted-exhausted``.
    """
    return ScriptedLMFactory()


class InstalledPluginsFactory:
    """``installed_plugins(...)``: make plugins look pip-installed for one test."""

    def __call__(self, *plugins: object, **named: object) -> Installed:
        """Replace the installed plugins (the outermost layer) with these.

        Each positional item is a `functai.Plugin`, a module or object with
        ``@functai.hookimpl`` functions, a path to a plugin file (``.py``), or
        the name of an entry point in the group ``functai`` of the installed
        distributions — loaded as functai loads it, so a broken one makes
        calls refuse ``plugin-load``. A keyword gives the entry-point name
        for a module or object, as the ``[project.entry-points.functai]``
        table would: ``installed_plugins(example=functai_plugin_example)``.
        They run in the order given. ``installed_plugins()`` installs none.
        Returns the `Installed` set (its ``.found`` has each plugin's state).
        """
        from .hooks import installed

        found: list[InstalledPlugin] = []
        for item in plugins:
            found.append(_entry_point(item) if _is_entry_point_name(item) else _given(_as_plugin(item, None)))
        for name, item in named.items():
            found.append(_given(_as_plugin(item, name)))
        names = [item.name for item in found]
        for name in names:
            if names.count(name) > 1:
                from .errors import PluginError

                raise PluginError(
                    f"installed_plugins: two plugins named {name!r}; an entry-point name is one plugin",
                    code="plugin-name",
                    plugin=name,
                )
        result = installed.Installed(found)
        installed.use(result)
        return result


def _is_entry_point_name(item: object) -> TypeGuard[str]:
    return isinstance(item, str) and not (item.endswith(".py") or "/" in item or os.sep in item)


def _as_plugin(item: object, name: str | None) -> Plugin:
    from .hooks.adapt import from_hookimpls, load_plugin
    from .hooks.plugin import Plugin

    if isinstance(item, (str, os.PathLike)):
        plugin = load_plugin(item)
    elif isinstance(item, Plugin):
        plugin = item
    else:
        return from_hookimpls(item, name=name)
    if name is not None and plugin.name != name:
        raise TypeError(
            f"installed_plugins: {name}= gives Plugin {plugin.name!r}; the entry-point name must be the plugin's name"
        )
    return plugin


def _given(plugin: Plugin) -> InstalledPlugin:
    from .hooks.installed import Installed

    return Installed.of([plugin]).found[0]


def _entry_point(name: str) -> InstalledPlugin:
    from .errors import PluginError
    from .hooks.installed import GROUP, InstalledPlugin, entry_points

    for entry_point in entry_points(GROUP):
        if entry_point.name == name:
            item = InstalledPlugin(entry_point)
            item.load()
            return item
    raise PluginError(
        f"installed_plugins: no entry point named {name!r} in the group {GROUP!r}; install the distribution "
        "that provides it (pip install -e .), or give the Plugin or module itself",
        code="plugin-load",
        plugin=name,
    )


@pytest.fixture
def installed_plugins(functai_isolated: None) -> InstalledPluginsFactory:
    """A factory: ``installed_plugins(my_plugin)`` runs ``my_plugin`` as an installed plugin.

    Without it (but with any functai fixture) no installed plugin runs.
    """
    return InstalledPluginsFactory()


class CallLog:
    """The call log of one test: a fresh folder, configured as ``log_calls``."""

    def __init__(self, folder: pathlib.Path) -> None:
        #: The folder the test's calls are recorded in.
        self.folder = folder

    def read(self) -> list[CallRecord]:
        """Every record so far, oldest first."""
        from .calls.records import read_calls

        return list(read_calls(self.folder))

    def last(self) -> CallRecord:
        """The newest record (an AssertionError when nothing was recorded)."""
        records = self.read()
        assert records, f"no call was recorded in {self.folder}"
        return records[-1]

    def __len__(self) -> int:
        return len(self.read())


@pytest.fixture
def call_records(functai_isolated: None, tmp_path: pathlib.Path) -> Iterator[CallLog]:
    """Record the test's calls in a folder of its own and read them back: ``call_records.last().changes``."""
    import functai

    log = CallLog(tmp_path / "functai-calls")
    functai.configure(log_calls=str(log.folder))
    yield log
    _close_log(log.folder)


def _close_log(folder: pathlib.Path) -> None:
    from .calls import records

    records.close_log(folder)


__all__ = [
    "CallLog",
    "InstalledPluginsFactory",
    "ScriptedLMFactory",
    "call_records",
    "functai_isolated",
    "installed_plugins",
    "scripted_lm",
]
