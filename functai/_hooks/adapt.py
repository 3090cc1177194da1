"""Turning the items of a ``plugins`` setting (a `Plugin`, a module or object with
``@functai.hookimpl`` functions, a plugin file's path, an installed plugin's name) into Plugins.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Sequence

import pluggy

from .._errors import PluginError
from . import specs
from .plugin import Plugin, check_name

_adapted: dict[int, tuple[object, Plugin]] = {}
_files: dict[str, tuple[int, int, Plugin]] = {}
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
            what = f"unknown hook {unknown[0]!r}" if unknown else str(error)
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


def load_plugin(path: str | os.PathLike[str]) -> Plugin:
    """Load the ``plugin`` a Python file defines (running the file: load only code you trust),
    again only after the file changes."""
    full = os.path.abspath(os.fspath(path))
    try:
        stat = os.stat(full)
    except OSError as error:
        raise PluginError(
            f"no plugin file at {full}: {error.strerror}; check the path in your plugins setting",
            code="plugin-load",
        ) from None
    cached = _files.get(full)
    if cached is not None and cached[0] == stat.st_mtime_ns and cached[1] == stat.st_size:
        return cached[2]

    import hashlib
    import importlib.util

    module_name = "functai_plugin_file_" + hashlib.sha1(full.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(module_name, full)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot load {full} as a Python file", code="plugin-load")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(module_name, None)
        if isinstance(error, PluginError) and error.code == "plugin-hook":
            raise  # e.g. functai.hookimpl(tryfirst=True): already says what to fix
        raise PluginError(
            f"plugin file {full} failed to load: {type(error).__name__}: {error}",
            code="plugin-load",
        ) from error
    found = getattr(module, "plugin", None)
    if found is None:
        raise PluginError(
            f"plugin file {full} defines no `plugin`; add `plugin = Plugin(...)` (or a module/object with hookimpls)",
            code="plugin-load",
        )
    try:
        plugin = found if isinstance(found, Plugin) else from_hookimpls(found)
    except TypeError as error:
        raise PluginError(f"plugin file {full}: `plugin` is not a plugin ({error})", code="plugin-load") from error
    _files[full] = (stat.st_mtime_ns, stat.st_size, plugin)
    return plugin


def looks_like_path(item: str) -> bool:
    return item.endswith(".py") or os.sep in item or "/" in item


def as_plugins(value: object, where: str) -> tuple[Plugin, ...]:
    """Validate a ``plugins`` setting and turn its items into Plugins: the same plugin listed twice
    runs once; two different plugins of one name refuse ``plugin-name``."""
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"plugins ({where}) must be a list, not {type(value).__name__}; write plugins=[...]")
    out: list[Plugin] = []
    by_name: dict[str, Plugin] = {}
    for item in value:
        if isinstance(item, Plugin):
            plugin = item
        elif isinstance(item, (str, os.PathLike)):
            text = os.fspath(item)
            if looks_like_path(text):
                plugin = load_plugin(text)
            else:
                from .installed import installed  # installed imports this module

                plugin = installed().plugin(text)
        elif item is None or isinstance(item, (int, float, bool, dict, list, tuple, set)):
            raise TypeError(f"plugins ({where}): {item!r} is not a plugin, a module with hookimpls, or a path")
        else:
            plugin = from_hookimpls(item)
        seen = by_name.get(plugin.name)
        if seen is plugin:
            continue
        if seen is not None:
            raise PluginError(
                f"two different plugins named {plugin.name!r} in the plugins of {where}; "
                "rename one or list it once",
                code="plugin-name",
                plugin=plugin.name,
            )
        by_name[plugin.name] = plugin
        out.append(plugin)
    return tuple(out)
