"""The conversation tree as HTML: turns under the turn they continue, so branches show."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .html import e, rows, short, state
from .inbox import tool_input
from .state import waited


def listing(items: list[tuple[str, str | None, int, int]]) -> str:
    """The store's conversations: id, function, turns, waiting turns."""
    return rows(["conversation", "function", "turns", "waiting"], [
        [f'<a href="/conversations/{quote(cid)}">{e(cid)}</a>', e(function or "-"), e(count),
         state("waiting") + f" {waiting}" if waiting else "-"] for cid, function, count, waiting in items])


def tree(turns: list[Any], entries: list[dict[str, Any]], log: bool) -> str:
    """Every turn as a box under its parent, oldest first; a turn with two children is where a branch starts."""
    below: dict[str | None, list[Any]] = {}
    known = {turn.id for turn in turns}
    for turn in turns:
        below.setdefault(turn.parent if turn.parent in known else None, []).append(turn)
    at: dict[str | None, list[dict[str, Any]]] = {}
    for entry in entries:
        at.setdefault(entry.get("turn"), []).append(entry)
    branches = sum(1 for children in below.values() if len(children) > 1)
    top = ""
    if at.get(None):
        top = "<h2>Entries for every branch</h2>" + _entries(at[None])
    return (top + f"<p>{len(turns)} turns, {branches} where the conversation branches</p>"
            + f'<div class="tree">{_below(None, below, at, log)}</div>')


def _below(parent: str | None, below: dict[str | None, list[Any]], at: dict[str | None, list[dict[str, Any]]],
           log: bool) -> str:
    """The turns under ``parent``, as nested lists; a loop with an explicit stack, so any depth renders."""
    out: list[str] = []
    stack: list[Any] = [("close", None), *[("open", t) for t in reversed(below.get(parent, []))]]
    out.append("<ul>")
    while stack:
        what, turn = stack.pop()
        if what == "close":
            out.append("</ul></li>" if turn is not None else "</ul>")
            continue
        children = below.get(turn.id, [])
        fork = ' data-branches="%d"' % len(children) if len(children) > 1 else ""
        out.append(f'<li{fork}>{_turn(turn, at.get(turn.id, []), log)}')
        if children:
            out.append("<ul>")
            stack.append(("close", turn))
            stack += [("open", child) for child in reversed(children)]
        else:
            out.append("</li>")
    return "".join(out)


def _turn(turn: Any, entries: list[dict[str, Any]], log: bool) -> str:
    shown = turn.shown
    if isinstance(shown, dict):
        seen = f"the {shown.get('last', 0)} newest done turns of its branch"
        if shown.get("drop"):
            seen += f", without {', '.join(map(str, shown['drop']))}"
    else:
        seen = "turns " + ", ".join(map(str, shown)) if shown else "no earlier turn"
    parts = [f'<div class="turn" id="turn-{e(turn.id)}" data-state="{e(turn.state)}">'
             f"<b>{e(turn.id)}</b> {state(turn.state)} <span class='muted'>{e(turn.at or '')}</span>",
             f"<div>inputs: {short(dict(turn.inputs), 160)}</div>"]
    if turn.state == "done":
        parts.append(f"<div>→ {short(turn.outputs.get('output', dict(turn.outputs)), 160)}</div>")
    if turn.why:
        parts.append(f"<div class='bad'>{e(turn.why)}</div>")
    parts.append(f"<div class='muted'>shown {e(seen)}</div>")
    for wait in turn.waits:
        for approval in wait["approvals"]:
            answer = wait["answers"].get(approval["key"])
            edit = (answer or {}).get("inputs") if (answer or {}).get("allow") else None
            reason = f" ({e(answer['reason'])})" if answer is not None and answer.get("reason") else ""
            verdict = ("waiting " + e(waited(wait["at"])) if answer is None else
                       f"{'approved' if answer['allow'] else 'denied'}{' with an edit' if edit else ''} by "
                       f"{e(answer.get('by') or 'someone')}{reason}")
            about = (f"<b>{e(approval.get('name'))}</b> {short({**tool_input(approval), **(edit or {})})}"
                     if approval.get("kind") != "request"  # a question asked before a request (a budget's)
                     else e(approval.get("question") or ""))
            parts.append(f"<div>asked ({e(approval.get('plugin'))}): {about} — {verdict}</div>")
    if entries:
        parts.append(_entries(entries))
    if turn.call and log:
        parts.append(f'<div><a href="/calls/{quote(turn.call)}">open its call</a></div>')
    return "".join(parts) + "</div>"


def _entries(entries: list[dict[str, Any]]) -> str:
    return "".join(f"<div class='muted'>entry {e(entry.get('plugin'))}/{e(entry.get('kind'))}: "
                   f"{short(entry.get('data'))}</div>" for entry in entries)
