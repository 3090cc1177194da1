"""`Change`: what a handler asks to change, as immutable data. Each field's shape is checked
when it is made; what depends on the hook and the call, when it is folded in (`functai._hooks.fold`).
"""

from __future__ import annotations

import inspect
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs

from .._calls.outputs import to_jsonable
from .._errors import PluginError
from .._models.request import MODEL_SETTING_CHECKS, Reply

if TYPE_CHECKING:
    from typing_extensions import TypedDict, Unpack

    class OtherFields(TypedDict, total=False):
        """`Change`'s keyword arguments besides ``sections``, for a type checker."""

        instruction: str | None
        lm: str | None
        settings: Mapping[str, Any] | None
        tools: Sequence[str] | None
        keep: Sequence[str] | None
        without: Sequence[str] | Mapping[str, Sequence[str]] | None
        inputs: Mapping[str, Any] | None
        block: str | None
        output: str | None
        retry: bool | float | None
        reply: Reply | None
        hold: bool | None
        text: str | None
        stop: str | None
        decision: str | None
        note: str | None


def _refuse(field: str, message: str) -> PluginError:
    return PluginError(f"Change({field}=...): {message}", code="plugin-change", field=field)


def _text(field: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _refuse(field, f"must be a string, not {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise _refuse(field, "must not be empty")
    return value


def _names(field: str, value: Any, *, drop_blank: bool = False) -> tuple[str, ...] | None:
    kind = type(value)
    if kind is not list and kind is not tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise _refuse(field, f"must be a list of strings, not {kind.__name__} (wrap it in a list)")
    items = tuple(value)
    blank = False
    for item in items:
        if not isinstance(item, str):
            raise _refuse(field, f"must hold only strings, got {type(item).__name__}")
        blank = blank or not item.strip()
    if drop_blank and blank:
        return tuple(i for i in items if i.strip()) or None
    return items


def _settings(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise _refuse("settings", f"must be a dict, not {type(value).__name__}")
    for key, item in value.items():
        check = MODEL_SETTING_CHECKS.get(key)
        if check is None:
            known = ", ".join(sorted(MODEL_SETTING_CHECKS))
            raise _refuse("settings", f"unknown model setting {key!r} (known: {known})")
        try:
            check(key, item)
        except (TypeError, ValueError) as error:
            raise _refuse("settings", str(error)) from None
    return dict(value) or None


def _inputs(value: Any) -> Any:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _refuse("inputs", "must be a dict of inputs by name")
    return dict(value) or None


def _without(value: Any) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, tuple[str, ...]] = {}
        for turn, names in value.items():
            if not isinstance(turn, str):
                raise _refuse("without", "turn ids must be strings")
            out[turn] = _names("without", names) or ()
        return out or None
    return _names("without", value)


def _retry(value: Any) -> Any:
    if value is False:
        return None
    if value is not True:
        if value.__class__ not in (int, float) or not 0 <= value <= MAX_RETRY_WAIT:
            raise _refuse("retry", f"must be the seconds to wait before trying again, a number from 0 (at once) to "
                                   f"{MAX_RETRY_WAIT}, not {value!r}")
    return value


def _reply(value: Any) -> Reply:
    if not isinstance(value, Reply):
        raise _refuse("reply", f"must be a functai.Reply, not {type(value).__name__}")
    return value


def _hold(value: Any) -> bool | None:
    if value is not True and value is not False:
        raise _refuse("hold", f"must be True (keep the text back for now) or False, not {value!r}")
    return value or None


def _decision(value: Any) -> str:
    text = _text("decision", value)
    if len(text) > MAX_DECISION:
        raise _refuse("decision", f"is a word or two ('checked', 'extended'), at most {MAX_DECISION} characters; "
                                  "the details go in the note")
    return text


def _note(value: Any) -> str | None:
    _text("note", value, allow_empty=True)
    if len(value) > MAX_NOTE:
        raise _refuse("note", f"must be at most {MAX_NOTE} characters, not {len(value)}: keep it short, "
                              "and the details in the plugin's own entries")
    return value or None


#: The longest wait a ``retry`` may ask for, in seconds, and the longest ``note``.
MAX_RETRY_WAIT = 300
MAX_NOTE = 200
MAX_DECISION = 40

#: Each field's check, in declaration order: the value as kept, or None to leave the field unset.
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "instruction": partial(_text, "instruction"),
    "sections": partial(_names, "sections", drop_blank=True),
    "lm": partial(_text, "lm"),
    "settings": _settings,
    "tools": partial(_names, "tools"),
    "keep": partial(_names, "keep"),
    "without": _without,
    "inputs": _inputs,
    "block": partial(_text, "block"),
    "output": partial(_text, "output", allow_empty=True),
    "retry": _retry,
    "reply": _reply,
    "hold": _hold,
    "text": partial(_text, "text", allow_empty=True),
    "stop": partial(_text, "stop"),
    "decision": _decision,
    "note": _note,
}


@attrs.frozen(init=False, slots=False)
class Change:
    """A handler's change: unset fields change nothing. ``docs/plugins.md`` says which hook
    takes which field and how changes combine."""

    instruction: str | None = None
    sections: tuple[str, ...] | None = None
    lm: str | None = None
    settings: dict[str, Any] | None = None
    tools: tuple[str, ...] | None = None
    keep: tuple[str, ...] | None = None
    without: tuple[str, ...] | dict[str, tuple[str, ...]] | None = None
    inputs: dict[str, Any] | None = None
    block: str | None = None
    output: str | None = None
    retry: bool | float | None = None
    reply: Reply | None = None
    hold: bool | None = None
    text: str | None = None
    stop: str | None = None
    decision: str | None = None
    note: str | None = None

    def __init__(self, *, sections: Sequence[str] | None = None, **others: Unpack[OtherFields]) -> None:
        # One init. ``sections`` alone, the change nearly every handler makes, is checked inline:
        # each keyword-only parameter left to its default would cost every Change a lookup.
        given = self.__dict__
        if not others:
            if sections is None:
                return
            if sections.__class__ is list or sections.__class__ is tuple:
                for item in sections:
                    if item.__class__ is not str or not item.strip():
                        break
                else:
                    given["sections"] = tuple(sections)
                    return
        fields: dict[str, Any] = {**others, "sections": sections}
        for name, check in _CHECKS.items():  # declaration order: fields_set() is the dict's keys
            value = fields.pop(name, None)
            if value is not None and (value := check(value)) is not None:
                given[name] = value
        if fields:
            raise TypeError(f"Change() got an unexpected keyword argument {next(iter(fields))!r}")

    def fields_set(self) -> tuple[str, ...]:
        """Names of the fields this change sets, in declaration order (``note`` is not a change)."""
        given = self.__dict__
        return tuple(name for name in given if name != "note") if "note" in given else tuple(given)

    def to_data(self) -> dict[str, Any]:
        """The change as JSON data: only the fields it sets (its ``note`` is kept beside it)."""
        data: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if isinstance(value, tuple):
                value = list(value)
            elif name == "without":
                value = {turn: list(names) for turn, names in value.items()}
            elif name == "inputs":
                value = to_jsonable(value)
            elif name == "reply":
                name, value = "answer", reply_data(value)
            elif name == "note":
                continue
            data[name] = value
        return data


def reply_data(reply: Reply) -> dict[str, Any]:
    """A reply as a record keeps it: its text, tool calls, finish reason and usage, and its reasoning
    when it has some."""
    data = {"text": reply.text,
            "tool_calls": [{"id": c.id, "name": c.name, "input": to_jsonable(dict(c.input))} for c in reply.tool_calls],
            "finish_reason": reply.finish_reason, "usage": dict(reply.usage)}
    if reply.reasoning is not None:
        data["reasoning"] = reply.reasoning
    return data


for _field in attrs.fields(Change):
    setattr(Change, _field.name, None)  # the default every unset field reads
del _field
#: What ``inspect`` shows: every field a keyword-only argument that defaults to None.
Change.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=None) for f in attrs.fields(Change)])

