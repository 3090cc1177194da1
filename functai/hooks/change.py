"""`Change`: what a handler asks to change, as immutable data.

A Change checks the shape of each field when it is made (a bare string for
``sections`` is refused at once); what depends on the hook and the call — a
field the hook does not take, a tool the function does not have — is checked
when the change is folded in (see `functai.hooks.fold`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import attrs

from ..errors import PluginError
from ..models.request import MODEL_SETTINGS


def _refuse(field: str, message: str) -> PluginError:
    return PluginError(f"Change({field}=...): {message}", code="plugin-change", field=field)


def _text(field: str, *, allow_empty: bool = False):  # type: ignore[no-untyped-def]
    def check(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise _refuse(field, f"must be a string, not {type(value).__name__}")
        if not allow_empty and not value.strip():
            raise _refuse(field, "must not be empty")
        return value

    return check


def _names(field: str, *, drop_blank: bool = False):  # type: ignore[no-untyped-def]
    def check(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise _refuse(field, f"must be a list of strings, not {type(value).__name__} (wrap it in a list)")
        items = tuple(value)
        for item in items:
            if not isinstance(item, str):
                raise _refuse(field, f"must hold only strings, got {type(item).__name__}")
        if drop_blank:
            items = tuple(item for item in items if item.strip())
            return items or None
        return items

    return check


def _settings(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _refuse("settings", f"must be a dict, not {type(value).__name__}")
    for key in value:
        if key not in MODEL_SETTINGS:
            known = ", ".join(sorted(MODEL_SETTINGS))
            raise _refuse("settings", f"unknown model setting {key!r} (known: {known})")
    return dict(value) or None


def _inputs(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _refuse("inputs", "must be a dict of inputs by name")
    return dict(value) or None


def _without(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        out: dict[str, tuple[str, ...]] = {}
        for turn, names in value.items():
            if not isinstance(turn, str):
                raise _refuse("without", "turn ids must be strings")
            out[turn] = _names("without")(names) or ()
        return out or None
    return _names("without")(value)


@attrs.frozen(kw_only=True)
class Change:
    """A handler's change. Every field is optional; unset fields change nothing.

    See the table in ``spec/plugins.md`` §3 (also in ``docs/plugins.md``) for
    which hook takes which field and how changes combine.
    """

    instruction: str | None = attrs.field(default=None, converter=_text("instruction"))
    sections: tuple[str, ...] | None = attrs.field(default=None, converter=_names("sections", drop_blank=True))
    lm: str | None = attrs.field(default=None, converter=_text("lm"))
    settings: dict[str, Any] | None = attrs.field(default=None, converter=_settings)
    tools: tuple[str, ...] | None = attrs.field(default=None, converter=_names("tools"))
    keep: tuple[str, ...] | None = attrs.field(default=None, converter=_names("keep"))
    without: tuple[str, ...] | dict[str, tuple[str, ...]] | None = attrs.field(default=None, converter=_without)
    inputs: dict[str, Any] | None = attrs.field(default=None, converter=_inputs)
    block: str | None = attrs.field(default=None, converter=_text("block"))
    output: str | None = attrs.field(default=None, converter=_text("output", allow_empty=True))

    def fields_set(self) -> tuple[str, ...]:
        """Names of the fields this change sets, in declaration order."""
        return tuple(name for name in _FIELD_NAMES if getattr(self, name) is not None)

    def to_data(self) -> dict[str, Any]:
        """The change as JSON data: only the fields it sets."""
        from ..calls.outputs import to_jsonable

        data: dict[str, Any] = {}
        for name in self.fields_set():
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = list(value)
            elif name == "without" and isinstance(value, dict):
                value = {turn: list(names) for turn, names in value.items()}
            elif name == "inputs":
                value = to_jsonable(value)
            data[name] = value
        return data


_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in attrs.fields(Change))

#: The Change fields each hook takes (``request`` takes a Request instead; ``turn_end`` only hears).
HOOK_FIELDS: dict[str, frozenset[str]] = {
    "turn_start": frozenset({"inputs"}),
    "context": frozenset({"keep", "without", "sections"}),
    "before_call": frozenset({"instruction", "sections", "lm", "settings", "tools"}),
    "request": frozenset(),
    "tool_call": frozenset({"inputs", "block"}),
    "tool_result": frozenset({"output"}),
    "turn_end": frozenset(),
}
