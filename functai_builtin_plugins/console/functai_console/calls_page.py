"""The call browser as HTML: the call log as a filtered table, and one call's page."""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import quote, urlencode

from .html import data, e, hidden, rows, short

HEAD = ["started", "function", "model", "seconds", "tokens", "error", "rating", "call"]

#: How many rows a page of the table shows (newest first); the filters narrow what they are taken from.
PAGE = 100

#: The table's filters (query parameters) as `functai.read_calls` takes them: a function
#: (``name`` or ``module:name``), an error code (``any``: every failed call), a plugin that changed
#: the call, the day it started (``YYYY-MM-DD``).
FILTERS = {"function": "function", "error": "error", "plugin": "plugin", "date": "day"}


def read_filters(params: Mapping[str, str]) -> dict[str, Any]:
    """``read_calls`` keywords from the page's query parameters (empty ones left out)."""
    found: dict[str, Any] = {FILTERS[k]: v for k, v in params.items() if k in FILTERS and v}
    if found.get("error") == "any":
        found["error"] = True
    return found


def tokens(record: Any) -> str:
    usage = record.usage or {}
    total = usage.get("total_tokens")
    if total is None and usage:
        total = sum(v for k, v in usage.items() if k in ("prompt_tokens", "completion_tokens") and isinstance(v, int))
    return str(total) if total is not None else "-"


def rating(record: Any) -> str:
    if not record.rating:
        return "-"
    good = record.rating.get("good")
    return f'<span class="{"good" if good else "bad"}">{"good" if good else "bad"}</span>'


def table(records: list[Any], params: Mapping[str, str], more: bool) -> str:
    """The filter form, a page of the newest matching calls, and the link to the next page."""
    body = [[
        e(r.started), e(r.function), e(r.model or "-"),
        e(f"{r.seconds:.3f}" if r.seconds is not None else "-"), e(tokens(r)),
        f'<span class="bad">{e(r.error.get("code"))}</span>' if r.error else "-", rating(r),
        f'<a href="/calls/{quote(r.id)}">{e(r.id)}</a>' + (' <span class="muted">nested</span>' if r.parent else ""),
    ] for r in records]
    kept = {k: v for k, v in params.items() if k in FILTERS and v}
    older = ""
    if more:
        older = f'<p><a rel="next" href="/calls?{urlencode({**kept, "before": records[-1].id})}">older calls</a></p>'
    newest = ' · <a href="/calls?' + urlencode(kept) + '">newest</a>' if params.get("before") else ""
    shown = f"<p>{len(records)} calls{' (newest first)' if records else ''}{newest}</p>"
    return _filters(kept, records) + shown + rows(HEAD, body, attrs='id="calls"') + older


def _filters(params: Mapping[str, str], records: list[Any]) -> str:
    """Text boxes, each suggesting the values on this page (the log's own values are not all read)."""
    seen = {
        "function": sorted({r.function for r in records}),
        "error": ["any", *sorted({str(r.error.get("code")) for r in records if r.error and r.error.get("code")})],
        "plugin": sorted({str(c["plugin"]) for r in records for c in r.changes if c.get("plugin")}),
    }
    boxes = "".join(
        f'<label>{name} <input type="text" name="{name}" list="{name}-seen" value="{e(params.get(name) or "")}">'
        f'<datalist id="{name}-seen">{_options(values)}</datalist></label>' for name, values in seen.items())
    return ('<form class="filters" method="get" action="/calls">' + boxes
            + f'<label>date <input type="date" name="date" value="{e(params.get("date") or "")}"></label>'
            + '<button>Filter</button> <a href="/calls">clear</a></form>')


def _options(values: list[str]) -> str:
    return "".join(f'<option value="{e(value)}">' for value in values)


def call(record: Any, nested: list[tuple[int, Any]], csrf: str) -> str:
    """One call: what was asked, what shaped it (changes by plugin and hook), tools and their
    approvals, what came back, nested calls, and the rating form."""
    facts = [("function", f"{record.module}:{record.function}" if record.module else record.function),
             ("version", record.version), ("model", record.model or "-"), ("started", record.started),
             ("seconds", f"{record.seconds:.3f}" if record.seconds is not None else "-"),
             ("model requests", str(record.attempts)), ("finish", record.finish_reason or "-")]
    parts = [rows(["", ""], [[e(k), e(v)] for k, v in facts], attrs='class="facts"')]
    if record.parent:
        parts.append(f'<p>inside <a href="/calls/{quote(record.parent)}">{e(record.parent)}</a></p>')
    where = record.conversation or {}
    if where.get("id"):
        parts.append(f'<p>turn {e(where.get("turn"))} of conversation '
                     f'<a href="/conversations/{quote(str(where["id"]))}#turn-{e(where.get("turn"))}">'
                     f'{e(where["id"])}</a></p>')
    parts.append("<h2>Inputs</h2>" + rows(["input", "value"], [[e(k), data(v)] for k, v in record.inputs.items()]))
    parts.append("<h2>Instruction</h2>" + data(record.instruction))
    if record.sections:
        parts.append("<h2>Sections</h2>" + "".join(data(s) for s in record.sections))
    parts.append("<h2>Changes by plugin</h2>" + (changes(record.changes) or '<p class="muted">no changes</p>'))
    parts.append("<h2>Tool calls</h2>" + (tool_calls(record) or '<p class="muted">no tool calls</p>'))
    if record.error:
        parts.append(f'<h2>Error</h2><p class="bad">[{e(record.error.get("code"))}]</p>'
                     + data(record.error.get("message", {"chars": record.error.get("chars", 0)})))
    else:
        parts.append("<h2>Value</h2>" + data(record.output))
    if record.usage:
        parts.append("<h2>Usage</h2>" + rows(["", ""], [[e(k), e(v)] for k, v in record.usage.items()]))
    timed = [c for c in record.changes if "µs" in c] + list(record.heard or [])
    if timed:
        parts.append("<h2>Handler times</h2>" + rows(["plugin", "hook", "µs"], [
            [e(c.get("plugin")), e(c.get("hook")), e(c.get("µs"))]
            for c in sorted(timed, key=lambda c: -float(c.get("µs") or 0))]))
    if nested:
        parts.append("<h2>Nested calls</h2><div class='tree'>" + "".join(
            f'<div style="margin-left:{22 * (depth - 1)}px">└ <a href="/calls/{quote(r.id)}">{e(r.function)}</a> '
            f'<span class="muted">{e(r.id)}</span>{_failed(r)}</div>' for depth, r in nested) + "</div>")
    parts.append("<h2>Rating</h2>" + _rating(record, csrf))
    return "".join(parts)


