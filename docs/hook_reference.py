"""Render the hook reference from the hookspecs: ``python docs/hook_reference.py > docs/hooks.md``
(a test checks the file matches)."""

from __future__ import annotations

import inspect

from functai._hooks import events, specs
from functai._hooks.change import ANSWERING, HOOK_FIELDS


def public_name(hook: str) -> str:
    """The name `functai.events` gives a hook's event: the hook's name in CamelCase."""
    return "".join(part.title() for part in hook.split("_"))

def _fields(hook: str) -> list[str]:
    """The event's fields with their annotated types, as the class writes them."""
    cls = events.BY_HOOK[hook]
    written: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        written.update(getattr(klass, "__annotations__", {}))
    shown = []
    for name in cls._fields:
        kind = written.get(name)
        if kind is None:  # a property: its return annotation
            kind = getattr(cls, name).fget.__annotations__.get("return", "Any")
        shown.append(f"`{name}: {kind}`")
    return shown


def render() -> str:
    lines = [
        "# Hook reference",
        "",
        "Generated from `functai/_hooks/specs.py` (the pluggy hookspecs) by",
        "`python docs/hook_reference.py`; do not edit by hand.",
        "",
        "| hook | handler signature | a Change may set |",
        "|---|---|---|",
    ]
    for hook in specs.HOOKS:
        fields = ", ".join(f"`{f}`" for f in sorted(HOOK_FIELDS[hook]))
        if hook == "request":
            fields = "returns a replacement `Request`, a `Reply` (its answer), or a Change: " + fields
        elif hook in ANSWERING:
            fields = "returns a `Reply` (its answer)" + (", or a Change: " + fields if fields else "")
        elif not fields:
            fields = "nothing (hears only)"
        lines.append(f"| `{hook}` | `{hook}{inspect.signature(getattr(specs, hook))}` | {fields} |")
    for hook in specs.HOOKS:
        spec = getattr(specs, hook)
        lines += ["", f"## `{hook}{inspect.signature(spec)}`", "", inspect.getdoc(spec) or "", "",
                  f"Its event is `functai.events.{public_name(hook)}`: " + ", ".join(_fields(hook)) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
