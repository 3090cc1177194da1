"""Reading a model's reply as the function's output type.

An AI function's return annotation is its output type. ``str`` means "the
reply text as-is"; every other type is read from the reply as JSON and checked
strictly against the type, so a wrong reply fails with a short reason the model
can act on when asked again (``expected an integer at $.count, got "three"``).

This sits on every call, so the work per type is done once: the schema and a
reader closure are built on first use and kept in dicts keyed by the type.
Only the stdlib and attrs are imported here; pydantic models are recognised by
duck typing and pydantic is never imported unless the caller already uses it.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import enum
import json
import re
import threading
import types
import typing
from typing import Any, Callable, ForwardRef, Literal, TypeVar, Union, get_args, get_origin

import attrs

from functai.errors import OutputError

__all__ = ["describe", "output_schema", "read_output", "read_value", "to_jsonable"]

_NoneType = type(None)
_Reader = Callable[[Any], Any]
_TypeAliasType = getattr(typing, "TypeAliasType", None)  # Python 3.12+ `type X = ...`

_PRIMITIVES = {str: "str", int: "int", float: "float", bool: "bool", _NoneType: "none"}
_LISTS = (list, cabc.Sequence, cabc.MutableSequence)
_SETS = (set, frozenset, cabc.Set, cabc.MutableSet)
_DICTS = (dict, cabc.Mapping, cabc.MutableMapping)
_BARE = {list: list, tuple: tuple, set: set, frozenset: frozenset, dict: dict}
_JSON_SCALARS = (str, int, float, bool, _NoneType)
_SUPPORTED = (
    "output types must be str, int, float, bool, None, Any, list, tuple, set, dict[str, ...], "
    "Literal, an Enum, a Union/Optional, a dataclass, an attrs class, a TypedDict or a pydantic model"
)


# --------------------------------------------------------------------------- describe


def describe(tp: Any) -> str:
    """Short human name of a type (``list[str]``, ``Answer``), for error messages."""
    if tp is None or tp is _NoneType:
        return "None"
    if tp is Any:
        return "Any"
    if tp is Ellipsis:
        return "..."
    if isinstance(tp, str):
        return tp
    if isinstance(tp, ForwardRef):
        return tp.__forward_arg__
    if isinstance(tp, TypeVar):
        return tp.__name__
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return describe(args[0])
    if origin is Literal:
        return "Literal[" + ", ".join(_literal_repr(a) for a in args) + "]"
    if origin is Union or origin is types.UnionType:
        return " | ".join(describe(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", None) or repr(origin)
        if origin is tuple and not args and tp is not typing.Tuple:
            return "tuple[()]"
        if not args:
            return name
        return f"{name}[{', '.join(describe(a) for a in args)}]"
    if isinstance(tp, type):
        return tp.__name__
    name = getattr(tp, "__name__", None)  # NewType, TypeAliasType
    return name if isinstance(name, str) else repr(tp)


def _literal_repr(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


# --------------------------------------------------------------------------- classify


class _Unsupported(TypeError):
    """A type that cannot be an output type; `where` says how it was reached."""

    def __init__(self, tp: Any, reason: str) -> None:
        self.tp = tp
        self.reason = reason
        self.where: list[str] = []
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"{describe(self.tp)} cannot be an output type: {self.reason}"
        if self.where:
            text += " (" + ", ".join(self.where) + ")"
        return text

    def add_where(self, where: str) -> None:
        self.where.append(where)
        self.args = (self._text(),)


def _unwrap(tp: Any) -> Any:
    """Strip what does not change the JSON shape: Annotated, NewType, aliases, TypeVars."""
    while True:
        if tp is None:
            return _NoneType
        if isinstance(tp, (str, ForwardRef)):
            raise _Unsupported(tp, "it is a string annotation that was never resolved; pass the type itself")
        if get_origin(tp) is typing.Annotated:
            tp = get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        elif _TypeAliasType is not None and isinstance(tp, _TypeAliasType):
            tp = tp.__value__
        elif isinstance(tp, TypeVar):
            # An unbound type variable means what it would mean to a type checker.
            if tp.__bound__ is not None:
                tp = tp.__bound__
            elif tp.__constraints__:
                tp = Union[tp.__constraints__]
            else:
                return Any
        else:
            return tp


def _classify(tp: Any) -> tuple[str, Any]:
    """(kind, data) for a type, or raise `_Unsupported`. Shared by schema and reader."""
    tp = _unwrap(tp)
    if tp is Any or tp is object:
        return "any", None
    try:
        kind = _PRIMITIVES.get(tp)
    except TypeError:
        kind = None
    if kind is not None:
        return kind, None
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        for member in args:
            if type(member) not in _JSON_SCALARS:
                raise _Unsupported(tp, f"Literal members must be str, int, bool or None, not {member!r}")
        return "literal", args
    if origin is Union or origin is types.UnionType:
        return "union", args
    if origin is None and isinstance(tp, type) and tp in _BARE:
        origin = tp
        args = (Any, ...) if tp is tuple else ()
    elif tp is typing.Tuple:
        args = (Any, ...)
    if origin in _LISTS:
        return "list", args[0] if args else Any
    if origin in _SETS:
        item = args[0] if args else Any
        _check_hashable(tp, item)
        return "set", (frozenset if origin is frozenset else set, item)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return "tuple_var", args[0]
        if args == ((),):  # Python 3.10 spells tuple[()] this way
            args = ()
        if Ellipsis in args:
            raise _Unsupported(tp, "'...' may only follow the single item type of a tuple")
        return "tuple", args
    if origin in _DICTS:
        key, value = args if args else (str, Any)
        if _unwrap(key) not in (str, Any):
            raise _Unsupported(tp, "JSON object keys are strings; use dict[str, ...]")
        return "dict", value
    cls = origin if origin is not None else tp
    if isinstance(cls, type):
        if origin is None and issubclass(cls, enum.Enum):
            _check_enum(cls)
            return "enum", cls
        if dataclasses.is_dataclass(cls) or attrs.has(cls) or (origin is None and typing.is_typeddict(cls)):
            return "class", tp
        if origin is None and _is_pydantic(cls):
            return "pydantic", cls
    raise _Unsupported(tp, _SUPPORTED)


def _is_pydantic(cls: Any) -> bool:
    return (
        isinstance(cls, type)
        and type(cls).__module__.startswith("pydantic")
        and hasattr(cls, "model_validate_json")
        and hasattr(cls, "model_json_schema")
    )


def _check_enum(cls: type[enum.Enum]) -> None:
    if not list(cls):
        raise _Unsupported(cls, "the Enum has no members")
    for member in cls:
        if type(member.value) not in _JSON_SCALARS:
            raise _Unsupported(
                cls, f"member {member.name} has value {member.value!r}, which is not a JSON string, number, "
                "boolean or null"
            )


def _check_hashable(tp: Any, item: Any) -> None:
    kind, data = _classify(item)
    if kind in ("list", "dict", "set") or (kind == "class" and getattr(get_origin(data) or data, "__hash__", None) is None):
        raise _Unsupported(tp, f"set items must be hashable and {describe(item)} is not")
    if kind == "union":
        for member in data:
            _check_hashable(tp, member)


# --------------------------------------------------------------------------- classes


class _Field:
    __slots__ = ("name", "init", "type", "required", "description")

    def __init__(self, name: str, init: str, tp: Any, required: bool, description: str | None) -> None:
        self.name = name  # the JSON key
        self.init = init  # the constructor keyword (attrs strips a leading underscore)
        self.type = tp
        self.required = required
        self.description = description


class _ClassInfo:
    __slots__ = ("cls", "title", "fields")

    def __init__(self, cls: type, title: str, fields: tuple[_Field, ...]) -> None:
        self.cls = cls
        self.title = title
        self.fields = fields


_class_infos: dict[Any, _ClassInfo] = {}


def _class_info(tp: Any) -> _ClassInfo:
    """Fields of a dataclass / attrs class (or a generic alias of one), hints resolved."""
    info = _class_infos.get(tp)
    if info is not None:
        return info
    origin = get_origin(tp)
    cls = origin if origin is not None else tp
    mapping: dict[Any, Any] = {}
    if origin is not None:
        mapping = dict(zip(getattr(cls, "__parameters__", ()), get_args(tp)))
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # NameError for an unknown name, TypeError for bad syntax …
        raise _Unsupported(tp, f"its annotations cannot be resolved ({type(exc).__name__}: {exc})") from None
    fields: list[_Field] = []
    if typing.is_typeddict(cls):
        required_keys = getattr(cls, "__required_keys__", frozenset(hints))
        for name, hint in hints.items():
            if getattr(get_origin(hint), "_name", None) in ("Required", "NotRequired"):
                hint = get_args(hint)[0]  # required-ness is in __required_keys__
            fields.append(_Field(name, name, hint, name in required_keys, None))
    elif dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            fields.append(
                _Field(f.name, f.name, hints.get(f.name, f.type), required, f.metadata.get("description"))
            )
    else:
        for a in attrs.fields(cls):
            if not a.init:
                continue
            hint = hints.get(a.name, a.type)
            fields.append(
                _Field(
                    a.name,
                    getattr(a, "alias", None) or a.name.lstrip("_"),
                    Any if hint is None else hint,
                    a.default is attrs.NOTHING,
                    a.metadata.get("description"),
                )
            )
    if mapping:
        for f in fields:
            f.type = _substitute(f.type, mapping)
    info = _ClassInfo(cls, describe(tp), tuple(fields))
    _class_infos[tp] = info
    return info


def _substitute(tp: Any, mapping: dict[Any, Any]) -> Any:
    """Replace type variables of a generic class by the alias' arguments."""
    if isinstance(tp, TypeVar):
        return mapping.get(tp, tp)
    params = getattr(tp, "__parameters__", None)
    if params:
        try:
            return tp[tuple(mapping.get(p, p) for p in params)]
        except TypeError:
            return tp
    return tp


