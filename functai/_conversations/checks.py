"""What makes a conversation record usable: one check per kind.

A record that parses as JSON can still be damaged (an editor, a disk, a buggy
writer); `problem` says why, so the fold never raises deep inside and the
warning can name the line. Kinds this version does not know are not checked.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Mapping

from .._calls.approvals import is_extension


#: The states an ``end`` record may give a turn.
END_STATES = frozenset({"done", "failed", "stopped", "abandoned"})


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _opt(value: Any, kind: type) -> bool:
    return value is None or isinstance(value, kind)


def _optional_text(value: Any) -> bool:
    return _opt(value, str)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _shown(value: Any) -> bool:
    """A shown list (explicit ids) or the compact form ``{"last": n, "drop": [ids]}``."""
    if isinstance(value, list):
        return _texts(value)
    if isinstance(value, dict):
        last = value.get("last")
        return (isinstance(last, int) and not isinstance(last, bool) and 0 <= last <= sys.maxsize
                and _texts(value.get("drop", [])) and set(value) <= {"last", "drop"})
    return False


def _without(value: Any) -> bool:
    return isinstance(value, dict) and all(_texts(names) for names in value.values())


def _dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _approvals(value: Any) -> bool:
    """Questions about a tool call (its ``name``), or asked before a request (``kind: request``)."""
    return isinstance(value, list) and all(
        isinstance(item, dict) and _is_text(item.get("key")) and isinstance(item.get("plugin"), str)
        and (isinstance(item.get("name"), str) if item.get("kind") != "request" else _is_text(item.get("question")))
        for item in value
    )


def _usage(value: Any) -> bool:
    """Token counts by name, numbers (None: none): what a resumed turn adds to its call's usage."""
    return value is None or (isinstance(value, dict) and all(type(count) in (int, float) for count in value.values()))


def _reply(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    calls = value.get("tool_calls", [])
    return (
        _optional_text(value.get("text"))
        and isinstance(calls, list)
        and all(isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("name"), str)
                and isinstance(c.get("input") or {}, dict) for c in calls)
        and _usage(value.get("usage"))
        and _optional_text(value.get("finish_reason"))
        and _optional_text(value.get("refusal"))
        and _optional_text(value.get("reasoning"))
    )


def _tool_entry(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("output", ""), str)


def _tool(record: Mapping[str, Any]) -> str | None:
    if record["state"] == "done" and not isinstance(record["entry"].get("output"), str):
        return "a done tool call has no 'output'"
    return None


def _end_state(value: Any) -> bool:
    return isinstance(value, str) and value in END_STATES


DICT = (lambda v: isinstance(v, dict), "an object")
LIST_OF_DICTS = (_dicts, "a list of objects")
TEXTS = (_texts, "a list of strings")
TEXT = (_is_text, "a non-empty string")
OPTIONAL_TEXT = (_optional_text, "a string")

_KINDS: dict[str, tuple[tuple[str, Callable[[Any], bool], str, bool], ...]] = {
    "conversation": (("function", *TEXT, True),),
    "entry": (("plugin", *TEXT, True), ("entry", *TEXT, True), ("turn", *OPTIONAL_TEXT, False)),
    "turn": (
        ("turn", *TEXT, True), ("parent", *OPTIONAL_TEXT, False), ("inputs", *DICT, False),
        ("changes", *LIST_OF_DICTS, False), ("shown", _shown, "a list of turn ids or {'last': n}", False),
        ("without", _without, "an object of field-name lists", False), ("sections", *TEXTS, False),
        ("context", *DICT, False),
    ),
    "reply": (("turn", *TEXT, True), ("reply", _reply, "a model reply", True)),
    "tool": (("turn", *TEXT, True), ("site", *TEXT, True), ("state", *TEXT, True),
             ("entry", _tool_entry, "a tool call entry", True), ("changes", *LIST_OF_DICTS, False)),
    "wait": (("turn", *TEXT, True), ("approvals", _approvals, "a list of approvals (each with a key and a plugin)",
              True), ("plugins", *TEXTS, False)),
    "answer": (("turn", *TEXT, True), ("key", *TEXT, True), ("allow", lambda v: isinstance(v, bool), "true or false",
               True), ("reason", *OPTIONAL_TEXT, False), ("digest", *OPTIONAL_TEXT, False), ("inputs", *DICT, False),
               ("extend", is_extension, "a number from 0 up", False)),
    "late_answer": (("turn", *TEXT, True), ("key", *TEXT, True)),
    "resume": (("turn", *TEXT, True),),
    "lease": (("turn", *TEXT, True),),
    "interrupt": (("turn", *TEXT, True), ("why", *OPTIONAL_TEXT, False)),
    "end": (("turn", *TEXT, True), ("state", _end_state, "done, failed, stopped or abandoned", True),
            ("outputs", *DICT, False), ("error", *DICT, False)),
}


def _sound_turn(r: Mapping[str, Any]) -> bool:
    turn, shown = r.get("turn"), r.get("shown")
    return (
        isinstance(turn, str) and turn != "" and _opt(r.get("parent"), str) and _opt(r.get("inputs"), dict)
        and (isinstance(shown, dict) and type(shown.get("last")) is int and len(shown) == 1
             and 0 <= shown["last"] <= sys.maxsize)
        and not r.get("changes") and not r.get("without") and not r.get("sections") and _opt(r.get("context"), dict)
    )


def _sound_reply(r: Mapping[str, Any]) -> bool:
    turn, reply = r.get("turn"), r.get("reply")
    return (isinstance(turn, str) and turn != "" and isinstance(reply, dict) and reply.get("tool_calls", []) == []
            and _opt(reply.get("text"), str) and _usage(reply.get("usage"))
            and _opt(reply.get("finish_reason"), str) and _opt(reply.get("refusal"), str)
            and _opt(reply.get("reasoning"), str))


def _sound_end(r: Mapping[str, Any]) -> bool:
    turn = r.get("turn")
    state = r.get("state")
    return (isinstance(turn, str) and turn != "" and isinstance(state, str) and state in END_STATES
            and _opt(r.get("outputs"), dict)
            and _opt(r.get("error"), dict))


#: Quick yes-answers for the commonest shapes (a plain turn, its reply, its end); anything
#: else, or a no, goes through the field-by-field check that says what is wrong.
QUICK: Mapping[str, Callable[[Mapping[str, Any]], bool]] = {
    "turn": _sound_turn, "reply": _sound_reply, "end": _sound_end,
}


#: The key of what a SQL store reads for a row that is not a record: why it cannot be used.
UNUSABLE = "functai_unusable"


def problem(record: Mapping[str, Any], quick: Mapping[str, Callable[[Mapping[str, Any]], bool]] = QUICK) -> str | None:
    """Why ``record`` (of this format) cannot be used, or None when its shape is sound."""
    unusable = record.get(UNUSABLE)
    if isinstance(unusable, str):
        return unusable
    kind = record.get("kind")
    if not isinstance(kind, str):
        return "it has no 'kind'"
    sound = quick.get(kind)
    if sound is not None and sound(record):
        return None
    fields = _KINDS.get(kind)
    if fields is None:
        return None  # a kind from a newer writer: skipped by the fold, not damage
    for name, ok, what, required in fields:
        if name not in record:
            if required:
                return f"it has no {name!r}"
        elif (required or record[name] is not None) and not ok(record[name]):
            return f"{name!r} is not {what}"
    return _tool(record) if kind == "tool" else None