def _failed(record: Any) -> str:
    return f' <span class="bad">{e(record.error.get("code"))}</span>' if record.error else ""


def changes(found: list[dict[str, Any]]) -> str:
    """The changes grouped by plugin, then by hook, each with its note."""
    by_plugin: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for change in found:
        plugin = f"{change.get('plugin')} {change.get('version') or ''}".strip()
        by_plugin.setdefault(plugin, {}).setdefault(str(change.get("hook")), []).append(change)
    out = []
    for plugin, hooks in by_plugin.items():
        inner = "".join(
            f"<li><code>{e(hook)}</code>" + "".join(
                (data(c["change"]) if "change" in c else '<span class="muted">(content not recorded)</span>')
                + (f'<div class="muted">note: {e(c["note"])}</div>' if "note" in c else "")
                + (f'<div class="muted">by {e(c["by"])}</div>' if "by" in c else "")
                for c in items) + "</li>"
            for hook, items in hooks.items())
        out.append(f'<div class="plugin" data-plugin="{e(plugin.split()[0])}"><b>{e(plugin)}</b><ul>{inner}</ul></div>')
    return "".join(out)


def tool_calls(record: Any) -> str:
    """Each tool call with how it ended, and the approvals the call waited for."""
    answers: dict[str, Any] = {}
    asked: dict[tuple[str, str], list[dict[str, Any]]] = {}  # by (path, invocation): one tool call's approvals
    for wait in (record.conversation or {}).get("waited") or []:
        answers.update(wait.get("answers") or {})
        for approval in wait.get("approvals") or []:
            if approval.get("kind") == "request":
                continue  # asked before a request (a budget's), about no tool call
            site = str(approval.get("key") or "").split(".")  # the asking call, the invocation, the plugin, …
            place = (str(approval.get("path")), site[1] if len(site) > 1 else "")
            asked.setdefault(place, []).append(approval)
    out = []
    for invocation, tool in enumerate(record.tool_calls, 1):
        stopped = next((how for how in ("blocked", "refused") if how in tool), None)
        if stopped:
            why = tool.get("block_reason" if stopped == "blocked" else "refuse_reason")
            end = f'<span class="bad">{stopped} by {e(tool[stopped])}</span>' + (f": {short(why)}" if why else "")
        elif "error" in tool:
            end = f'<span class="bad">failed</span> {short(tool["error"])}'
        else:
            end = "→ " + short(tool.get("output"), 200)
        approvals = "".join(
            f"<div>asked {e(a.get('plugin'))} about {short(a.get('input'))}: "
            f"{_verdict(answers.get(str(a.get('key'))))}</div>"
            for a in asked.pop((f"{record.path}/{tool.get('name')}", str(invocation)), []))
        out.append(f'<div class="plugin"><b>{e(tool.get("name"))}</b>({short(tool.get("input"), 200)})<br>{end}'
                   f"{approvals}</div>")
    return "".join(out)


def _verdict(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return '<span class="muted">not answered</span>'
    edit = f" with {short(answer['inputs'])}" if answer.get("inputs") else ""
    reason = f" ({e(answer['reason'])})" if answer.get("reason") else ""
    verdict = "approved" if answer.get("allow") else "denied"
    return f"{verdict}{edit}{reason} by {e(answer.get('by') or 'someone')} at {e(answer.get('at'))}"


def _rating(record: Any, csrf: str) -> str:
    now = (f"<p>rated {rating(record)} by {e(record.rating.get('by') or 'someone')}</p>" if record.rating else "")
    return now + (
        f'<form method="post" action="/calls/{quote(record.id)}/rate">{hidden(csrf=csrf)}'
        # The form's default button, disabled: Enter in a field submits nothing (never a rating).
        '<button type="submit" disabled hidden aria-hidden="true"></button>'
        '<input type="text" name="by" placeholder="your name" required aria-label="your name"> '
        '<input type="text" name="correction" placeholder="correction (optional)" aria-label="correction"> '
        '<button name="good" value="1">Good</button> <button name="good" value="0">Bad</button></form>')
