"""``functai.compaction(...)``, ``functai.delegate(...)``, ``functai.cache(...)``,
``functai.fallback(...)`` and ``functai.budget(...)``: the entry point of that name in the
group ``functai.builtins``, looked up on first use (another distribution registering it swaps it).

The built-in distributions are not on the package index (anyone could register their names
there), so an install hint names their folder in this repository
(`functai._hooks.shipped.install_command`).
"""

from __future__ import annotations

from typing import Any, Callable

from ._errors import FunctAIError
from ._hooks import installed
from ._hooks.shipped import BUILTIN_FOLDERS, install_command

GROUP = "functai.builtins"

_found: dict[str, Callable[..., Any]] = {}


def builtin(name: str) -> Callable[..., Any]:
    """The installed factory called ``name`` (looked up once per process)."""
    factory = _found.get(name)
    if factory is not None:
        return factory
    matches = [ep for ep in installed.entry_points(GROUP) if ep.name == name]
    if not matches:
        own = f"functai-{name}"
        how = f"{install_command(own)}, or install another" if own in BUILTIN_FOLDERS else "install a"
        raise FunctAIError(
            f"functai.{name} is provided by an installed distribution, and none is installed: "
            f"{how} distribution whose entry point {name!r} is in the group {GROUP!r}",
            code="builtin-missing",
        )
    if len(matches) > 1:
        dists = ", ".join(sorted(getattr(ep.dist, "name", "?") for ep in matches))
        raise FunctAIError(
            f"{len(matches)} installed distributions provide functai.{name} ({dists}); uninstall all but one",
            code="builtin-ambiguous",
        )
    try:
        loaded: Callable[..., Any] = matches[0].load()
    except Exception as error:
        raise FunctAIError(
            f"functai.{name} could not be loaded from {getattr(matches[0].dist, 'name', '?')}: "
            f"{type(error).__name__}: {error}",
            code="plugin-load",
        ) from error
    _found[name] = loaded
    return loaded


def forget() -> None:
    """Look the factories up again on next use (tests)."""
    _found.clear()


def compaction(*args: Any, **kwargs: Any) -> Any:
    """A plugin that keeps a long conversation short by folding old turns into a summary.

    ``compaction(keep=20, every=10, summarize=None, lm=None, name="compaction")``
    — provided by ``functai-compaction`` (or whichever distribution registers
    ``compaction``).
    """
    return builtin("compaction")(*args, **kwargs)


def delegate(*args: Any, **kwargs: Any) -> Any:
    """Another AI function as a tool that remembers, per branch, what it was asked.

    ``delegate(program, name=None, description=None)`` — provided by
    ``functai-delegate`` (or whichever distribution registers ``delegate``).
    """
    return builtin("delegate")(*args, **kwargs)


def cache(*args: Any, **kwargs: Any) -> Any:
    """A plugin that answers a request already answered, from its store, instead of the model.

    ``cache(store="memory:", *, ttl=None, name="cache")`` — provided by
    ``functai-cache`` (or whichever distribution registers ``cache``).
    """
    return builtin("cache")(*args, **kwargs)


def fallback(*args: Any, **kwargs: Any) -> Any:
    """A plugin that asks the next model when a request fails.

    ``fallback(models, *, on=("model-unreachable", "model-http"), name="fallback")`` —
    provided by ``functai-fallback`` (or whichever distribution registers ``fallback``).
    """
    return builtin("fallback")(*args, **kwargs)


def budget(*args: Any, **kwargs: Any) -> Any:
    """A plugin that keeps calls within a token or money budget, and asks before it stops them.

    ``budget(tokens=None, dollars=None, *, per="call", prices=None, ask_at=0.8, name="budget",
    decide=None)`` — provided by ``functai-budget`` (or whichever distribution registers ``budget``).
    """
    return builtin("budget")(*args, **kwargs)
