"""Whether JSON data fits a tool's recorded input schema, where the tool's types are not at hand.

A person may answer a waiting tool call from a program that has only the conversation (the
console opens it by id alone): the question keeps the tool's input schema, and an edit is
checked against it here. It covers what functai writes into a schema — types, properties,
required, additionalProperties, items, prefixItems, enum, const, anyOf/oneOf, ``$ref`` into
``$defs`` — and leaves other keywords (formats, bounds) to the tool's own types, which read
the input again when the turn resumes.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from .readers import _show

#: JSON types by name, and what a Python value must be to be one (a bool is no number).
_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, (list, tuple)),
    "object": lambda v: isinstance(v, Mapping),
}


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
        and not isinstance(b, bool) and a == b)


def schema_problem(schema: Any, value: Any, root: Mapping[str, Any] | None = None, where: str = "") -> str | None:
    """Why ``value`` does not fit ``schema`` (``where`` names the place), or None when it does."""
    if not isinstance(schema, Mapping):
        return None if schema is not False else f"{where or 'the value'}: nothing is allowed here"
    root = schema if root is None else root
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref == "#":
            return schema_problem(root, value, root, where)
        if ref.startswith("#/$defs/"):
            return schema_problem(root.get("$defs", {}).get(ref[len("#/$defs/"):], {}), value, root, where)
    place = where or "the value"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            reasons = [schema_problem(option, value, root, where) for option in options]
            if all(reasons):
                return f"{place} fits none of its types ({'; '.join(r for r in reasons if r)})"
    if "const" in schema and not _same(schema["const"], value):
        return f"{place} must be {_show(schema['const'])}, got {_show(value)}"
    if isinstance(schema.get("enum"), list) and not any(_same(choice, value) for choice in schema["enum"]):
        return f"{place} must be one of {_show(schema['enum'])}, got {_show(value)}"
    wanted = schema.get("type")
    kinds = wanted if isinstance(wanted, list) else [wanted] if isinstance(wanted, str) else []
    if kinds and not any(_TYPES.get(kind, lambda v: True)(value) for kind in kinds):
        return f"{place} must be {' or '.join(kinds)}, got {_show(value)}"
    if isinstance(value, Mapping):
        return _object_problem(schema, value, root, where)
    if isinstance(value, (list, tuple)):
        given = schema.get("prefixItems")
        prefix: list[Any] = given if isinstance(given, list) else []
        for index, item in enumerate(value):
            rule = prefix[index] if index < len(prefix) else schema.get("items", {})
            found = schema_problem(rule, item, root, f"{where}[{index}]")
            if found:
                return found
    return None


def _object_problem(schema: Mapping[str, Any], value: Mapping[str, Any], root: Mapping[str, Any],
                    where: str) -> str | None:
    given = schema.get("properties")
    properties: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    for name in schema.get("required") or ():
        if name not in value:
            return f"{where + '.' if where else ''}{name} is missing"
    extra = schema.get("additionalProperties", {})
    for name, item in value.items():
        rule = properties.get(name, extra)
        found = schema_problem(rule, item, root, f"{where}.{name}" if where else str(name))
        if found:
            return found
    return None
