"""Values as JSON-compatible data, for call records and for inputs shown to the model."""

from __future__ import annotations

import collections.abc as cabc
import enum
import json
from typing import Any

import attrs

from ...errors import FunctAIError
from .kinds import is_pydantic, is_dataclass

def to_jsonable(value: Any) -> Any:
    """Turn a value into JSON-compatible data for call records.

    dataclass/attrs/pydantic instances become dicts, Enums their value, tuples
    and sets lists, dict keys strings; anything else that json cannot write
    becomes its repr, so recording never fails on a type. Data nested deeper than
    the recursion limit raises `FunctAIError` ``json-too-deep``.
    """
    t = type(value)
    if t in PLAIN:
        return value
    if t is dict and all(type(k) is str and type(v) in PLAIN for k, v in value.items()):
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
    if isinstance(value, enum.Enum):
        return _jsonable(value.value, seen)
    if isinstance(value, (str, int, float)):
        return value
    ident = id(value)
    if ident in seen:  # a cycle: stop rather than recurse forever
        return repr(value)
    seen.add(ident)
    try:
        if isinstance(value, cabc.Mapping):
            return {_key(k): _jsonable(v, seen) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_jsonable(v, seen) for v in value]
        if isinstance(value, (set, frozenset)):
            items = [_jsonable(v, seen) for v in value]
            try:
                items.sort()  # records should not depend on hash order
            except TypeError:
                pass
            return items
        if is_dataclass(t) and not isinstance(value, type):
            import dataclasses

            return {f.name: _jsonable(getattr(value, f.name), seen) for f in dataclasses.fields(value)}
        if attrs.has(t):
            out = {}
            for a in attrs.fields(t):
                try:
                    out[a.name] = _jsonable(getattr(value, a.name), seen)
                except AttributeError:  # an init=False field never set
                    continue
            return out
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
