"""The per-call order of plugins (docs/plugins.md, *Declared order*), and why each plugin is where it is.

Layers run innermost first and a plugin runs once, in its outermost layer. Within a layer,
plugins run in the order the layer lists them, moved only as their ``before=`` / ``after=``
declarations ask; a plugin declared ``last=True`` (a guard that must see the final input) runs
after every other plugin. A declaration that the layers contradict is not an error: it is
unmet, and `functai plugins explain` says why. A cycle within a layer refuses ``plugin-order``;
a ``requires=`` naming a plugin that is not there refuses ``plugin-requires``.

Plans are cached by the identity of the layers (immutable tuples made when a setting is set), so
a call pays one dict lookup: declarations cost nothing per call.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple, Sequence

from .._errors import PluginError
from .plugin import Plugin
from .specs import HOOKS

Handler = tuple[Plugin, Callable[[Any], Any]]


class Placed(NamedTuple):
    """A plugin in the order, with where it came from and what moved it."""

    plugin: Plugin
    layer: str
    position: int  # 1-based, in its layer's list
    moved: tuple[str, ...]  # the declarations that placed it within its layer


class Arrangement(NamedTuple):
    """The plugins of a call in the order they run, why, and the declarations left unmet."""

    placed: tuple[Placed, ...]
    unmet: tuple[dict[str, str], ...]
    dropped: tuple[tuple[Plugin, str, str], ...]  # (plugin, layer, the outer layer it runs in)
    missing: tuple[tuple[Plugin, str], ...]  # (plugin, the plugin it requires that is not there)


def arrange(layers: Sequence[tuple[str, Sequence[Plugin]]]) -> Arrangement:
    """Order the plugins of named layers, innermost first; ``plugin-order`` for a cycle within a layer."""
    where: dict[str, str] = {}  # plugin name: the outermost layer that lists it
    dropped = []
    for name, plugins in reversed(layers):
        for plugin in plugins:
            if plugin.name in where:
                dropped.append((plugin, name, where[plugin.name]))
            else:
                where[plugin.name] = name
    groups: list[list[Placed]] = []
    for name, plugins in layers:
        kept = [Placed(p, name, i, ()) for i, p in enumerate(plugins, 1) if where.get(p.name) == name]
        groups.append(_sorted([p for p in kept if not p.plugin.last]))
        groups.append(_sorted([p for p in kept if p.plugin.last]))
    placed = tuple([p for g in groups[0::2] for p in g] + [p for g in groups[1::2] for p in g])
    index = {p.plugin.name: i for i, p in enumerate(placed)}
    unmet = []
    for i, item in enumerate(placed):
        plugin = item.plugin
        for other in plugin.before:
            if other in index and index[other] < i:
                unmet.append(_unmet(item, f"before {other!r}", placed[index[other]]))
        for other in plugin.after:
            if other in index and index[other] > i:
                unmet.append(_unmet(item, f"after {other!r}", placed[index[other]]))
    missing = tuple((p.plugin, need) for p in placed for need in p.plugin.requires if need not in index)
    return Arrangement(placed, tuple(unmet), tuple(dropped), missing)


def _sorted(group: list[Placed]) -> list[Placed]:
    """A layer's plugins (of one tier) in list order, moved as little as their declarations ask."""
    names = {p.plugin.name for p in group}
    must_follow: dict[str, dict[str, str]] = {p.plugin.name: {} for p in group}  # name: {earlier: why}
    for item in group:
        plugin = item.plugin
        for other in plugin.before:
            if other in names and other != plugin.name:
                must_follow[other][plugin.name] = f"after {plugin.name!r} ({plugin.name} declares before={other!r})"
        for other in plugin.after:
            if other in names and other != plugin.name:
                must_follow[plugin.name][other] = f"after {other!r} (declares after={other!r})"
    if not any(must_follow.values()):
        return group
    out: list[Placed] = []
    done: set[str] = set()
    waiting = list(group)
    while waiting:
        ready = next((p for p in waiting if set(must_follow[p.plugin.name]) <= done), None)
        if ready is None:
            raise _cycle(waiting, must_follow)
        waiting.remove(ready)
        done.add(ready.plugin.name)
        reasons = tuple(must_follow[ready.plugin.name].values())
        out.append(ready._replace(moved=reasons) if reasons else ready)
    return out


def _cycle(waiting: list[Placed], must_follow: dict[str, dict[str, str]]) -> PluginError:
    """``plugin-order``, naming a cycle among the plugins that could not be placed."""
    left = {p.plugin.name for p in waiting}
    path = [waiting[0].plugin.name]
    while True:
        step = next(name for name in must_follow[path[-1]] if name in left)
        if step in path:
            cycle = path[path.index(step):] + [step]
            break
        path.append(step)
    layer = waiting[0].layer
    return PluginError(
        f"the plugins of the {layer} layer declare an order that cannot be met: {' after '.join(cycle)} "
        "(each must run after the next); drop one of these before=/after= declarations",
        code="plugin-order", plugin=cycle[0],
    )


def _unmet(item: Placed, constraint: str, other: Placed) -> dict[str, str]:
    plugin = item.plugin
    if plugin.last != other.plugin.last:
        why = f"{(other if other.plugin.last else item).plugin.name!r} declares last=True and runs after the others"
    else:
        why = (f"{other.plugin.name!r} runs in the {other.layer} layer and {plugin.name!r} in the {item.layer} layer: "
               "layers run innermost first, and a declaration orders plugins within a layer")
    return {"plugin": plugin.name, "constraint": constraint, "why": why}


class Plan:
    """The plugins of one call, in order, and their handlers by hook."""

    __slots__ = ("plugins", "handlers", "approval", "gated", "timed")

    def __init__(self, plugins: tuple[Plugin, ...]) -> None:
        self.plugins = plugins
        #: The plugin that serves the ``approve`` setting (``serves=["approve"]``), if any.
        self.approval = next((p for p in plugins if "approve" in p.serves), None)
        #: The plugins that say before each call whether they take part (`Plugin.active`).
        self.gated = tuple(p for p in plugins if p.active is not None)
        self.handlers: dict[str, tuple[Handler, ...]] = {}
        for hook in HOOKS:
            self.handlers[hook] = tuple((p, fn) for p in plugins for fn in p.handlers(hook))
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


def refuse_missing(arrangement: Arrangement) -> None:
    """``plugin-requires`` for the first plugin whose required plugin is not there: it fails closed."""
    if arrangement.missing:
        plugin, need = arrangement.missing[0]
        raise PluginError(
            f"plugin {plugin.name!r} {plugin.version} requires the plugin {need!r}, which this call does not run; "
            f"add {need!r} to the plugins (or install it), or remove {plugin.name!r}",
            code="plugin-requires", plugin=plugin.name,
        )


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
    named = [("own", own), *((f"block {i}", block) for i, block in enumerate(blocks, 1)),
             ("process", process), ("installed", installed)]
    arrangement = arrange(named)
    refuse_missing(arrangement)
    plan = Plan(tuple(p.plugin for p in arrangement.placed))
    with _cache_lock:
        if len(_cache) >= 512:
            _cache.clear()
        _cache[key] = (layers, plan)
    return plan
