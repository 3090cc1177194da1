"""Subcommands added by installed distributions through the entry-point group ``functai.commands``.

An entry point names a function ``register(commands)``, given the same argparse subparsers the
built-in command modules are: it adds its parser(s) with ``set_defaults(run=cmd)``, where
``cmd(args, out) -> int``. One that fails to import or to register, or that would take or change
a built-in command, is left out and reported — the other commands work as before. They are loaded
only for a line that names no built-in command (and for ``functai plugins``, which lists them).
"""

from __future__ import annotations

from typing import Any

from .._hooks import installed
from .._log import warn

GROUP = "functai.commands"

LOADED, FAILED = "loaded", "failed"

#: What the last parser built found in the group (`functai plugins` lists it).
found: list[dict[str, Any]] = []


def add_installed(commands: Any) -> list[dict[str, Any]]:
    """Let each entry point of ``functai.commands`` add its subcommands; what became of each."""
    results: list[dict[str, Any]] = []
    for entry_point in installed.entry_points(GROUP):  # looked up here: a test may replace it
        dist = getattr(entry_point, "dist", None)
        item: dict[str, Any] = {"name": entry_point.name, "entry_point": entry_point.value,
                                "distribution": getattr(dist, "name", None), "version": getattr(dist, "version", None),
                                "commands": [], "state": LOADED, "reason": None}
        before = dict(commands.choices)
        kept = {name: _state(parser) for name, parser in before.items()}  # to tell, and take back, a change
        shown = list(commands._choices_actions)  # the help lines, to take back what a failed register added
        try:
            register = entry_point.load()
            if not callable(register):
                raise TypeError(f"it gives a {type(register).__name__}, not a function register(commands)")
            register(commands)
            taken = [name for name, parser in before.items() if commands.choices.get(name) is not parser]
            if taken:
                raise ValueError(f"it replaces the command {taken[0]!r}; choose another name")
            changed = [name for name, parser in before.items() if _state(parser) != kept[name]]
            if changed:
                raise ValueError(f"it changes the built-in command {changed[0]!r} (its arguments or defaults)")
            added = [name for name in commands.choices if name not in before]
            missing = [name for name in added if not callable(commands.choices[name].get_default("run"))]
            if not added:
                raise ValueError("its register(commands) added no command")
            if missing:
                raise ValueError(f"its command {missing[0]!r} has no run default (set_defaults(run=...))")
            item["commands"] = added
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # an import error, a wrong object, even SystemExit
            for name, parser in before.items():
                _restore(parser, kept[name])
            commands.choices.clear()
            commands.choices.update(before)
            commands._choices_actions[:] = shown
            item["state"], item["reason"] = FAILED, f"{type(error).__name__}: {error}"
            warn("command failed to load", command=entry_point.name, distribution=item["distribution"],
                 reason=item["reason"])
        results.append(item)
    found[:] = results
    return results


def _state(parser: Any) -> tuple[dict[str, Any], list[tuple[Any, Any]], int, int]:
    """What a register could change of a command's parser: its defaults, its arguments and theirs,
    its groups of arguments (which its help lists)."""
    return (dict(parser._defaults), [(action, action.default) for action in parser._actions],
            len(parser._action_groups), len(parser._mutually_exclusive_groups))


def _restore(parser: Any, state: tuple[dict[str, Any], list[tuple[Any, Any]], int, int]) -> None:
    defaults, actions, groups, exclusive = state
    parser._defaults = defaults
    for action, default in actions:
        action.default = default
    for action in parser._actions[len(actions):]:  # arguments it added: taken back, from the help too
        parser._remove_action(action)
        for option in action.option_strings:
            parser._option_string_actions.pop(option, None)
        for group in (*parser._action_groups, *parser._mutually_exclusive_groups):
            if action in group._group_actions:
                group._group_actions.remove(action)
    del parser._action_groups[groups:], parser._mutually_exclusive_groups[exclusive:]
