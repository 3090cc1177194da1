"""Turning the items of a ``plugins`` setting (a `Plugin`, a module or object with
``@functai.hookimpl`` functions, a plugin file's path, an installed plugin's name) into Plugins.
"""

from __future__ import annotations

import os
import sys

from .._errors import PluginError
from .plugin import Plugin

_files: dict[str, tuple[int, int, Plugin]] = {}


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
    from .hookimpls import from_hookimpls  # only a pluggy-style module needs it

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
                from .installed import installed  # loaded with the first plugin named by name

                plugin = installed().plugin(text)
        elif item is None or isinstance(item, (int, float, bool, dict, list, tuple, set)):
            raise TypeError(f"plugins ({where}): {item!r} is not a plugin, a module with hookimpls, or a path")
        else:
            from .hookimpls import from_hookimpls

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