#: The Change fields each hook takes besides ``note`` (``request`` also takes a Request; ``request``,
#: ``model_error`` and ``reply`` a Reply, their answer; ``call_end`` and the ``turn_*`` hooks after it only hear).
HOOK_FIELDS: dict[str, frozenset[str]] = {
    "turn_start": frozenset({"inputs"}),
    "context": frozenset({"keep", "without", "sections"}),
    "before_call": frozenset({"instruction", "sections", "lm", "settings", "tools"}),
    "request": frozenset({"settings", "decision"}),
    "model_error": frozenset({"lm", "retry"}),
    "chunk": frozenset({"hold", "text"}),
    "reply": frozenset(),
    "tool_call": frozenset({"inputs"}),
    "tool_error": frozenset({"output", "retry"}),
    "tool_result": frozenset({"output"}),
    "call_end": frozenset(),
    "turn_end": frozenset(),
    "turn_wait": frozenset(),
    "turn_answer": frozenset(),
}

#: Hooks whose handler answers by returning a `functai.Reply` (``request`` and ``model_error``
#: answer instead of the model, ``reply`` replaces the reply).
ANSWERING = frozenset({"request", "model_error", "reply"})

#: The old spellings still taken, with a `DeprecationWarning`: each field, the hooks that take it,
#: and the form that replaces it.
OLD_FIELDS: dict[str, tuple[frozenset[str], str]] = {
    "reply": (frozenset({"request", "model_error", "reply"}),
              "return the functai.Reply itself instead of Change(reply=...)"),
    "block": (frozenset({"tool_call"}),
              "raise functai.FunctAIError(reason, code=...) instead of returning Change(block=reason)"),
    "stop": (frozenset({"chunk"}),
             "raise functai.FunctAIError(reason, code=...) instead of returning Change(stop=reason)"),
}
