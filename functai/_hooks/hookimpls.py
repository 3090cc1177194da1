"""A module or object with ``@functai.hookimpl`` functions as a `Plugin`, validated by pluggy.
(Apart from `functai._hooks.adapt`, which also reads plugin files and installed names: the
installed plugins are made with this, and adapt looks installed ones up, so neither imports
the other.)"""

from __future__ import annotations

import functools
import threading
from types import ModuleType
from typing import Any, Callable, Sequence

import pluggy

from .._errors import PluginError
from . import specs
from .plugin import Plugin, check_name

_adapted: dict[int, tuple[object, Plugin]] = {}
_validating = threading.RLock()  # dir() of an object may run its code


@functools.cache
def _manager() -> pluggy.PluginManager:
    """One pluggy manager holding the hookspecs (parsed once per process), for validating plugins
    one at a time under ``_validating``."""
    manager = pluggy.PluginManager("functai")
    manager.add_hookspecs(specs)
    return manager


def from_hookimpls(obj: object, *, name: str | None = None, version: str | None = None) -> Plugin:
    """A `Plugin` with one handler per ``@functai.hookimpl`` function of ``obj`` (validated by
    pluggy), named and versioned by the arguments, else by ``obj`` and its distribution."""
    if isinstance(obj, type):
        raise TypeError(f"{obj.__name__} is a class; give an instance of it as the plugin")
    cached = _adapted.get(id(obj))
    if cached is not None and cached[0] is obj and name is None and version is None:
        return cached[1]
    default = obj.__name__.rsplit(".", 1)[-1] if isinstance(obj, ModuleType) else type(obj).__name__
    plugin_name = name or getattr(obj, "plugin_name", None) or default.lower()
    check_name(plugin_name)
    plugin_version = (version or getattr(obj, "plugin_version", None) or getattr(obj, "__version__", None)
                      or distribution_version(obj) or "0.0.0")

    with _validating:
        manager = _manager()
        try:
            manager.register(obj, name=plugin_name)
            try:
                manager.check_pending()
                impls = [(hook, impl) for hook in specs.HOOKS for impl in getattr(manager.hook, hook).get_hookimpls()]
            finally:
                manager.unregister(obj)
        except pluggy.PluginValidationError as error:
            marked = [n for n in dir(obj) if manager.parse_hookimpl_opts(obj, n) is not None]
            unknown = [n for n in marked if n not in specs.HOOKS]
            what = f"unknown hook {unknown[0]!r}" if unknown else " ".join(str(error).split())  # one line
            named = unknown or [n for n in marked if n in str(error)]
            raise PluginError(
                f"plugin {plugin_name!r} failed pluggy validation: {what}. Hooks are: {', '.join(specs.HOOKS)}; "
                "each takes the one argument its hookspec names",
                code="plugin-hook",
                plugin=plugin_name,
                hook=named[0] if named else None,
            ) from error

    if not impls:
        raise TypeError(f"{obj!r} is not a plugin: it has no function marked @functai.hookimpl")
    # What a Plugin declares by keyword, a module or object declares as plugin_<keyword> attributes.
    plugin = Plugin(plugin_name, version=str(plugin_version), last=getattr(obj, "plugin_last", False),
                    before=getattr(obj, "plugin_before", ()), after=getattr(obj, "plugin_after", ()),
                    requires=getattr(obj, "plugin_requires", ()), serves=getattr(obj, "plugin_serves", ()),
                    chunk_window=getattr(obj, "plugin_chunk_window", 0))
    for hook, impl in impls:
        asked = [option for option in specs.ORDERING_OPTIONS if getattr(impl, option, False)]
        if asked:  # marked with pluggy's own marker, which does not refuse them
            raise specs.ordering_refused(asked, plugin_name, hook)
        plugin.on(hook, _as_handler(impl.function, impl.argnames))
    if name is None and version is None:
        _adapted[id(obj)] = (obj, plugin)
    return plugin


def distribution_version(obj: object) -> str | None:
    """The version of the installed distribution that ships ``obj``'s top-level package, if one does."""
    module = obj.__name__ if isinstance(obj, ModuleType) else type(obj).__module__
    top = (module or "").partition(".")[0]
    if not top or top == "__main__" or top.startswith("functai_plugin_file_"):
        return None
    from .entrypoints import package_version

    return package_version(top)


def _as_handler(fn: Callable[..., Any], argnames: Sequence[str]) -> Callable[[Any], Any]:
    if argnames:
        return fn

    @functools.wraps(fn)
    def handler(event: Any) -> Any:
        return fn()

    return handler
