"""Installed plugins: the outermost layer, found once per process through the entry-point group
``functai``. One that fails to load makes every call refuse ``plugin-load`` until it is fixed or
disabled: a guard that did not load must not look like a guard that passed.
"""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace
from typing import Any, Iterable, Sequence

from .._version import __version__
from .._errors import PluginError
from .._log import info, warn
from .plugin import Plugin, check_name

GROUP = "functai"

LOADED, BLOCKED, DISABLED, FAILED = "loaded", "blocked", "disabled", "failed"


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group``, sorted by name (a stable order): see `entrypoints`."""
    from .entrypoints import entry_points as read  # on first discovery, not at `import functai`

    return read(group)


def _names(raw: str | None) -> frozenset[str] | None:
    if raw is None:
        return None
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


class InstalledPlugin:
    """One entry point of the ``functai`` group, and what became of it."""

    __slots__ = ("name", "value", "distribution", "dist_version", "state", "reason", "plugin", "code",
                 "_entry_point")

    def __init__(self, entry_point: Any) -> None:
        self.name: str = entry_point.name
        self.value: str = entry_point.value
        dist = getattr(entry_point, "dist", None)
        self.distribution: str | None = getattr(dist, "name", None)
        self.dist_version: str | None = getattr(dist, "version", None)
        self.state: str = BLOCKED
        self.reason: str | None = None
        self.plugin: Plugin | None = None
        #: The error code calls refuse with while this plugin is failed.
        self.code = "plugin-load"
        self._entry_point = entry_point

    @property
    def version(self) -> str | None:
        return self.plugin.version if self.plugin is not None else self.dist_version

    def where(self) -> str:
        return f"entry point {self.name!r} ({self.value}) of distribution {self.distribution or 'unknown'!r}"

    def load(self) -> None:
        """Import the entry point and turn its object into a Plugin (once)."""
        problem = incompatible(getattr(self._entry_point, "dist", None))
        if problem is not None:  # never imported: it was not written for this functai
            self.state, self.reason, self.code = FAILED, problem, "plugin-incompatible"
            warn("plugin incompatible", plugin=self.name, distribution=self.distribution, reason=problem)
            return
        try:
            check_name(self.name)
            found = self._entry_point.load()
            if isinstance(found, Plugin):
                if found.name != self.name:
                    raise TypeError(f"it gives Plugin {found.name!r}; the entry-point name must be the plugin's name")
                plugin = found
                if plugin.version == "0.0.0" and self.dist_version:
                    plugin = _with_version(plugin, self.dist_version)
            else:
                declared = getattr(found, "plugin_version", None) or getattr(found, "__version__", None)
                from .hookimpls import from_hookimpls  # only a pluggy-style module needs it

                plugin = from_hookimpls(found, name=self.name, version=str(declared or self.dist_version or "0.0.0"))
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # an import error, a wrong object, failed validation, even SystemExit
            self.state = FAILED
            self.reason = f"{type(error).__name__}: {error}"
            warn("plugin failed to load", plugin=self.name, distribution=self.distribution, reason=self.reason)
            return
        self.plugin = plugin
        self.state = LOADED
        info("plugin loaded", plugin=self.name, version=plugin.version, distribution=self.distribution)

    def as_dict(self) -> dict[str, Any]:
        plugin = self.plugin
        return {
            "name": self.name,
            "version": self.version,
            "distribution": self.distribution,
            "hooks": list(plugin.hooks) if plugin is not None else [],
            "api": plugin.api if plugin is not None else None,
            "state": self.state,
            "reason": self.reason,
            "entry_point": self.value,
        }


def _with_version(plugin: Plugin, version: str) -> Plugin:
    copy = Plugin(plugin.name, version=version, api=plugin.api, description=plugin.description,
                  active=plugin.active, last=plugin.last, before=plugin.before, after=plugin.after,
                  requires=plugin.requires, serves=plugin.serves, chunk_window=plugin.chunk_window)
    for hook in plugin.hooks:
        for handler in plugin.handlers(hook):
            copy.on(hook, handler)
    return copy


class Installed:
    """The installed plugins of this process."""

    def __init__(self, found: Sequence[InstalledPlugin] = ()) -> None:
        self.found: tuple[InstalledPlugin, ...] = tuple(found)
        failed = [item for item in self.found if item.state == FAILED]
        #: What every call refuses with while a plugin that would run failed to load.
        self.failure: PluginError | None = _failure(failed) if failed else None
        #: The installed layer with no settings narrowing it (what calls usually run with).
        self.plugins: tuple[Plugin, ...] = tuple(item.plugin for item in self.found if item.plugin is not None)

    @classmethod
    def of(cls, plugins: Sequence[Plugin], distribution: str = "test") -> "Installed":
        """Installed plugins given directly, as if pip had installed them (for tests)."""
        found = []
        for plugin in plugins:
            dist = SimpleNamespace(name=distribution, version=plugin.version)
            item = InstalledPlugin(SimpleNamespace(name=plugin.name, value=f"<given {plugin!r}>", dist=dist))
            item.plugin, item.state = plugin, LOADED
            found.append(item)
        return cls(found)

    @classmethod
    def discover(cls, group: str = GROUP) -> "Installed":
        load = _names(os.environ.get("FUNCTAI_LOAD_PLUGINS"))
        disable = _names(os.environ.get("FUNCTAI_DISABLE_PLUGINS")) or frozenset()
        found = []
        for entry_point in entry_points(group):
            item = InstalledPlugin(entry_point)
            if item.name in disable:
                item.state, item.reason = DISABLED, "FUNCTAI_DISABLE_PLUGINS"
            elif load is not None and item.name not in load:
                item.state, item.reason = BLOCKED, "not in FUNCTAI_LOAD_PLUGINS"
            else:
                item.load()
            found.append(item)
        _refuse_twins(found)
        names = {item.name for item in found}
        for variable, named in (("FUNCTAI_LOAD_PLUGINS", load), ("FUNCTAI_DISABLE_PLUGINS", disable)):
            unknown = sorted((named or frozenset()) - names)
            if unknown:  # a name misspelt in FUNCTAI_LOAD_PLUGINS leaves out every plugin, a guard too
                warn("no installed plugin of that name", variable=variable, names=",".join(unknown),
                     installed=",".join(sorted(names)) or "none")
        return cls(found)

    def layer(self, load: Iterable[str] | None = None, disable: Iterable[str] | None = None) -> tuple[Plugin, ...]:
        """The installed plugins a call runs with, narrowed by the settings; refuses while one failed."""
        if load is None and not disable:
            if self.failure is not None:
                raise self.failure
            return self.plugins
        load, disable = None if load is None else frozenset(load), frozenset(disable or ())
        wanted = [item for item in self.found if (load is None or item.name in load) and item.name not in disable]
        failed = [item for item in wanted if item.state == FAILED]
        if failed:
            raise _failure(failed)
        return tuple(item.plugin for item in wanted if item.plugin is not None)

    def plugin(self, name: str) -> Plugin:
        """The loaded installed plugin called ``name``."""
        for item in self.found:
            if item.name == name:
                if item.plugin is not None:
                    return item.plugin
                raise PluginError(
                    f"installed plugin {name!r} is {item.state}"
                    + (f" ({item.reason})" if item.reason else "") + f"; {item.where()}",
                    code="plugin-load",
                    plugin=name,
                )
        raise PluginError(
            f"no installed plugin named {name!r}; install the package that provides it "
            f"(entry-point group {GROUP!r}), or give a Plugin or a file path instead",
            code="plugin-load",
            plugin=name,
        )


def incompatible(dist: Any) -> str | None:
    """Why a distribution's ``Requires-Dist: functai …`` excludes the running functai, or None."""
    requires = getattr(dist, "requires", None) if dist is not None else None
    if not requires:
        return None
    from .requires import functai_requirement  # read only for a distribution that requires something

    running = __version__
    for text in requires:
        decided = functai_requirement(text, running)
        if decided is not None and not decided[1]:
            name = getattr(dist, "name", None) or "?"
            from .shipped import BUILTIN_FOLDERS, install_command  # not at import: `import functai` stays light

            # This repository's own distributions are not on the package index: never send pip there for one.
            how = install_command(name) if name in BUILTIN_FOLDERS else f"pip install -U {name}"
            return (
                f"{name} {getattr(dist, 'version', None) or ''} supports functai{decided[0]}, "
                f"but this is functai {running}; install a version of {name} made for functai {running} "
                f"({how}), or a functai it supports"
            )
    return None


