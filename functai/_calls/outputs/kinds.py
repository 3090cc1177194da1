"""What JSON shape a type stands for: `classify`, shared by schema and readers so they cannot
disagree about what a type means."""

from __future__ import annotations

import collections.abc as cabc
import enum
import json
import types
import typing
from typing import Any, Callable, ForwardRef, Literal, NamedTuple, TypeVar, Union, get_args, get_origin

import attrs

NoneType = type(None)
Reader = Callable[[Any], Any]
_TypeAliasType = getattr(typing, "TypeAliasType", None)  # Python 3.12+ `type X = ...`

_PRIMITIVES = {str: "str", int: "int", float: "float", bool: "bool", NoneType: "none"}
_LISTS = (list, cabc.Sequence, cabc.MutableSequence)
_SETS = (set, frozenset, cabc.Set, cabc.MutableSet)
_DICTS = (dict, cabc.Mapping, cabc.MutableMapping)
_BARE = {list: list, tuple: tuple, set: set, frozenset: frozenset, dict: dict}
JSON_SCALARS = (str, int, float, bool, NoneType)
_SUPPORTED = (
    "output types must be str, int, float, bool, None, Any, list, tuple, set, dict[str, ...], "
    "Literal, an Enum, a Union/Optional, a dataclass, an attrs class, a TypedDict or a pydantic model"
)


def is_dataclass(obj: Any) -> bool:
    """``dataclasses.is_dataclass``, without importing dataclasses (whoever made a dataclass already has)."""
    return hasattr(obj if isinstance(obj, type) else type(obj), "__dataclass_fields__")


def describe(tp: Any) -> str:
    """Short human name of a type (``list[str]``, ``Answer``), for error messages."""
    if tp is None or tp is NoneType:
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


class Unsupported(TypeError):
    """A type that cannot be an output type; `where` says how it was reached."""

    def __init__(self, tp: Any, reason: str) -> None:
        self.text = f"{describe(tp)} cannot be an output type: {reason}"
        self.where: list[str] = []
        super().__init__(self.text)

    def add_where(self, where: str) -> None:
        self.where.append(where)
        self.args = (f"{self.text} ({', '.join(self.where)})",)


_MISSING: Any = object()


def cached(cache: dict[Any, Any], tp: Any, build: Callable[[Any], Any]) -> Any:
    """``cache[tp]``, built on first use (each time for an unhashable annotation)."""
    try:
        found = cache.get(tp, _MISSING)
    except TypeError:
        return build(tp)
    if found is _MISSING:
        found = cache[tp] = build(tp)
    return found


def unwrap(tp: Any) -> Any:
    """Strip what does not change the JSON shape: Annotated, NewType, aliases, TypeVars.
    A string annotation comes back as it is (inputs let it pass; outputs refuse it)."""
    while True:
        if get_origin(tp) is typing.Annotated:
            tp = get_args(tp)[0]
        elif isinstance(tp, typing.NewType):
            tp = tp.__supertype__
        elif _TypeAliasType is not None and isinstance(tp, _TypeAliasType):
            tp = tp.__value__
        elif isinstance(tp, TypeVar):
            # An unbound type variable means what it would mean to a type checker.
            constrained = Union[tp.__constraints__] if tp.__constraints__ else Any
            tp = tp.__bound__ if tp.__bound__ is not None else constrained
        else:
            return NoneType if tp is None else tp


def unwrap_output(tp: Any) -> Any:
    """`unwrap`, refusing a string annotation: an output's shape must be known."""
    tp = unwrap(tp)
    if isinstance(tp, (str, ForwardRef)):
        raise Unsupported(tp, "it is a string annotation that was never resolved; pass the type itself")
    return tp


