"""Which plugins would run for a function's calls here, from which layer, in what order
(``functai plugins explain MODULE:FUNCTION``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .._errors import PluginError
from .order import Arrangement, arrange, refuse_missing
from .plugin import Plugin, qualified_name
from .specs import HOOKS

if TYPE_CHECKING:
    from .._calls.function import AIFunction
    from .._layers import Layer


def explain(fn: "AIFunction[..., Any]", conversation: "Layer | None" = None) -> dict[str, Any]:
    """``{"function", "layers", "hooks", "dropped", "unmet", "refused"}``: for each hook, the plugins a
    call of ``fn`` here (and in ``conversation``) would run, in order, as ``[{"plugin", "version",
    "layer", "handler", "why"}]``; ``dropped`` says why the layer rules left a plugin out, ``unmet``
    which ``before=``/``after=`` declarations the layers contradict, ``refused`` the error every
    call would refuse with (a cycle, a missing requirement), else None."""
    from .. import _layers as settings

    process, blocks = settings.current_layers()
    host = [(layer, "conversation" if layer is conversation else "block")
            for layer in (conversation, *reversed(blocks)) if layer is not None]
    dropper = next((kind for layer, kind in [*host, (process, "process")]
                    if layer.values.get("program_plugins") is False), None)
    from .installed import installed

    values = settings.values_for(fn.own, conversation)
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
    refused = None
    try:
        arrangement = arrange(layers)
        refuse_missing(arrangement)
        now = settings.resolve(fn.own, conversation)
        sitting_out = set(now.whole.plan.plugins) - set(now.plan.plugins)
    except PluginError as error:
        refused = {"code": error.code, "message": error.message}
        sitting_out = set()
        if error.code == "plugin-order":
            arrangement = Arrangement((), (), (), ())
    for plugin, layer, outer in arrangement.dropped:
        dropped.append({"plugin": plugin.name, "version": plugin.version, "layer": layer,
                        "reason": f"also in the {outer} layer; it runs once, there"})
    hooks: dict[str, list[dict[str, Any]]] = {}
    for hook in HOOKS:
        rows = []
        for item in arrangement.placed:
            plugin = item.plugin
            for handler in plugin.handlers(hook):
                why = [f"{item.layer} layer, #{item.position} in its list", *item.moved]
                if plugin.last:
                    why.append(f"declares last=True: runs after every other {hook} handler")
                row = {"plugin": plugin.name, "version": plugin.version, "layer": item.layer,
                       "handler": qualified_name(getattr(handler, "__wrapped__", handler)), "why": "; ".join(why)}
                if plugin in sitting_out:
                    row["note"] = "sits calls out for now: its active() check says no (e.g. nothing to send spans to)"
                rows.append(row)
        hooks[hook] = rows
    return {
        "function": f"{fn.module}:{fn.name}",
        "layers": [{"layer": kind, "plugins": [p.name for p in plugins]} for kind, plugins in layers],
        "hooks": hooks,
        "dropped": dropped,
        "unmet": list(arrangement.unmet),
        "refused": refused,
    }