def _refuse_twins(found: Sequence[InstalledPlugin]) -> None:
    """Two installed plugins of one name (from two distributions, or two entry points): neither runs,
    and calls refuse until one is uninstalled (``plugin-name``), as two given plugins of one name do."""
    by_name: dict[str, list[InstalledPlugin]] = {}
    for item in found:
        if item.state not in (DISABLED, BLOCKED):
            by_name.setdefault(item.name, []).append(item)
    for name, items in by_name.items():
        if len({(item.distribution, item.value) for item in items}) < 2:
            continue  # one entry point, found twice on the path
        where = "; ".join(item.where() for item in items)
        for item in items:
            item.state, item.plugin, item.code = FAILED, None, "plugin-name"
            item.reason = f"{len(items)} installed entry points give a plugin named {name!r} ({where}): uninstall one"
        warn("plugins of one name", plugin=name, reason=items[0].reason)


def _failure(failed: Sequence[InstalledPlugin]) -> PluginError:
    first = failed[0]
    names = [item.name for item in failed]
    others = f" (and {len(failed) - 1} more: {', '.join(names[1:])})" if len(failed) > 1 else ""
    them = "they are" if len(failed) > 1 else "it is"
    already = sorted(_names(os.environ.get("FUNCTAI_DISABLE_PLUGINS")) or ())
    disable = ",".join(dict.fromkeys([*already, *names]))  # following the advice keeps what is disabled now
    incompatible = first.code == "plugin-incompatible"
    what, fix = ("is incompatible", "upgraded") if incompatible else ("failed to load", "fixed")
    return PluginError(
        f"installed plugin {first.name!r} {what}{others}: {first.reason}; {first.where()}. "
        f"Calls refuse to run until {them} {fix}, uninstalled, or disabled with "
        f"FUNCTAI_DISABLE_PLUGINS={disable} (see `functai plugins`)",
        code=first.code,
        plugin=first.name,
    )


_lock = threading.Lock()
_installed: Installed | None = None


def installed() -> Installed:
    """The installed plugins, discovered on first use and kept for the process."""
    global _installed
    found = _installed
    if found is None:
        with _lock:
            if _installed is None:
                _installed = Installed.discover()
            found = _installed
    return found


def use(found: Installed | None) -> Installed | None:
    """Replace the installed plugins of this process (None: discover again on
    next use); returns the previous ones. Tests and the pytest plugin use it."""
    global _installed
    with _lock:
        previous, _installed = _installed, found
    return previous