def classify(tp: Any) -> tuple[str, Any]:
    """(kind, data) for a type, or raise `Unsupported`. Shared by schema and reader."""
    tp = unwrap_output(tp)
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
            if type(member) not in JSON_SCALARS:
                raise Unsupported(tp, f"Literal members must be str, int, bool or None, not {member!r}")
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
            raise Unsupported(tp, "'...' may only follow the single item type of a tuple")
        return "tuple", args
    if origin in _DICTS:
        key, value = args if args else (str, Any)
        if unwrap_output(key) not in (str, Any):
            raise Unsupported(tp, "JSON object keys are strings; use dict[str, ...]")
        return "dict", value
    cls = origin if origin is not None else tp
    if isinstance(cls, type):
        if origin is None and issubclass(cls, enum.Enum):
            _check_enum(cls)
            return "enum", cls
        if is_dataclass(cls) or attrs.has(cls) or (origin is None and typing.is_typeddict(cls)):
            return "class", tp
        if origin is None and is_pydantic(cls):
            return "pydantic", cls
    raise Unsupported(tp, _SUPPORTED)


def is_pydantic(cls: Any) -> bool:
    return (
        isinstance(cls, type)
        and type(cls).__module__.startswith("pydantic")
        and hasattr(cls, "model_validate_json")
        and hasattr(cls, "model_json_schema")
    )


def _check_enum(cls: type[enum.Enum]) -> None:
    if not list(cls):
        raise Unsupported(cls, "the Enum has no members")
    for member in cls:
        if type(member.value) not in JSON_SCALARS:
            raise Unsupported(
                cls, f"member {member.name} has value {member.value!r}, which is not a JSON string, number, "
                "boolean or null"
            )


def _check_hashable(tp: Any, item: Any) -> None:
    kind, data = classify(item)
    unhashable = kind == "class" and getattr(get_origin(data) or data, "__hash__", None) is None
    if kind in ("list", "dict", "set") or unhashable:
        raise Unsupported(tp, f"set items must be hashable and {describe(item)} is not")
    if kind == "union":
        for member in data:
            _check_hashable(tp, member)


class Field(NamedTuple):
    name: str  # the JSON key
    init: str  # the constructor keyword (attrs strips a leading underscore)
    type: Any
    required: bool
    description: str | None


class ClassInfo(NamedTuple):
    cls: type
    title: str
    fields: tuple[Field, ...]


_class_infos: dict[Any, ClassInfo] = {}


def class_info(tp: Any) -> ClassInfo:
    """Fields of a dataclass / attrs class / TypedDict (or a generic alias of one), hints resolved."""
    return cached(_class_infos, tp, _class_info)  # type: ignore[no-any-return]


def _class_info(tp: Any) -> ClassInfo:
    origin = get_origin(tp)
    cls = origin if origin is not None else tp
    mapping: dict[Any, Any] = {}
    if origin is not None:
        mapping = dict(zip(getattr(cls, "__parameters__", ()), get_args(tp)))
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # NameError for an unknown name, TypeError for bad syntax …
        raise Unsupported(tp, f"its annotations cannot be resolved ({type(exc).__name__}: {exc})") from None
    fields: list[Field] = []
    if typing.is_typeddict(cls):
        required_keys = getattr(cls, "__required_keys__", frozenset(hints))
        for name, hint in hints.items():
            if getattr(get_origin(hint), "_name", None) in ("Required", "NotRequired"):
                hint = get_args(hint)[0]  # required-ness is in __required_keys__
            fields.append(Field(name, name, hint, name in required_keys, None))
    elif is_dataclass(cls):
        import dataclasses  # loaded already: whoever made a dataclass imported it

        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            fields.append(Field(f.name, f.name, hints.get(f.name, f.type), required, f.metadata.get("description")))
    else:
        for a in attrs.fields(cls):
            if not a.init:
                continue
            hint = hints.get(a.name, a.type)
            init = getattr(a, "alias", None) or a.name.lstrip("_")
            fields.append(Field(a.name, init, Any if hint is None else hint, a.default is attrs.NOTHING,
                                a.metadata.get("description")))
    if mapping:
        fields = [field._replace(type=_substitute(field.type, mapping)) for field in fields]
    return ClassInfo(cls, describe(tp), tuple(fields))


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
