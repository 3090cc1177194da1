"""The call browser as HTML: the call log as a filtered table, and one call's page."""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import quote

from .html import data, e, hidden, rows, short
from .state import walk

HEAD = ["started", "function", "model", "seconds", "tokens", "error", "rating", "call"]

#: How many rows the table shows (newest first); the filters narrow what they are taken from.
LIMIT = 500


def matches(record: Any, filters: Mapping[str, str]) -> bool:
    """Whether a record passes the table's filters: function, error code (``any``: every failed
    call), a plugin that changed it, the day it started (``YYYY-MM-DD``)."""
    function, error = filters.get("function"), filters.get("error")
    plugin, date = filters.get("plugin"), filters.get("date")
    if function and function not in (record.function, f"{record.module}:{record.function}"):
        return False
    if error:
        code = (record.error or {}).get("code")
        if (error == "any" and code is None) or (error != "any" and code != error):
            return False
    if plugin and not any(change.get("plugin") == plugin for change in record.changes):
        return False
    return not date or str(record.started).startswith(date)


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


def table(records: list[Any], filters: Mapping[str, str]) -> str:
    """The filter form and the table of the newest matching calls."""
    functions = sorted({r.function for r in records})
    codes = sorted({str(r.error["code"]) for r in records if r.error and r.error.get("code")})
    plugins = sorted({str(c["plugin"]) for r in records for c in r.changes if c.get("plugin")})
    found = [r for r in records if matches(r, filters)]
    body = [[
        e(r.started), e(r.function), e(r.model or "-"),
        e(f"{r.seconds:.3f}" if r.seconds is not None else "-"), e(tokens(r)),
        f'<span class="bad">{e(r.error.get("code"))}</span>' if r.error else "-", rating(r),
        f'<a href="/calls/{quote(r.id)}">{e(r.id)}</a>' + (' <span class="muted">nested</span>' if r.parent else ""),
    ] for r in found[:LIMIT]]
    more = f"<p class='muted'>showing the newest {LIMIT} of {len(found)}</p>" if len(found) > LIMIT else ""
    return (_filters(filters, functions, codes, plugins) + f"<p>{len(found)} of {len(records)} calls</p>"
            + rows(HEAD, body, attrs='id="calls"') + more)


def _select(name: str, values: list[str], chosen: str | None, every: str) -> str:
    options = [f'<option value="">{e(every)}</option>'] + [
        f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(v)}</option>' for v in values]
    return f'<label>{e(name)} <select name="{e(name)}">{"".join(options)}</select></label>'


def _filters(filters: Mapping[str, str], functions: list[str], codes: list[str], plugins: list[str]) -> str:
    error = _select("error", ["any", *codes], filters.get("error"), "all calls")
    return ('<form class="filters" method="get" action="/calls">'
            + _select("function", functions, filters.get("function"), "every function") + error
            + _select("plugin", plugins, filters.get("plugin"), "any plugin")
            + f'<label>date <input type="date" name="date" value="{e(filters.get("date") or "")}"></label>'
            + '<button>Filter</button> <a href="/calls">clear</a></form>')


def call(record: Any, records: list[Any], csrf: str) -> str:
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
    nested = list(walk(records, record.id))
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
        '<input type="text" name="by" placeholder="your name" required aria-label="your name"> '
        '<input type="text" name="correction" placeholder="correction (optional)" aria-label="correction"> '
        '<button name="good" value="1">Good</button> <button name="good" value="0">Bad</button></form>')
