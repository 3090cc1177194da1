"""The inbox as HTML: one row per waiting approval, with its approve, edit and deny form."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import quote

from .html import e, hidden, rows, short, state
from .inbox import as_field
from .state import waited

HEAD = ["waiting", "function", "conversation", "tool", "input that will run", "why", "answer"]

#: Polls the rows every two seconds: new waiting turns appear, answered ones leave; a row someone
#: is typing in stays as it is.
POLL = """<script>
(function(){
  async function poll(){
    try{
      const r = await fetch('/inbox/rows', {credentials:'same-origin'});
      if(!r.ok) return;
      const box = document.createElement('tbody'); box.innerHTML = await r.text();
      const body = document.querySelector('#inbox tbody');
      const busy = document.activeElement && document.activeElement.closest('tr');
      const fresh = new Map([...box.children].map(tr => [tr.dataset.key, tr]));
      for(const tr of [...body.children]){
        if(!fresh.has(tr.dataset.key) && tr !== busy) tr.remove();
      }
      let before = null;
      for(const [key, tr] of [...fresh.entries()].reverse()){
        const have = body.querySelector('tr[data-key="' + CSS.escape(key) + '"]');
        if(have && have !== busy && have.dataset.status !== tr.dataset.status){ have.replaceWith(tr); before = tr; }
        else if(have){ before = have; }
        else{ body.insertBefore(tr, before ? before : body.firstChild); before = tr; }
      }
      document.getElementById('count').textContent = fresh.size;
    }catch(err){}
  }
  setInterval(poll, 2000);
})();
</script>"""


def body(items: list[dict[str, Any]], csrf: str) -> str:
    """The inbox's table (its rows also come alone from ``/inbox/rows``)."""
    listed = rows(HEAD, [], attrs='id="inbox"').replace("<tbody></tbody>", f"<tbody>{row_html(items, csrf)}</tbody>")
    return (f'<p>Approvals waiting: <span id="count">{len(items)}</span>. New ones appear here without reloading. '
            "An answer is recorded in the store; the tool runs where the function is imported.</p>" + listed)


def row_html(items: list[dict[str, Any]], csrf: str) -> str:
    return "".join(_row(item, csrf) for item in items)


def _row(item: dict[str, Any], csrf: str) -> str:
    if "unreadable" in item:
        return (f'<tr data-key="{e(item["conversation"])}" data-status="unreadable"><td>-</td><td>-</td>'
                f'<td>{e(item["conversation"])}</td><td colspan="4">{state("failed")} this conversation cannot be '
                f'read, so its approvals cannot be shown: {e(item["unreadable"])}</td></tr>')
    conversation = f'<a href="/conversations/{quote(item["conversation"])}">{e(item["conversation"])}</a>'
    turn = f'<br><span class="muted">turn {e(item["turn"])}</span>'
    why = e(item["plugin"] or "-") + (f"<br>{e(item['question'])}" if item["question"] else "") + (
        f'<br><span class="muted">effects: {e(item["effects"])}</span>' if item["effects"] else "")
    answer = item["answer"]
    status = "open" if answer is None else ("ready" if item["ready"] else "answered")
    form = _form_id(item)
    cells = [
        e(waited(item["since"])),
        e(item["function"] or "-"),
        conversation + turn,
        f"<b>{e(item['tool'])}</b>",
        _inputs(item, form) if answer is None else short({**item["input"], **(answer.get("inputs") or {})}),
        why,
        _form(item, csrf, form) if answer is None else _answered(item, answer),
    ]
    return (f'<tr data-key="{e(item["conversation"])}/{e(item["turn"])}/{e(item["key"])}" data-status="{status}">'
            + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")


def _form_id(item: dict[str, Any]) -> str:
    """An id no other row's form has: its fields name their form by it, and a browser gives a field
    to the first form of that id."""
    named = json.dumps([item["conversation"], item["turn"], item["key"]]).encode()
    return "f-" + hashlib.sha256(named).hexdigest()[:32]


def _inputs(item: dict[str, Any], form: str) -> str:
    """The tool's input as fields a person may change before approving (the form is in the last cell).
    Text of more than one line goes in a text area: a browser drops the line breaks of a text field."""
    fields = []
    for name, value in item["input"].items():
        shown = as_field(value)
        if "\n" in shown or "\r" in shown:  # after the tag, one newline the HTML parser drops: the text keeps its first
            field = f'<textarea form="{form}" name="input.{e(name)}" rows="3">\n{e(shown)}</textarea>'
        else:
            field = f'<input type="text" form="{form}" name="input.{e(name)}" value="{e(shown)}">'
        fields.append(f"<label>{e(name)} {field}</label><br>")
    return "".join(fields) or '<span class="muted">no input</span>'


def _form(item: dict[str, Any], csrf: str, form: str) -> str:
    keys = hidden(csrf=csrf, conversation=item["conversation"], turn=item["turn"], key=item["key"])
    return (
        f'<form method="post" action="/inbox/answer" id="{form}">{keys}'
        # The form's default button, disabled: Enter in a field submits nothing (never an approval).
        '<button type="submit" disabled hidden aria-hidden="true"></button>'
        '<input type="text" name="by" placeholder="your name" required aria-label="your name"> '
        '<button name="action" value="approve">Approve</button><br>'
        '<input type="text" name="reason" placeholder="reason to deny" aria-label="reason"> '
        '<button name="action" value="deny">Deny</button></form>'
    )


def _answered(item: dict[str, Any], answer: dict[str, Any]) -> str:
    verdict = "approved" if answer["allow"] else "denied"
    edit = f" with {short(answer['inputs'])}" if answer.get("inputs") else ""
    reason = f": {e(answer['reason'])}" if answer.get("reason") else ""
    then = " — waiting for the program to resume" if item["ready"] else " — other approvals of the turn wait"
    return f'<span class="{"good" if answer["allow"] else "bad"}">{verdict}</span>{edit}{reason} by ' \
           f'{e(answer.get("by") or "someone")}{e(then)}'
