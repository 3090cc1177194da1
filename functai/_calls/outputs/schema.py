"""The JSON schema of an output type, built once per type and shared by every call."""

from __future__ import annotations

import re
from typing import Any, Sequence

from .kinds import Unsupported, cached, class_info, classify, describe, unwrap_output
from .readers import top_reader

_schemas: dict[Any, dict[str, Any] | None] = {}


def output_schema(tp: Any) -> dict[str, Any] | None:
    """JSON schema of the output type (None for ``str``), or TypeError; shared by every call: do not mutate it."""
    try:
        return cached(_schemas, tp, _build_schema)  # type: ignore[no-any-return]
    except Unsupported as exc:
        raise TypeError(str(exc)) from None


def parameters_schema(params: Sequence[tuple[str, Any, bool]]) -> dict[str, Any]:
    """The JSON schema of a tool's inputs ``(name, type, required)``, as one object: the classes
    its inputs share or nest recursively go to its own ``$defs``, where ``#/$defs/...`` points.
    An input whose type is ``str`` or says nothing (Any) is offered as a string. TypeError for a
    type that can never be read."""
    builder = _SchemaBuilder()
    properties: dict[str, Any] = {}
    for name, tp, _ in params:
        try:
            top_reader(tp)  # validates the whole type
        except Unsupported as exc:
            raise TypeError(str(exc)) from None
        properties[name] = builder.build(tp) or {"type": "string"}
    schema = {"type": "object", "properties": properties, "required": [name for name, _, needed in params if needed],
              "additionalProperties": False}
    if builder.defs:
        schema["$defs"] = builder.defs
    return schema


def _build_schema(tp: Any) -> dict[str, Any] | None:
    top_reader(tp)  # validates the whole type and warms the reader cache
    return None if unwrap_output(tp) is str else _SchemaBuilder().root(tp)


class _SchemaBuilder:
    """One schema walk; recursive classes go to ``$defs`` (or ``#`` for the root)."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.def_names: dict[Any, str] = {}
        self.stack: list[Any] = []
        self.recursive: set[Any] = set()
        self.root_class: Any = None

    def root(self, tp: Any) -> dict[str, Any]:
        kind, data = classify(tp)
        if kind == "class":
            self.root_class = data
        schema = self.build(tp)
        if self.defs:
            schema = {**schema, "$defs": self.defs}
        return schema

    def build(self, tp: Any) -> dict[str, Any]:
        kind, data = classify(tp)
        if kind == "any":
            return {}
        if kind in _SIMPLE_SCHEMAS:
            return dict(_SIMPLE_SCHEMAS[kind])
        if kind == "list" or kind == "tuple_var":
            return {"type": "array", "items": self.build(data)}
        if kind == "tuple":
            items = [self.build(t) for t in data]
            return {"type": "array", "prefixItems": items, "items": False, "minItems": len(data), "maxItems": len(data)}
        if kind == "set":
            return {"type": "array", "items": self.build(data[1]), "uniqueItems": True}
        if kind == "dict":
            return {"type": "object", "additionalProperties": self.build(data)}
        if kind == "literal":
            return {"enum": list(data)}
        if kind == "enum":
            return {"enum": [member.value for member in data]}
        if kind == "union":
            return {"anyOf": [self.build(t) for t in data]}
        if kind == "pydantic":
            return self.pydantic(data)
        return self.dataclass(data)

    def dataclass(self, tp: Any) -> dict[str, Any]:
        if tp in self.stack:
            self.recursive.add(tp)
            return {"$ref": "#"} if tp == self.root_class else {"$ref": "#/$defs/" + self.def_name(tp)}
        info = class_info(tp)
        self.stack.append(tp)
        try:
            properties: dict[str, Any] = {}
            for f in info.fields:
                schema = self.build(f.type)
                if f.description:
                    schema = {**schema, "description": f.description}
                properties[f.name] = schema
        finally:
            self.stack.pop()
        required = [f.name for f in info.fields if f.required]
        schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False,
                  "title": info.title}
        if tp in self.recursive and tp != self.root_class:
            name = self.def_name(tp)
            self.defs[name] = schema
            return {"$ref": "#/$defs/" + name}
        return schema

    def def_name(self, tp: Any) -> str:
        name = self.def_names.get(tp)
        if name is None:
            base = re.sub(r"[^A-Za-z0-9_.-]+", "_", describe(tp)).strip("_") or "Type"
            name, n = base, 1
            while name in self.def_names.values() or name in self.defs:
                n += 1
                name = f"{base}_{n}"
            self.def_names[tp] = name
        return name

    def pydantic(self, cls: Any) -> dict[str, Any]:
        schema = dict(cls.model_json_schema())
        for name, sub in schema.pop("$defs", {}).items():
            if name in self.defs and self.defs[name] != sub:
                raise Unsupported(cls, f"two different types are both named {name!r} in its JSON schema")
            self.defs[name] = sub
        return schema


_SIMPLE_SCHEMAS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
    "bool": {"type": "boolean"}, "none": {"type": "null"},
}
