"""`Change`: what a handler asks to change, as immutable data. Each field's shape is checked
when it is made; what depends on the hook and the call, when it is folded in (`functai._hooks.fold`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs

from .._calls.outputs import to_jsonable
from .._errors import PluginError
from .._models.request import MODEL_SETTING_CHECKS


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

    def __init__(
        self,
        *,
        instruction: str | None = None,
        sections: Sequence[str] | None = None,
        lm: str | None = None,
        settings: Mapping[str, Any] | None = None,
        tools: Sequence[str] | None = None,
        keep: Sequence[str] | None = None,
        without: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
        inputs: Mapping[str, Any] | None = None,
        block: str | None = None,
        output: str | None = None,
    ) -> None:
        # Only the set fields are stored, in declaration order: ``fields_set`` is the dict's keys.
        given = self.__dict__
        if instruction is not None:
            given["instruction"] = _text("instruction", instruction)
        if sections is not None and (sections := _names("sections", sections, drop_blank=True)) is not None:
            given["sections"] = sections
        if lm is not None:
            given["lm"] = _text("lm", lm)
        if settings is not None and (settings := _settings(settings)) is not None:
            given["settings"] = settings
        if tools is not None:
            given["tools"] = _names("tools", tools)
        if keep is not None:
            given["keep"] = _names("keep", keep)
        if without is not None and (without := _without(without)) is not None:
            given["without"] = without
        if inputs is not None and (inputs := _inputs(inputs)) is not None:
            given["inputs"] = inputs
        if block is not None:
            given["block"] = _text("block", block)
        if output is not None:
            given["output"] = _text("output", output, allow_empty=True)

    def fields_set(self) -> tuple[str, ...]:
        """Names of the fields this change sets, in declaration order."""
        return tuple(self.__dict__)

    def to_data(self) -> dict[str, Any]:
        """The change as JSON data: only the fields it sets."""
        data: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if isinstance(value, tuple):
                value = list(value)
            elif name == "without":
                value = {turn: list(names) for turn, names in value.items()}
            elif name == "inputs":
                value = to_jsonable(value)
            data[name] = value
        return data


for _field in attrs.fields(Change):
    setattr(Change, _field.name, None)  # the default every unset field reads
del _field

#: The Change fields each hook takes (``request`` takes a Request instead; ``reply``, ``call_end`` and ``turn_end`` only hear).
HOOK_FIELDS: dict[str, frozenset[str]] = {
    "turn_start": frozenset({"inputs"}),
    "context": frozenset({"keep", "without", "sections"}),
    "before_call": frozenset({"instruction", "sections", "lm", "settings", "tools"}),
    "request": frozenset(),
    "reply": frozenset(),
    "tool_call": frozenset({"inputs", "block"}),
    "tool_result": frozenset({"output"}),
    "call_end": frozenset(),
    "turn_end": frozenset(),
}
