"""The simplest plain value that fits a JSON schema, the same every time: what the test model
answers and passes to tools (strings ``"test"``, numbers 0, a list of one item, first choices).
"""

from __future__ import annotations

import math
from typing import Any

from .._errors import FunctAIError

#: Strings for the ``format``s pydantic writes. Some types want more than their format
#: (a ``Dsn`` its scheme, a ``FilePath`` a file that exists).
FORMATS = {
    "date": "2000-01-01",
    "date-time": "2000-01-01T00:00:00Z",
    "time": "00:00:00",
    "duration": "PT0S",
    "email": "test@example.com",
    "name-email": "test <test@example.com>",
    "uri": "https://example.com/",
    "multi-host-uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    **{f"uuid{v}": f"00000000-0000-{v}000-8000-000000000000" for v in range(1, 9)},
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "ipvanyaddress": "127.0.0.1",
    "ipv4interface": "127.0.0.1/8",
    "ipv6interface": "::1/128",
    "ipvanyinterface": "127.0.0.1/8",
    "ipv4network": "127.0.0.0/8",
    "ipv6network": "::1/128",
    "ipvanynetwork": "127.0.0.0/8",
    "base64": "dGVzdA==",
    "base64url": "dGVzdA==",
    "directory-path": ".",
    "zoneinfo": "UTC",
    "color": "black",
}

#: Deeper than this, the schema is taken to have no finite value.
MAX_DEPTH = 64


def sample(schema: dict[str, Any] | bool | None) -> Any:
    """The simplest plain value (JSON data) that ``schema`` accepts."""
    root = schema if isinstance(schema, dict) else {}
    return _Sampler(root).value(root, 0)


def sample_input(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """A tool's input: each parameter's value from its schema (whose ``$refs`` point into the
    parameters' own ``$defs``)."""
    root = parameters if isinstance(parameters, dict) else {}
    sampler = _Sampler(root)
    return {name: sampler.value(schema, 0) for name, schema in (root.get("properties") or {}).items()}


class _Sampler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.expanding = ["#"]  # the $refs being expanded, to stop at a type that holds itself

    def value(self, schema: Any, depth: int, index: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise FunctAIError(
                "the test model found no finite value for this schema (a type that must hold itself?); "
                "give it an Optional or a list, or answer with functai.testing.ScriptedLM",
                code="test-model-schema",
            )
        if not isinstance(schema, dict):
            return None if schema is False else "test"
        if "$ref" in schema:
            ref = schema["$ref"]
            self.expanding.append(ref)
            try:
                return self.value(self._resolve(ref), depth + 1, index)
            finally:
                self.expanding.pop()
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][index % len(schema["enum"])]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.value(self._choice(schema[key]), depth + 1, index)
        if schema.get("allOf"):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merged.update(self._resolve(part["$ref"]) if "$ref" in part else part)
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.value({**merged, **rest}, depth + 1, index)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        if kind == "null":
            return None
        if kind == "boolean":
            return index % 2 == 0
        if kind == "integer":
            return int(_bounded(schema, integer=True)) + index * int(_step(schema) or 1)
        if kind == "number":
            return float(_bounded(schema, integer=False)) + index * (_step(schema) or 1)
        if kind == "array":
            return self._array(schema, depth)
        if kind == "object":
            return self._object(schema, depth)
        return self._string(schema, index) if kind == "string" else "test"

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise FunctAIError(f"the test model reads only local $refs, not {ref!r}", code="test-model-schema")
        found: Any = self.root
        try:
            for part in filter(None, ref[1:].split("/")):
                part = part.replace("~1", "/").replace("~0", "~")
                found = found[int(part)] if isinstance(found, list) else found[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise FunctAIError(
                f"the test model found nothing at $ref {ref!r} in the schema; make the schema's $defs hold it",
                code="test-model-schema",
            ) from None
        return found

    def _cycles(self, schema: Any) -> bool:
        return isinstance(schema, dict) and schema.get("$ref") in self.expanding

    def _choice(self, options: list[Any]) -> Any:
        """The first choice that is neither null nor a type already being built, else the first."""
        for option in options:
            if isinstance(option, dict) and option.get("type") != "null" and not self._cycles(option):
                return option
        return next((o for o in options if isinstance(o, dict) and o.get("type") == "null"), options[0])

    def _string(self, schema: dict[str, Any], index: int) -> str:
        text = FORMATS.get(schema.get("format", ""), "test" + (str(index) if index else ""))
        text = text.ljust(schema.get("minLength", 0), "x")
        high = schema.get("maxLength")
        return text if high is None else text[:high]

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        fixed = schema.get("prefixItems") or []
        items = [self.value(item, depth + 1) for item in fixed]
        more = schema.get("items", {})
        if more is False or self._cycles(more):
            return items
        count = max(schema.get("minItems", 0), len(items) + (0 if fixed else 1))
        if schema.get("maxItems") is not None:
            count = min(count, schema["maxItems"])
        unique = bool(schema.get("uniqueItems"))
        items += [self.value(more, depth + 1, n if unique else 0) for n in range(len(items), count)]
        return items

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        required = set(schema.get("required", ()))
        data = {
            name: self.value(sub, depth + 1)
            for name, sub in (schema.get("properties") or {}).items()
            if name in required or not self._cycles(sub)
        }
        extra = schema.get("additionalProperties")
        if not data and isinstance(extra, dict) and not self._cycles(extra):
            data["test"] = self.value(extra, depth + 1)
        return data


def _step(schema: dict[str, Any]) -> float | None:
    step = schema.get("multipleOf")
    return step if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0 else None


def _bounded(schema: dict[str, Any], integer: bool) -> float:
    """0 if the bounds allow it, else the multiple of the step (``multipleOf``, 1 for an integer)
    nearest a bound; a number with no step takes the bound itself, or half-way when the range is narrow."""
    low, high = schema.get("minimum"), schema.get("maximum")
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = _step(schema) or (1 if integer else None)
    candidates: list[float] = [0]
    if low is not None:
        candidates.append(low if step is None else math.ceil(low / step) * step)
    if above is not None:
        candidates.append(above + 1 if step is None else (math.floor(above / step) + 1) * step)
    if high is not None:
        candidates.append(high if step is None else math.floor(high / step) * step)
    if below is not None:
        candidates.append(below - 1 if step is None else (math.ceil(below / step) - 1) * step)
    floor, ceiling = (above if above is not None else low), (below if below is not None else high)
    if step is None and floor is not None and ceiling is not None:
        candidates.append((floor + ceiling) / 2)
    for value in candidates:
        if _fits(schema, value) and (not integer or value == int(value)):
            return value
    wanted = f"multiple of {schema['multipleOf']}" if _step(schema) else "integer" if integer else "number"
    raise FunctAIError(
        f"the test model found no {wanted} within this schema's bounds; "
        "widen the bounds, or answer with functai.testing.ScriptedLM",
        code="test-model-schema",
    )


def _fits(schema: dict[str, Any], value: float) -> bool:
    low, high = schema.get("minimum"), schema.get("maximum")
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    return (
        (low is None or value >= low) and (high is None or value <= high)
        and (above is None or value > above) and (below is None or value < below)
    )
