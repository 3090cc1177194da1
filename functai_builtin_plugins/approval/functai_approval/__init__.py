"""functai's approval plugin, written with functai's public API only.

It declares ``last=True``, so functai runs it after every other ``tool_call``
handler, on the input they left, and ``serves=["approve"]``: it reads the
call's ``approve`` setting and asks about the tool calls its rule selects.
"""

from __future__ import annotations

from typing import Any, Sequence

from functai import Plugin

__version__ = "0.1.0"

plugin = Plugin(
    "approval",
    version=__version__,
    last=True,  # a guard: it must see the input every other handler left
    serves=["approve"],  # a call with approve set refuses approval-missing unless a plugin serves it
    description="Asks a person (or the approve function) before the tool calls the approve rule selects.",
)


def matches(entries: Sequence[str], name: str, path: str) -> bool:
    """The list rule: an entry equals the tool's name or its whole approval
    path, or the path ends with ``"/" + entry``.

    >>> matches(["answer/refund"], "refund", "support/answer/refund")
    True
    >>> matches(["email"], "send_email", "support/send_email")
    False
    """
    return any(entry == name or entry == path or path.endswith("/" + entry) for entry in entries)


def selects(rule: Any, tool: Any) -> bool:
    """Whether the ``approve`` rule asks about this tool call."""
    if rule is None:
        return False
    if callable(rule) or rule == "changes":
        return bool(tool.effects != "reads")  # undeclared effects count as "changes"
    if rule == "all":
        return True
    return matches(rule, tool.name, tool.path)


@plugin.tool_call
def ask_when_the_rule_says(tool: Any) -> None:
    rule = tool.settings.get("approve")
    if not selects(rule, tool):
        return None
    if callable(rule):
        tool.ask(decide=lambda question: rule(question.about))  # the approve function is given the tool call
    else:
        tool.ask()
    return None
