"""``functai plugins``: installed plugins and their state, working while one is broken."""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from typing import Any, Callable, TextIO

from .._log import quiet
from .._hooks import installed
from .._hooks.specs import HOOKS
from .._hooks.installed import FAILED, GROUP, Installed
from . import added, doctor
from .common import ai_function, plural, table


def register(commands: Any) -> None:
    plugins = commands.add_parser("plugins", help="installed plugins and their state (works while one is broken)")
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plugins.add_argument("-v", "--verbose", action="store_true",
                         help="also describe each loaded plugin: its hooks and their handlers")
    plugins.set_defaults(run=cmd_plugins)
    more = plugins.add_subparsers(dest="plugins_command", metavar="explain|freeze|doctor", parser_class=type(plugins))
    explain = more.add_parser("explain", help="the plugins a function's calls would run here, hook by hook")
    explain.add_argument("function", help="MODULE:FUNCTION (importable from here)")
    explain.add_argument("--json", action="store_true", help="print JSON instead of text")
    explain.add_argument("--hook", choices=HOOKS, help="only this hook")
    explain.set_defaults(run=cmd_explain)
    doctor.register(more)


def builtins(group: str) -> list[dict[str, object]]:
    found = installed.entry_points(group)  # looked up here: a test may replace it
    providers = Counter(entry_point.name for entry_point in found)
    return [{"name": entry_point.name, "distribution": getattr(entry_point.dist, "name", None),
             "version": getattr(entry_point.dist, "version", None), "entry_point": entry_point.value,
             "providers": providers[entry_point.name]} for entry_point in found]


def _state(plugin: dict[str, object]) -> str:
    if plugin["state"] == FAILED:
        return f"{plugin['state']}: {plugin['reason']}"
    return f"{plugin['state']} ({plugin['reason']})" if plugin["reason"] else str(plugin["state"])


def cmd_plugins(args: argparse.Namespace, out: TextIO) -> int:
    """Installed plugins with their state; exits 0 even when one failed (it is a diagnostic)."""
    from .._builtins import GROUP as BUILTINS

    with quiet():  # a fresh discovery; the listing says what failed, so no event
        found = Installed.discover()
    plugins = [{**item.as_dict(), "distribution_version": item.dist_version} for item in found.found]
    factories = builtins(BUILTINS)
    commands = added.found  # what building this command's parser found
    if args.json:
        data: dict[str, Any] = {"plugins": plugins, "builtins": factories}
        if commands:  # as in the text: only when a distribution adds commands
            data["commands"] = commands
        print(json.dumps(data, indent=2, ensure_ascii=False), file=out)
        return 0

    if not plugins:
        print(f"no installed plugins (entry-point group {GROUP!r})", file=out)
    else:
        print(f"installed plugins (entry-point group {GROUP!r}):", file=out)
        rows = [["NAME", "VERSION", "DISTRIBUTION", "API", "HOOKS", "STATE"]]
        for plugin in plugins:
            hooks = ",".join(plugin["hooks"]) or "-"
            rows.append([str(plugin["name"]), str(plugin["version"] or "-"), str(plugin["distribution"] or "-"),
                         "-" if plugin["api"] is None else str(plugin["api"]), hooks, _state(plugin)])
        table(rows, out)
    failed = [str(plugin["name"]) for plugin in plugins if plugin["state"] == FAILED]
    if failed:
        already = [name for name in (os.environ.get("FUNCTAI_DISABLE_PLUGINS") or "").split(",") if name.strip()]
        disable = ",".join(dict.fromkeys([*already, *failed]))
        codes = " or ".join(sorted({item.code for item in found.found if item.state == FAILED}))
        print(f"{plural(len(failed), 'plugin')} failed to load ({', '.join(failed)}): every call refuses {codes} "
              f"until {'they are' if len(failed) > 1 else 'it is'} fixed, uninstalled, or disabled with "
              f"FUNCTAI_DISABLE_PLUGINS={disable}", file=out)
    if args.verbose:
        for item in found.found:
            if item.plugin is not None:
                print("\n" + item.plugin.describe(), file=out)
    if factories:
        print(f"\nbuilt-in factories (entry-point group {BUILTINS!r}):", file=out)
        rows = [["NAME", "DISTRIBUTION", "VERSION", "ENTRY POINT"]]
        for row in factories:
            note = "" if row["providers"] == 1 else (
                f"  ({row['providers']} distributions provide {row['name']!r}: uninstall all but one)")
            rows.append([str(row["name"]), str(row["distribution"] or "-"), str(row["version"] or "-"),
                         f"{row['entry_point']}{note}"])
        table(rows, out)
    if commands:
        _commands(commands, out)
    return 0


def _commands(commands: list[dict[str, Any]], out: TextIO) -> None:
    print(f"\ncommands added by distributions (entry-point group {added.GROUP!r}):", file=out)
    rows = [["NAME", "DISTRIBUTION", "VERSION", "COMMANDS", "STATE"]]
    for item in commands:
        state = f"{item['state']}: {item['reason']}" if item["state"] == added.FAILED else item["state"]
        rows.append([item["name"], str(item["distribution"] or "-"), str(item["version"] or "-"),
                     ",".join(item["commands"]) or "-", state])
    table(rows, out)
    failed = [item["name"] for item in commands if item["state"] == added.FAILED]
    if failed:
        print(f"{plural(len(failed), 'command entry point')} failed ({', '.join(failed)}): the other commands work; "
              "fix or uninstall the distribution that provides it", file=out)


def cmd_explain(args: argparse.Namespace, out: TextIO) -> int:
    """Every plugin a call of the function would run, hook by hook, and why it is where it is."""
    from .._hooks.explain import explain

    data = explain(ai_function(args.function))
    if args.hook:
        data["hooks"] = {args.hook: data["hooks"][args.hook]}
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False), file=out)
        return 0
    print(f"{data['function']}: plugins its calls would run here, hook by hook, in order", file=out)
    print("layers (innermost first): " + "; ".join(
        f"{layer['layer']}: {', '.join(layer['plugins']) or '-'}" for layer in data["layers"]), file=out)
    for hook, rows in data["hooks"].items():
        if not rows:
            print(f"{hook}: -", file=out)
            continue
        print(f"{hook}:", file=out)
        for number, row in enumerate(rows, 1):
            note = f"  ({row['note']})" if "note" in row else ""
            print(f"  {number}. {row['plugin']} {row['version']} [{row['layer']}] {row['handler']}{note}", file=out)
            print(f"     why: {row['why']}", file=out)
    sayings: tuple[tuple[str, Any, Callable[[Any], str]], ...] = (
        ("dropped", data["dropped"], lambda r: f"{r['plugin']} {r['version']} [{r['layer']}]: {r['reason']}"),
        ("unmet", data["unmet"], lambda r: f"{r['plugin']} {r['constraint']}: {r['why']}"),
    )
    for title, rows, say in sayings:
        print(f"{title}:" if rows else f"{title}: none", file=out)
        for row in rows:
            print(f"  {say(row)}", file=out)
    if data["refused"]:
        print(f"refused: every call refuses {data['refused']['code']}: {data['refused']['message']}", file=out)
    return 0
