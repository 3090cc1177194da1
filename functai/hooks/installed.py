"""Installed plugins: the outermost layer, found through entry points.

Discovery is lazy: nothing here runs at ``import functai``. This first cut
knows no installed plugins; entry-point discovery (group ``functai``) fills
`Installed` in later without changing its interface.
"""

from __future__ import annotations

import threading

from ..errors import PluginError
from .plugin import Plugin


class Installed:
    """The installed plugins of this process, found once."""

    def __init__(self, plugins: tuple[Plugin, ...] = ()) -> None:
        self.plugins = plugins

    def plugin(self, name: str) -> Plugin:
        for plugin in self.plugins:
            if plugin.name == name:
                return plugin
        raise PluginError(
            f"no installed plugin named {name!r}; install the package that provides it "
            "(entry-point group 'functai'), or give a Plugin or a file path instead",
            code="plugin-load",
            plugin=name,
        )


_lock = threading.Lock()
_installed: Installed | None = None


def installed() -> Installed:
    """The installed plugins, found on first use and cached for the process."""
    global _installed
    if _installed is None:
        with _lock:
            if _installed is None:
                _installed = Installed()
    return _installed