# --------------------------------------------------------------------------- schema


_schemas: dict[Any, dict[str, Any] | None] = {}
_MISSING_SCHEMA: Any = object()


def output_schema(tp: Any) -> dict[str, Any] | None:
    """JSON schema of the output type (None for ``str``), built once per type.

    Called at decoration time so an unsupported type fails early with a
    TypeError. The returned dict is shared by every call: do not mutate it.
    """
    try:
        schema = _schemas.get(tp, _MISSING_SCHEMA)
        cacheable = True
    except TypeError:  # an unhashable annotation (e.g. Annotated with dict metadata)
        schema, cacheable = _MISSING_SCHEMA, False
    if schema is not _MISSING_SCHEMA:
        return schema
    try:
        _top_reader(tp)  # validates the whole type and warms the reader cache
        schema = None if _unwrap(tp) is str else _SchemaBuilder().root(tp)
    except _Unsupported as exc:
        raise TypeError(str(exc)) from None
    if cacheable:
        _schemas[tp] = schema
    return schema


class _SchemaBuilder:
    """One schema walk; recursive classes go to ``$defs`` (or ``#`` for the root)."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.def_names: dict[Any, str] = {}
        self.stack: list[Any] = []
        self.recursive: set[Any] = set()
        self.root_class: Any = None

    def root(self, tp: Any) -> dict[str, Any]:
        kind, data = _classify(tp)
        if kind == "class":
            self.root_class = data
        schema = self.build(tp)
        if self.defs:
            schema = {**schema, "$defs": self.defs}
        return schema

    def build(self, tp: Any) -> dict[str, Any]:
        kind, data = _classify(tp)
        if kind == "any":
            return {}
        if kind in _SIMPLE_SCHEMAS:
            return dict(_SIMPLE_SCHEMAS[kind])
        if kind == "list":
            return {"type": "array", "items": self.build(data)}
        if kind == "tuple_var":
            return {"type": "array", "items": self.build(data)}
        if kind == "tuple":
            return {
                "type": "array",
                "prefixItems": [self.build(t) for t in data],
                "items": False,
                "minItems": len(data),
                "maxItems": len(data),
            }
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
        info = _class_info(tp)
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
        schema = {
            "type": "object",
            "properties": properties,
            "required": [f.name for f in info.fields if f.required],
            "additionalProperties": False,
            "title": info.title,
        }
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
                raise _Unsupported(cls, f"two different types are both named {name!r} in its JSON schema")
            self.defs[name] = sub
        return schema


_SIMPLE_SCHEMAS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "none": {"type": "null"},
}


# --------------------------------------------------------------------------- reading


class _Bad(Exception):
    """A reply value that does not fit. Containers add path segments while it unwinds.

    ``shape`` marks "wrong JSON kind right here", which a Union uses to tell
    members that never applied from members whose failure is worth reporting.
    """

    def __init__(self, head: str, tail: str = "", *, shape: bool = False, subs: tuple = ()) -> None:
        super().__init__(head)
        self.head = head
        self.tail = tail
        self.shape = shape
        self.subs = subs
        self.path: list[str] = []  # innermost first

    def render(self, base: str = "$") -> str:
        where = base + "".join(reversed(self.path))
        if self.subs:
            inner = "; ".join(f"as {describe(t)}: {bad.render(where)}" for t, bad in self.subs)
            return f"{self.head} at {where} ({inner})"
        return f"{self.head} at {where}{self.tail}"


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _wrong(what: str, value: Any) -> _Bad:
    return _Bad(f"expected {what}", f", got {_show(value)}", shape=True)


def _segment(key: str) -> str:
    return "." + key if key.isidentifier() else "[" + json.dumps(key, ensure_ascii=False) + "]"


def _read_any(value: Any) -> Any:
    return value


def _read_str(value: Any) -> Any:
    if type(value) is str:
        return value
    raise _wrong("a string", value)


def _read_int(value: Any) -> Any:
    if type(value) is int:
        return value
    raise _wrong("an integer", value)


def _read_float(value: Any) -> Any:
    t = type(value)
    if t is float:
        return value
    if t is int:
        try:
            return float(value)
        except OverflowError:
            raise _Bad("number too large", f", got {_show(value)}") from None
    raise _wrong("a number", value)


def _read_bool(value: Any) -> Any:
    if type(value) is bool:
        return value
    raise _wrong("true or false", value)


def _read_none(value: Any) -> Any:
    if value is None:
        return None
    raise _wrong("null", value)


_SIMPLE_READERS: dict[str, _Reader] = {
    "any": _read_any,
    "str": _read_str,
    "int": _read_int,
    "float": _read_float,
    "bool": _read_bool,
    "none": _read_none,
}

_readers: dict[Any, _Reader] = {}
_building: set[Any] = set()
_lock = threading.RLock()


def _reader(tp: Any) -> _Reader:
    """The cached reader for a type; a recursive reference gets a late-bound one."""
    try:
        reader = _readers.get(tp)
    except TypeError:  # unhashable annotation: build, do not cache
        return _build_reader(tp)
    if reader is not None:
        return reader
    with _lock:
        reader = _readers.get(tp)
        if reader is not None:
            return reader
        if tp in _building:
            return lambda value: _reader(tp)(value)
        _building.add(tp)
        try:
            reader = _build_reader(tp)
        finally:
            _building.discard(tp)
        _readers[tp] = reader
        return reader


def _build_reader(tp: Any) -> _Reader:
    kind, data = _classify(tp)
    simple = _SIMPLE_READERS.get(kind)
    if simple is not None:
        return simple
    if kind == "list" or kind == "tuple_var":
        return _sequence_reader(_reader(data), list if kind == "list" else tuple)
    if kind == "set":
        return _sequence_reader(_reader(data[1]), data[0])
    if kind == "tuple":
        return _tuple_reader(tuple(_reader(t) for t in data))
    if kind == "dict":
        return _dict_reader(_reader(data))
    if kind == "literal":
        return _choice_reader({(type(m), m): m for m in data}, data, None)
    if kind == "enum":
        choices: dict[tuple[type, Any], Any] = {}
        for member in data:
            value = member.value
            choices.setdefault((type(value), value), member)
            if type(value) is float and value.is_integer():
                choices.setdefault((int, int(value)), member)
        return _choice_reader(choices, [m.value for m in data], data)
    if kind == "union":
        return _union_reader(tp, data)
    if kind == "pydantic":
        return _pydantic_reader(data)
    return _class_reader(data)


def _sequence_reader(item: _Reader, make: Callable[[Any], Any]) -> _Reader:
    if item is _read_any and (make is list or make is tuple):

        def read_plain(value: Any) -> Any:
            if type(value) is not list:
                raise _wrong("an array", value)
            return make(value)

        return read_plain

    def read(value: Any) -> Any:
        if type(value) is not list:
            raise _wrong("an array", value)
        out = []
        for i, element in enumerate(value):
            try:
                out.append(item(element))
            except _Bad as bad:
                bad.path.append(f"[{i}]")
                raise
        if make is list:
            return out
        try:
            return make(out)
        except TypeError:  # set[Any] holding arrays or objects
            raise _Bad("expected an array of strings, numbers, booleans or null", f", got {_show(value)}") from None

    return read


def _tuple_reader(items: tuple[_Reader, ...]) -> _Reader:
    n = len(items)
    what = f"an array of {n} item{'' if n == 1 else 's'}"

    def read(value: Any) -> Any:
        if type(value) is not list:
            raise _wrong(what, value)
        if len(value) != n:
            got = len(value)
            raise _Bad(f"expected {what}", f", got {got} item{'' if got == 1 else 's'}", shape=True)
        out = []
        for i, (item, element) in enumerate(zip(items, value)):
            try:
                out.append(item(element))
            except _Bad as bad:
                bad.path.append(f"[{i}]")
                raise
        return tuple(out)

    return read


def _dict_reader(item: _Reader) -> _Reader:
    def read(value: Any) -> Any:
        if type(value) is not dict:
            raise _wrong("an object", value)
        if item is _read_any:
            return value
        out = {}
        for key, element in value.items():
            try:
                out[key] = item(element)
            except _Bad as bad:
                bad.path.append(_segment(key))
                raise
        return out

    return read


def _choice_reader(choices: dict[tuple[type, Any], Any], values: Any, enum_cls: Any) -> _Reader:
    shown = values if len(values) <= 20 else list(values[:20])
    what = "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in shown)
    if len(values) > 20:
        what += ", ..."
    names = enum_cls.__members__ if enum_cls is not None else {}
    missing = object()

    def read(value: Any) -> Any:
        t = type(value)
        if t in _JSON_SCALARS:
            found = choices.get((t, value), missing)
            if found is not missing:
                return found
            if t is str and value in names:  # an Enum member's name, when no value matched
                return names[value]
        raise _wrong(what, value)

    return read


def _union_reader(tp: Any, members: tuple[Any, ...]) -> _Reader:
    readers = tuple((m, _reader(m)) for m in members)
    allows_none = any(_unwrap(m) is _NoneType for m in members)
    what = describe(tp)

    def read(value: Any) -> Any:
        if value is None and allows_none:
            return None
        bads = []
        for member, reader in readers:
            try:
                return reader(value)
            except _Bad as bad:
                bads.append((member, bad))
        # Members whose failure is "wrong kind of JSON value here" never applied.
        useful = tuple((m, b) for m, b in bads if not (b.shape and not b.path))
        if len(useful) == 1:
            raise useful[0][1]
        if not useful:
            raise _wrong(what, value)
        raise _Bad(f"expected {what}", subs=useful)

    return read


def _class_reader(tp: Any) -> _Reader:
    info = _class_info(tp)
    cls, title = info.cls, info.title
    by_key: dict[str, tuple[str, _Reader]] = {}
    for f in info.fields:
        try:
            by_key[f.name] = (f.init, _reader(f.type))
        except _Unsupported as exc:
            exc.add_where(f"field {f.name!r} of {title}")
            raise
    known = frozenset(by_key)
    required = frozenset(f.name for f in info.fields if f.required)
    order = [f.name for f in info.fields]
    what = f"an object ({title})"

    def structure_error(value: dict) -> _Bad:
        missing = [name for name in order if name in required and name not in value]
        extra = [key for key in value if key not in known]
        parts = []
        if missing:
            plural = "s" if len(missing) > 1 else ""
            parts.append(f"missing required field{plural} " + ", ".join(json.dumps(n) for n in missing))
        if extra:
            plural = "s" if len(extra) > 1 else ""
            parts.append(f"unexpected field{plural} " + ", ".join(json.dumps(k, ensure_ascii=False) for k in extra))
        tail = ""
        if extra:
            tail = f" (fields of {title}: " + (", ".join(json.dumps(n) for n in order) or "none") + ")"
        return _Bad(" and ".join(parts), tail)

    def read(value: Any) -> Any:
        if type(value) is not dict:
            raise _wrong(what, value)
        keys = value.keys()
        if not (keys <= known and keys >= required):
            raise structure_error(value)
        kwargs = {}
        for key, element in value.items():
            init, reader = by_key[key]
            try:
                kwargs[init] = reader(element)
            except _Bad as bad:
                bad.path.append(_segment(key))
                raise
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:  # __post_init__ checks, attrs validators
            raise _Bad(f"invalid {title}", f": {exc}") from None

    return read


def _pydantic_bad(exc: Any) -> _Bad:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = [part for part in first.get("loc", ())]
    kind = first.get("type")
    if kind == "missing" and loc:
        bad = _Bad(f"missing required field {json.dumps(str(loc.pop()))}")
    elif kind == "extra_forbidden" and loc:
        bad = _Bad(f"unexpected field {json.dumps(str(loc.pop()))}")
    else:
        bad = _Bad(first.get("msg", "invalid value"), f", got {_show(first.get('input'))}")
    if len(errors) > 1:
        bad.tail += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    bad.path = [f"[{p}]" if isinstance(p, int) else _segment(str(p)) for p in reversed(loc)]
    return bad


def _pydantic_reader(cls: Any) -> _Reader:
    from pydantic import ValidationError  # only reached when the caller uses pydantic

    def read(value: Any) -> Any:
        try:  # JSON mode, so models read nested data exactly as they would a reply
            return cls.model_validate_json(json.dumps(value))
        except ValidationError as exc:
            raise _pydantic_bad(exc) from None

    return read


# --------------------------------------------------------------------------- top level


_FENCE_TAG = re.compile(r"[A-Za-z0-9_.+-]*")
_top_readers: dict[Any, Callable[[str], Any]] = {}


def _unfence(text: str) -> str:
    """Drop surrounding whitespace and one surrounding ``` fence (with optional tag)."""
    text = text.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        inner = text[3:-3]
        newline = inner.find("\n")
        if newline >= 0 and _FENCE_TAG.fullmatch(inner[:newline].strip()):
            inner = inner[newline + 1 :]
        return inner.strip()
    return text


def _no_text() -> OutputError:
    return OutputError("the reply has no text", reply=None)


def _read_text(text: str) -> str:
    if text is None:
        raise _no_text()
    return text


def _top_reader(tp: Any) -> Callable[[str], Any]:
    try:
        fn = _top_readers.get(tp)
        cacheable = True
    except TypeError:
        fn, cacheable = None, False
    if fn is not None:
        return fn
    base = _unwrap(tp)
    if base is str:
        fn = _read_text
    else:
        _classify(base)
        fn = _pydantic_top(base) if _is_pydantic(base) else _json_top(_reader(tp))
    if cacheable:
        _top_readers[tp] = fn
    return fn


def _json_top(reader: _Reader) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        if text is None:
            raise _no_text()
        body = _unfence(text)
        if not body:
            raise OutputError("the reply is empty; expected JSON", reply=text)
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise OutputError(
                f"the reply is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", reply=text
            ) from None
        try:
            return reader(data)
        except _Bad as bad:
            raise OutputError(bad.render(), reply=text) from None

    return read


def _pydantic_top(cls: Any) -> Callable[[str], Any]:
    from pydantic import ValidationError

    def read(text: str) -> Any:
        if text is None:
            raise _no_text()
        body = _unfence(text)
        if not body:
            raise OutputError("the reply is empty; expected JSON", reply=text)
        try:
            return cls.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            if first.get("type") == "json_invalid":
                reason = first.get("ctx", {}).get("error") or first.get("msg")
                raise OutputError(f"the reply is not JSON: {reason}", reply=text) from None
            raise OutputError(_pydantic_bad(exc).render(), reply=text) from None

    return read


def read_output(text: str, tp: Any) -> Any:
    """Read the reply as a value of ``tp``; raise OutputError with a reason the model can fix.

    ``str`` gets the text unchanged; other types are parsed as JSON (after
    dropping whitespace and one surrounding code fence) and checked strictly:
    bool is not int, 3.0 is not int, int is accepted (as float) for float,
    unknown or missing object fields are errors. A type that can never be read
    raises TypeError, as `output_schema` does.
    """
    try:
        fn = _top_readers[tp]
    except (KeyError, TypeError):
        try:
            fn = _top_reader(tp)
        except _Unsupported as exc:
            raise TypeError(str(exc)) from None
    return fn(text)


def read_value(data: Any, tp: Any) -> Any:
    """JSON data (a tool input the model wrote) as a value of ``tp``.

    Raises ValueError with the reason when it does not fit, TypeError when
    ``tp`` is not a type that can be read from JSON.
    """
    if _is_pydantic(_unwrap(tp)):
        reader = _pydantic_reader(_unwrap(tp))
    else:
        try:
            reader = _reader(tp)
        except _Unsupported as exc:
            raise TypeError(str(exc)) from None
    try:
        return reader(data)
    except _Bad as bad:
        raise ValueError(bad.render()) from None


# --------------------------------------------------------------------------- records


def to_jsonable(value: Any) -> Any:
    """Turn a value into JSON-compatible data for call records.

    dataclass/attrs/pydantic instances become dicts, Enums their value, tuples
    and sets lists, dict keys strings; anything else that json cannot write
    becomes its repr, so recording never fails.
    """
    t = type(value)
    if t in _PLAIN:
        return value
    if t is dict and all(type(k) is str and type(v) in _PLAIN for k, v in value.items()):
        return value  # the common case on every recorded call: nothing to convert
    return _jsonable(value, set())


_PLAIN = frozenset({str, int, float, bool, type(None)})


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
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: _jsonable(getattr(value, f.name), seen) for f in dataclasses.fields(value)}
        if attrs.has(t):
            out = {}
            for a in attrs.fields(t):
                try:
                    out[a.name] = _jsonable(getattr(value, a.name), seen)
                except AttributeError:  # an init=False field never set
                    continue
            return out
        if _is_pydantic(t) and hasattr(value, "model_dump"):
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
