"""The inbox: every waiting turn's approvals across the store's conversations, and answering them.

Deciding is separate from resuming: an answer is recorded in the store (the first answer holds,
in every process); the tool runs where the function can be imported — here with ``--import``,
else in the program that made the turn (``turn.resume()``) or ``functai resume``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import functai
from functai.cli import read_typed

from .state import Console

def waiting(console: Console) -> list[dict[str, Any]]:
    """One item per approval of every waiting turn, newest wait first; first, one per conversation
    that cannot be read (``unreadable``: why), which may hold approvals nobody can see."""
    items, unreadable = [], []
    for cid, view, why in console.readable():
        if view is None:
            unreadable.append({"conversation": cid, "unreadable": why})
            continue
        try:
            items += _of(view, cid)
        except Exception as error:  # a store edited by hand: the rest of the inbox still shows, and this one why
            unreadable.append({"conversation": cid, "unreadable": f"{type(error).__name__}: {error}"})
    items.sort(key=lambda item: str(item["since"] or ""), reverse=True)
    return unreadable + items


def _of(view: functai.Conversation, conversation: str) -> list[dict[str, Any]]:
    function = view.function
    items = []
    for turn in view.all_turns():
        if turn.state != "waiting":
            continue
        last = (turn.waits or [{}])[-1]
        answers: Mapping[str, Any] = last.get("answers", {})
        for approval in turn.approvals:
            items.append({
                "conversation": conversation, "function": function, "turn": turn.id, "call": turn.call,
                "key": approval["key"], "tool": _about(approval), "input": _offered(approval),
                "plugin": approval.get("plugin"), "question": approval.get("question"),
                "effects": approval.get("effects"), "since": last.get("at") or turn.at,
                "answer": answers.get(approval["key"]),
                "ready": all(a["key"] in answers for a in turn.approvals),
            })
    return items


def _about(approval: Mapping[str, Any]) -> str:
    """A tool call's name, or what a question a plugin asked before a request is about."""
    return str(approval["name"]) if approval.get("kind") != "request" else "before a model request"


def _offered(approval: Mapping[str, Any]) -> dict[str, Any]:
    """What a person may change before approving: a tool's input, or the extension a question offers."""
    if approval.get("kind") != "request":
        return tool_input(approval)
    return {} if approval.get("extend") is None else {"extend": approval["extend"]}


def tool_input(approval: Mapping[str, Any]) -> dict[str, Any]:
    """The tool call's input an approval shows ({} where an older record, edited, holds none)."""
    found = approval.get("input")
    return dict(found) if isinstance(found, Mapping) else {}


_JSON_STARTS = frozenset('[{"-0123456789tfn \t\n\r')


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _json(text: str) -> Any:
    """``text`` read as strict JSON (``NaN`` and ``Infinity`` are text, as no JSON reader takes them)."""
    return json.loads(text, parse_constant=_refuse)


def read_edit(form: Mapping[str, Any], asked: Mapping[str, Any],
              parameters: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The inputs a person changed in the approve form (``input.NAME`` fields), each read as
    `functai.cli.read_typed` reads it (JSON the input takes, else the text); None when nothing
    changed. A field sent back as it was shown is no edit, whatever line endings the browser sent it
    with (a form sends a text area's as CRLF)."""
    edit: dict[str, Any] = {}
    for field, text in form.items():
        if not field.startswith("input.") or not isinstance(text, str):
            continue
        name = field[len("input."):]
        if name in asked and _lines(text) == _lines(as_field(asked[name])):
            continue
        value = read_typed(_lines(text), name, parameters)  # as typed: a browser sends line ends as CRLF
        if name not in asked or _json_text(value) != _json_text(asked[name]):  # True is not 1 here
            edit[name] = value
    return edit or None


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _lines(text: str) -> str:
    """Text as a form gives it back, whatever a browser does to it: its line ends as LF (a lone CR
    too), a NUL as U+FFFD."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


def as_field(value: Any) -> str:
    """An input as the approve form shows it for editing: text as it is, anything else as JSON
    (and text that would read as JSON, such as ``"42"``, as JSON text, so it stays text)."""
    if isinstance(value, str):
        if not value or value[0] not in _JSON_STARTS:
            return value
        try:
            _json(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False)


def answer(console: Console, form: Mapping[str, Any]) -> str:
    """Record the answer the form gives; what happened, for the person who gave it.

    Raises `functai.FunctAIError` (``approval-answered`` naming who answered first, ``input-invalid``,
    ``turn-not-waiting``) for the page to show.
    """
    conversation, turn_id, key = (str(form.get(name) or "") for name in ("conversation", "turn", "key"))
    if not (conversation and turn_id and key):
        raise functai.FunctAIError("the form names no conversation, turn and approval: reload the inbox",
                                   code="console-form")
    by = str(form.get("by") or "").strip()
    if not by:
        raise functai.FunctAIError("give your name: every answer is kept with who gave it", code="console-by")
    turn = console.view(conversation).turn(turn_id)
    first = next((w["answers"][key] for w in reversed(turn.waits) if key in w["answers"]), None)
    if turn.state != "waiting" and first is not None:  # answered, and resumed since: say by whom
        verdict = "approved" if first["allow"] else "denied"
        raise functai.FunctAIError(
            f"approval {key!r} of turn {turn_id!r} was already {verdict} by {first.get('by') or 'someone'} at "
            f"{first.get('at')}, and the turn is {turn.state} now; your answer was not recorded",
            code="approval-answered")
    asked = next((a for a in turn.approvals if a["key"] == key), None)
    if asked is None:
        raise functai.FunctAIError(f"turn {turn_id!r} of {conversation!r} does not wait for {key!r} any more",
                                   code="turn-not-waiting")
    action = form.get("action")
    if action not in ("approve", "deny"):  # only a button says what the person chose
        raise functai.FunctAIError("the form says neither approve nor deny: press one of its buttons",
                                   code="console-form")
    if action == "deny":
        turn.deny(key, reason=str(form.get("reason") or "").strip() or None, by=by)
        done = f"{_about(asked)} denied by {by}"
    elif asked.get("kind") == "request":  # a budget's question: the field is the extension granted
        granted = read_edit(form, _offered(asked)) or {}
        turn.approve(key, extend=granted.get("extend"), by=by)
        done = f"{_about(asked)} approved by {by}" + (f" with {granted['extend']} more" if "extend" in granted else "")
    else:
        edit = read_edit(form, asked["input"], asked.get("parameters"))
        turn.approve(key, inputs=edit, by=by)
        done = f"{asked['name']} approved by {by}" + (f" with {json.dumps(edit, ensure_ascii=False)}" if edit else "")
    return done + "; " + after_answer(console, conversation, turn_id)


def after_answer(console: Console, conversation: str, turn_id: str) -> str:
    """Resume the turn here when every approval is answered and its function imports; else say who will."""
    turn = console.view(conversation).turn(turn_id)
    open_keys = [a["key"] for a in turn.approvals if a["key"] not in (turn.waits or [{}])[-1].get("answers", {})]
    if turn.state != "waiting" or open_keys:
        return (f"{len(open_keys)} more approval(s) of this turn wait" if open_keys
                else f"answered; it was resumed elsewhere (the turn is {turn.state})")
    if console.program(conversation) is None:
        return "waiting for the program to resume"
    try:
        value = console.resume(conversation, turn_id)
    except functai.Waiting as again:
        return f"resumed here; it waits again, for {', '.join(_about(a) for a in again.approvals)}"
    except functai.FunctAIError as error:
        return f"resumed here; the turn failed [{error.code}]: {error.message}"
    return f"resumed here: {value!r}"
