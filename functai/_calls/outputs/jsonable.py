"""Values as JSON-compatible data, for call records and for inputs shown to the model."""

from __future__ import annotations

import collections.abc as cabc
import enum
import json
from typing import Any

import attrs

from ..._errors import FunctAIError
from .kinds import is_dataclass, is_pydantic


def to_jsonable(value: Any) -> Any:
    """A value as JSON data: dataclass/attrs/pydantic instances as dicts, Enums as their value,
    tuples and sets as lists, keys as text, anything else json cannot write as its repr (so
    recording never fails on a type); ``json-too-deep`` past the recursion limit."""
    t = type(value)
    if t in PLAIN:
        return value
    if t is dict:
        for k, v in value.items():  # a loop, not all(<generator>): this runs on every recorded call
            if type(k) is not str or type(v) not in PLAIN:
                break
        else:
            return value  # the common case on every recorded call: nothing to convert
    try:
        return _jsonable(value, set())
    except RecursionError:
        raise FunctAIError("a value is nested too deeply to be written as JSON (Python's recursion limit ran "
                           "out); pass flatter data", code="json-too-deep") from None


#: The types whose values are JSON data as they are.
PLAIN = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any, seen: set[int]) -> Any:
    t = type(value)
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    if t is not dict and t is not list:  # the usual containers skip these checks
        if isinstance(value, enum.Enum):
            return _jsonable(value.value, seen)
        if isinstance(value, (str, int, float)):
            return value
    ident = id(value)
    if ident in seen:  # a cycle: stop rather than recurse forever
        return repr(value)
    seen.add(ident)
    try:
        if t is dict or isinstance(value, cabc.Mapping):
            return {k if type(k) is str else _key(k): v if type(v) in PLAIN else _jsonable(v, seen)
                    for k, v in value.items()}
        if t is list or isinstance(value, (list, tuple)):
            return [v if type(v) in PLAIN else _jsonable(v, seen) for v in value]
        if isinstance(value, (set, frozenset)):
            items = [_jsonable(v, seen) for v in value]
            try:
                items.sort()  # records should not depend on hash order
            except TypeError:
                pass
            return items
        fields = fields_of(value)
        if fields is not None:
            return {name: _jsonable(item, seen) for name, item in fields.items()}
        if is_pydantic(t) and hasattr(value, "model_dump"):
            try:
                return value.model_dump(mode="json")
            except Exception:
                return repr(value)
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return repr(value)
        return value
    finally:
        seen.discard(ident)


def _key(key: Any) -> str:
    if isinstance(key, enum.Enum):
        return str(key.value)
    return key if isinstance(key, str) else str(key)


#: How each non-finite float is written as text (the names JSON-minded formats such as Protocol
#: Buffers' JSON mapping use; ``float()`` reads them back).
NON_FINITE_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def non_finite_as_text(value: Any, found: list[str]) -> Any:
    """``value`` with each non-finite float (JSON has none) as text, where each was
    (``output.scores[2]``) added to ``found``: the one place `functai._codec` finds them.

    Looks where a JSON writer looks: dicts, lists, tuples, sets, and the fields of
    dataclass, attrs and msgspec instances (which then become dicts)."""
    places: list[Any] = []
    out = _finite(value, None, places)
    if places:
        found.extend(_place(at) for at in places)
    return out


def _finite(value: Any, at: Any, places: list[Any]) -> Any:
    """``value`` with its non-finite floats as text (a new container only where one changed);
    ``at`` is where it is, as ``(parent, key, is_index)`` links (`_place` spells one out)."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return value
    if t is float or isinstance(value, float):
        if value - value == 0.0:
            return value
        places.append(at)
        return NON_FINITE_TEXT[repr(float(value))]
    if isinstance(value, dict):
        changed = None
        for key, item in value.items():
            t = type(item)
            if t is str or t is int or t is bool or item is None or (t is float and item - item == 0.0):
                continue  # the usual value: nothing to look into
            new = _finite(item, (at, key, False), places)
            if new is not item:
                changed = changed or dict(value)
                changed[key] = new
        return value if changed is None else changed
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        differs = False
        for index, item in enumerate(items):
            new = items[index] = _finite(item, (at, index, True), places)
            differs = differs or new is not item
        return items if differs else value
    fields = fields_of(value)
    if fields is None:
        return value
    new = _finite(fields, at, places)
    return value if new is fields else new


def fields_of(value: Any) -> dict[str, Any] | None:
    """The fields a JSON writer writes for a dataclass, attrs or msgspec Struct instance (else None)."""
    cls = type(value)
    names: Any = getattr(cls, "__struct_fields__", None)
    if names is None and is_dataclass(cls):
        import dataclasses

        names = [f.name for f in dataclasses.fields(value)]
    if names is None and attrs.has(cls):
        names = [a.name for a in attrs.fields(cls)]
    if names is None:
        return None
    return {name: getattr(value, name) for name in names if hasattr(value, name)}  # not an init=False one never set


def _place(at: Any) -> str:
    """A place as ``inputs.deep["a key"][0]`` (``(the value)`` for the whole)."""
    steps: list[str] = []
    while at is not None:
        at, key, is_index = at
        if is_index:
            steps.append(f"[{key}]")
            continue
        text = key if isinstance(key, str) else json.dumps(key) if key is None or isinstance(key, bool) else str(key)
        steps.append(f".{text}" if text.isidentifier() else f"[{json.dumps(text, ensure_ascii=False)}]")
    path = "".join(reversed(steps))
    return path.removeprefix(".") or "(the value)"
