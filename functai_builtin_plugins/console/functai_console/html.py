"""Server-rendered HTML: the page around every view, and escaping helpers (every value the console
shows is escaped; nothing from a record is ever markup)."""

from __future__ import annotations

import json
from html import escape
from typing import Any, Iterable

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
header{background:#1d232b;color:#fff;padding:8px 20px;display:flex;gap:20px;align-items:baseline}
header a{color:#cfe3ff;text-decoration:none}header b{margin-right:12px}header small{margin-left:auto;color:#9aa7b5}
main{padding:14px 20px}h1{font-size:20px;margin:4px 0 12px}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;background:#fff;width:100%}td,th{border-bottom:1px solid #e3e6ea;padding:5px 8px;
text-align:left;vertical-align:top}th{background:#eef1f4;font-weight:600}
pre{background:#fff;border:1px solid #e3e6ea;padding:6px 8px;margin:2px 0;white-space:pre-wrap;word-break:break-word}
code{background:#eef1f4;padding:0 3px}.muted{color:#69737d}.bad{color:#b3261e}.good{color:#1b7a3a}
.note{padding:8px 12px;margin:0 0 12px;border-radius:4px;background:#e7f1ff}.note.error{background:#fde8e7}
.state{display:inline-block;padding:0 6px;border-radius:3px;background:#e3e6ea;font-size:12px}
.state.waiting{background:#ffe9b3}.state.done{background:#d3f2dc}.state.failed,.state.interrupted{background:#fde0de}
.state.abandoned{background:#ddd}form.inline{display:inline}input[type=text]{padding:3px 5px;width:12em}
textarea{width:100%;font:12px monospace}button{padding:3px 10px;cursor:pointer}.tree ul{list-style:none;
padding-left:22px;border-left:1px dashed #c3c9d0;margin:4px 0}.tree>ul{border-left:0;padding-left:0}
.turn{background:#fff;border:1px solid #e3e6ea;padding:6px 10px;margin:6px 0;border-radius:4px}
.plugin{background:#fff;border:1px solid #e3e6ea;margin:6px 0;padding:6px 10px;border-radius:4px}
.filters input,.filters select{margin-right:8px}
"""


def e(value: Any) -> str:
    """``value`` as text, escaped for HTML."""
    return escape(value if isinstance(value, str) else str(value), quote=True)


def not_kept(value: Any) -> bool:
    """Whether a recorded value is the size a ``log_content=False`` record keeps in its place."""
    return isinstance(value, dict) and set(value) == {"chars"}


def data(value: Any) -> str:
    """A recorded value: text as it is, anything else as indented JSON; a value recorded without its
    content (``log_content=False``) says so."""
    if not_kept(value):
        return f'<span class="muted">not recorded (log_content=False): {e(value["chars"])} characters</span>'
    if value is None:
        return '<span class="muted">—</span>'
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f"<pre>{e(text)}</pre>"


def short(value: Any, width: int = 80) -> str:
    """A value on one line, at most ``width`` characters (escaped)."""
    if not_kept(value):
        return f'<span class="muted">({e(value["chars"])} chars, not recorded)</span>'
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return e(text if len(text) <= width else text[: width - 1] + "…")


def state(name: str) -> str:
    return f'<span class="state {e(name)}">{e(name)}</span>'


def rows(head: Iterable[str], body: Iterable[Iterable[str]], attrs: str = "") -> str:
    """A table: ``head`` escaped, ``body`` cells already HTML."""
    top = "".join(f"<th>{e(cell)}</th>" for cell in head)
    lines = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in body)
    return f"<table {attrs}><thead><tr>{top}</tr></thead><tbody>{lines}</tbody></table>"


def page(title: str, body: str, *, where: str, note: str = "", error: str = "", script: str = "") -> str:
    """A whole page: the navigation, a note or error from the last action, the body."""
    notes = (f'<p class="note" id="note">{e(note)}</p>' if note else "") + (
        f'<p class="note error" id="error">{e(error)}</p>' if error else "")
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(title)} · functai console</title>'
        f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head><body>'
        f'<header><b>functai console</b><a href="/">Inbox</a><a href="/calls">Calls</a>'
        f'<a href="/conversations">Conversations</a><small>{e(where)}</small></header>'
        f"<main><h1>{e(title)}</h1>{notes}{body}</main>{script}</body></html>"
    )


def hidden(**fields: str) -> str:
    return "".join(f'<input type="hidden" name="{e(name)}" value="{e(value)}">' for name, value in fields.items())
