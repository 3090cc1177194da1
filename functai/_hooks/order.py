"""The per-call order of plugins (``spec/plugins.md`` §4). Plans are cached by the identity
of the layers (immutable tuples made when a setting is set), so a call pays one dict lookup.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from .plugin import Plugin
from .specs import HOOKS

Handler = tuple[Plugin, Callable[[Any], Any]]

#: The installed plugin that serves the ``approve`` setting (a call with ``approve`` and none refuses).
APPROVAL = "approval"


class Plan:
    """The plugins of one call, in order, and their handlers by hook."""

    __slots__ = ("plugins", "handlers", "approval", "gated", "timed")

    def __init__(self, plugins: tuple[Plugin, ...], approval: Plugin | None) -> None:
        self.plugins = plugins
        #: The installed plugin that serves the ``approve`` setting (`APPROVAL`), if any.
        self.approval = approval
        #: The plugins that say before each call whether they take part (`Plugin.active`).
        self.gated = tuple(p for p in plugins if p.active is not None)
        runs = [p for p in plugins if not p.last] + [p for p in plugins if p.last]
        self.handlers: dict[str, tuple[Handler, ...]] = {}
        for hook in HOOKS:
            self.handlers[hook] = tuple((p, fn) for p in runs for fn in p.handlers(hook))
        #: This plan with its handlers timed, once a call with ``record_timing`` asks (`functai._hooks.timing`).
        self.timed: Plan | None = None

    def without(self, out: tuple[Plugin, ...]) -> "Plan":
        """This plan with the plugins ``out`` left out (their handlers, as this plan holds them)."""
        copy = Plan.__new__(Plan)
        copy.plugins = tuple(p for p in self.plugins if p not in out)
        copy.approval = None if self.approval in out else self.approval
        copy.gated = tuple(p for p in self.gated if p not in out)
        copy.handlers = {hook: tuple(h for h in handlers if h[0] not in out)
                         for hook, handlers in self.handlers.items()}
        copy.timed = None
        return copy


_cache_lock = threading.Lock()
_cache: dict[tuple[int, ...], tuple[tuple[object, ...], Plan]] = {}


def cached_plan(
    own: tuple[Plugin, ...],
    blocks: tuple[tuple[Plugin, ...], ...],
    process: tuple[Plugin, ...],
    installed: tuple[Plugin, ...],
) -> Plan:
    """The plan of these layers (``blocks`` innermost first), remembered for these exact layer tuples."""
    layers = (own, *blocks, process, installed)
    key = tuple(map(id, layers))
    hit = _cache.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], layers)):
        return hit[1]
    seen: set[str] = set()
    kept_outer_first: list[list[Plugin]] = []
    for layer in reversed(layers):
        kept = [p for p in layer if p.name not in seen]
        seen.update(p.name for p in kept)
        kept_outer_first.append(kept)
    ordered = tuple(p for kept in reversed(kept_outer_first) for p in kept)
    plan = Plan(ordered, next((p for p in installed if p.name == APPROVAL), None))
    with _cache_lock:
        if len(_cache) >= 512:
            _cache.clear()
        _cache[key] = (layers, plan)
    return plan
