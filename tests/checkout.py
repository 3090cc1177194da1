"""What this checkout ships, for the processes the tests start: they load the installed plugins of
the group ``functai`` this checkout ships and no other, so a plugin installed beside them (the
README's example plugin, say) changes nothing the suite sees. Import it from a test anywhere in
the checkout (the built-ins' tests put ``tests/`` on sys.path)."""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _shipped() -> str:
    names: list[str] = []
    for project in sorted((ROOT / "functai_builtin_plugins").glob("*/pyproject.toml")):
        data = tomllib.loads(project.read_text())
        names += data.get("project", {}).get("entry-points", {}).get("functai", {})
    return ",".join(names)


#: The installed plugins this checkout ships (``approval,dbos,otel``), as ``FUNCTAI_LOAD_PLUGINS`` names them.
SHIPPED_PLUGINS = _shipped()


def shipped_env(env: Mapping[str, str] | None = None, **more: str) -> dict[str, str]:
    """``env`` (default: this process's) with ``more``, loading only the plugins this checkout ships,
    unless it names its own ``FUNCTAI_LOAD_PLUGINS``."""
    found = {**(os.environ if env is None else env), **more}
    found.setdefault("FUNCTAI_LOAD_PLUGINS", SHIPPED_PLUGINS)
    return found
