"""functai's pytest plugin: fixtures for testing plugins and AI functions (docs/writing-plugins.md).

pytest loads it (entry point ``pytest11``) in every project where functai is installed, so importing
it only defines fixtures: nothing changes unless a test uses one.
"""

from __future__ import annotations

import os
import pathlib
from typing import Callable, Iterator, Sequence

import attrs
import pytest

from . import _layers as layers
from ._calls import records
from ._calls.reading import read_calls
from ._calls.records import CallRecord
from ._errors import PluginError
from ._hooks import installed
from ._hooks.adapt import load_plugin, looks_like_path
from ._hooks.hookimpls import from_hookimpls
from ._hooks.installed import GROUP, Installed, InstalledPlugin
from ._hooks.plugin import Plugin
from ._models import providers
from ._models.request import Request
from .testing import Scripted, ScriptedLM

#: Variables that would let the machine running the tests change them.
ENVIRONMENT = ("FUNCTAI_LM", "FUNCTAI_LOAD_PLUGINS", "FUNCTAI_DISABLE_PLUGINS", "FUNCTAI_LOG_CALLS")


@pytest.fixture
def functai_isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that cannot see, or leave behind, process-wide functai state: settings, ``FUNCTAI_*``
    variables, installed plugins (the developer's own must not change the result), the shared
    in-memory store. All comes back afterwards, and the test's model clients are closed."""
    from ._stores import memory  # not loaded by ``import functai``

    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(memory, "shared", memory.MemoryStore())
    settings_before = layers.reset()
    installed_before = installed.use(Installed.of([]))
    try:
        yield
    finally:
        installed.use(installed_before)
        layers.reset(settings_before)
        providers.close_clients()


class ScriptedLMFactory:
    """``scripted_lm(replies)`` / ``scripted_lm(reply=fn)``: a ScriptedLM as the process ``client``."""

    def __call__(self, replies: Sequence[Scripted] | None = None, *,
                 reply: Callable[[Request], Scripted] | None = None) -> ScriptedLM:
        lm = ScriptedLM(replies, reply=reply)
        layers.configure(client=lm)
        return lm


@pytest.fixture
def scripted_lm(functai_isolated: None) -> ScriptedLMFactory:
    """A factory: ``lm = scripted_lm(["Paris"])`` answers every call of the test from a script."""
    return ScriptedLMFactory()


class InstalledPluginsFactory:
    """``installed_plugins(...)``: make plugins look pip-installed for one test."""

    def __call__(self, *plugins: object, **named: object) -> Installed:
        """Make these, in this order, the installed plugins: each a `functai.Plugin`, a module or
        object with hookimpls, a plugin file, or an entry point's name; a keyword names a module's
        entry point. Returns the `Installed` set."""
        found = [_entry_point(item) if isinstance(item, str) and not looks_like_path(item) else _given(item, None)
                 for item in plugins]
        found += [_given(item, name) for name, item in named.items()]
        names = [item.name for item in found]
        twice = [name for name in names if names.count(name) > 1]
        if twice:
            raise PluginError(f"installed_plugins: two plugins named {twice[0]!r}; an entry-point name is one plugin",
                              code="plugin-name", plugin=twice[0])
        result = Installed(found)
        installed.use(result)
        return result


def _given(item: object, name: str | None) -> InstalledPlugin:
    """``item`` installed as if pip had, ``name`` being its entry point's."""
    if isinstance(item, (str, os.PathLike)):
        plugin = load_plugin(item)
    elif isinstance(item, Plugin):
        plugin = item
    else:
        plugin = from_hookimpls(item, name=name)
    if name is not None and plugin.name != name:
        raise TypeError(f"installed_plugins: {name}= gives Plugin {plugin.name!r}; "
                        "the entry-point name must be the plugin's name")
    return Installed.of([plugin]).found[0]


def _entry_point(name: str) -> InstalledPlugin:
    for entry_point in installed.entry_points(GROUP):  # looked up here: a test may replace it
        if entry_point.name == name:
            item = InstalledPlugin(entry_point)
            item.load()
            return item
    raise PluginError(f"installed_plugins: no entry point named {name!r} in the group {GROUP!r}; install the "
                      "distribution that provides it (pip install -e .), or give the Plugin or module itself",
                      code="plugin-load", plugin=name)


@pytest.fixture
def installed_plugins(functai_isolated: None) -> InstalledPluginsFactory:
    """A factory: ``installed_plugins(my_plugin)`` runs ``my_plugin`` as an installed plugin."""
    return InstalledPluginsFactory()


@attrs.define
class CallLog:
    """The call log of one test: a fresh folder, configured as ``log_calls``."""

    folder: pathlib.Path

    def read(self) -> list[CallRecord]:
        """Every record, oldest first."""
        return list(read_calls(self.folder))

    def last(self) -> CallRecord:
        """The newest record (an AssertionError when nothing was recorded)."""
        found = self.read()
        assert found, f"no call was recorded in {self.folder}"
        return found[-1]

    def __len__(self) -> int:
        return len(self.read())


@pytest.fixture
def call_records(functai_isolated: None, tmp_path: pathlib.Path) -> Iterator[CallLog]:
    """Record the test's calls in a folder of its own and read them back: ``call_records.last().changes``."""
    log = CallLog(tmp_path / "functai-calls")
    layers.configure(log_calls=str(log.folder))
    yield log
    records.close_log(log.folder)


__all__ = ["CallLog", "InstalledPluginsFactory", "ScriptedLMFactory", "call_records", "functai_isolated",
           "installed_plugins", "scripted_lm"]
