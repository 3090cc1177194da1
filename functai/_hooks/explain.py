"""Which plugins would run for a function's calls here, from which layer, in what order
(``functai plugins explain MODULE:FUNCTION``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .plugin import Plugin, qualified_name
from .specs import HOOKS

if TYPE_CHECKING:
    from .._calls.function import AIFunction
    from .._layers import Layer


def explain(fn: "AIFunction", conversation: "Layer | None" = None) -> dict[str, Any]:
    """``{"function", "layers", "hooks", "dropped"}``: for each hook, the plugins a call of ``fn`` here
    (and in ``conversation``) would run, in order, as ``[{"plugin", "version", "layer", "handler"}]``;
    ``dropped`` says why the order rules left each out."""
    from .. import _layers as settings

    now = settings.resolve(fn.own, conversation)
    resolved = now.whole  # every plugin, those whose `active` check says no right now marked
    values = resolved.values
    process, blocks = settings.current_layers()
    host = [(layer, "conversation" if layer is conversation else "block")
            for layer in (conversation, *reversed(blocks)) if layer is not None]
    dropper = next((kind for layer, kind in [*host, (process, "process")]
                    if layer.values.get("program_plugins") is False), None)
    from .installed import installed

    installed_layer = installed().layer(values.get("load_plugins"), values.get("disable_plugins"))
    own = tuple(fn.own.plugins or ())
    layers: list[tuple[str, Sequence[Plugin]]] = [
        ("own", () if dropper else own),
        *((kind, layer.plugins) for layer, kind in host if layer.plugins),
        ("process", process.plugins or ()),
        ("installed", installed_layer),
    ]
    dropped: list[dict[str, Any]] = []
    if dropper:
        dropped += [{"plugin": p.name, "version": p.version, "layer": "own",
                     "reason": f"program_plugins=False in the {dropper} layer drops the function's own plugins"}
                    for p in own]
    seen: dict[str, str] = {}  # plugin name: the layer it runs in
    for kind, plugins in reversed(layers):  # outermost first: a plugin runs once, in its outermost layer
        for plugin in plugins:
            if plugin.name in seen:
                dropped.append({"plugin": plugin.name, "version": plugin.version, "layer": kind,
                                "reason": f"also in the {seen[plugin.name]} layer; it runs once, there"})
                continue
            seen[plugin.name] = kind
    hooks: dict[str, list[dict[str, Any]]] = {}
    for hook in HOOKS:
        rows = []
        for plugin, handler in resolved.plan.handlers[hook]:
            row = {"plugin": plugin.name, "version": plugin.version, "layer": seen.get(plugin.name, "?"),
                   "handler": qualified_name(getattr(handler, "__wrapped__", handler))}
            if plugin.last:
                row["note"] = f"declares last=True: runs after every other {hook} handler"
            if plugin not in now.plan.plugins:
                row["note"] = "sits calls out for now: its active() check says no (e.g. nothing to send spans to)"
            rows.append(row)
        hooks[hook] = rows
    return {
        "function": f"{fn.module}:{fn.name}",
        "layers": [{"layer": kind, "plugins": [p.name for p in plugins]} for kind, plugins in layers],
        "hooks": hooks,
        "dropped": dropped,
    }
