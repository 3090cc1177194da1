"""Checking a call's inputs against the function's annotations, before anything is sent.

A wrong input, or one the model could be shown only as ``<… object at 0x…>``,
would otherwise be paid for and answered as if it were right. The checks
follow the annotations as a type checker would (``bool`` is not an ``int``);
what cannot be checked at run time (``Callable``, protocols) is taken on trust.
"""

from __future__ import annotations

import collections.abc as cabc
import enum
import json
import re
import types
from itertools import repeat
from typing import Any, Callable, Literal, Mapping, Union, get_args, get_origin

import attrs

from .._errors import FunctAIError
from .outputs import describe
from .outputs.jsonable import PLAIN, fields_of
from .outputs.kinds import cached, is_dataclass, is_pydantic, unwrap

#: A check: None when the value fits, else why not (``expected … got …``, with a path).
Check = Callable[[Any], "str | None"]

NoneType = type(None)
_ADDRESS = r" at 0x[0-9A-Fa-f]+>"  # compiled on first use (re caches it), not at import


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _got(value: Any) -> str:
    return f"got {type(value).__name__} {_short(value)}"


def _is(kind: type | tuple[type, ...], what: str) -> Check:
    def check(value: Any) -> str | None:
        return None if isinstance(value, kind) else f"expected {what}, {_got(value)}"

    return check


def _int(value: Any) -> str | None:
    return None if isinstance(value, int) and not isinstance(value, bool) else f"expected int, {_got(value)}"


def _float(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None
    return f"expected float, {_got(value)}"


def _anything(value: Any) -> str | None:
    return None


_SIMPLE: dict[Any, Check] = {
    str: _is(str, "str"), int: _int, float: _float, bool: _is(bool, "bool"), NoneType: _is(NoneType, "None"),
}

_checks: dict[Any, Check] = {}


def check_for(tp: Any) -> Check:
    """The check for an annotation, built once per type."""
    return cached(_checks, tp, _build)  # type: ignore[no-any-return]


def _at(step: str, why: str) -> str:
    """A nested check's reason, one path step further out (``[1]: expected int, …``)."""
    return step + why if why[0] in "[." else f"{step}: {why}"


def _items(item: Check, outer: Any, what: str) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, outer):
            return f"expected {what}, {_got(value)}"
        return _each(zip(repeat(item), value))

    return check


def _each(pairs: Any) -> str | None:
    """Why the first (check, item) of a collection does not fit, with its index; None when all fit."""
    for i, (check, element) in enumerate(pairs):
        why = check(element)
        if why is not None:
            return _at(f"[{i}]", why)
    return None


def _build(tp: Any) -> Check:
    tp = unwrap(tp)
    if tp is Any or tp is object:
        return _anything
    simple = _SIMPLE.get(tp) if isinstance(tp, type) or tp is NoneType else None
    if simple is not None:
        return simple
    origin, args = get_origin(tp), get_args(tp)
    what = describe(tp)
    if origin is Literal:
        members = tuple((type(a), a) for a in args)

        def literal(value: Any) -> str | None:
            return None if (type(value), value) in members else f"expected {what}, {_got(value)}"

        return literal
    if origin is Union or origin is types.UnionType:
        checks = tuple(check_for(a) for a in args)

        def union(value: Any) -> str | None:
            for c in checks:
                if c(value) is None:
                    return None
            return f"expected {what}, {_got(value)}"

        return union
    if isinstance(tp, type) and origin is None and tp in (list, tuple, set, frozenset, dict):
        origin, args = tp, ()
    if origin in (list, set, frozenset) or origin in (cabc.Sequence, cabc.MutableSequence, cabc.Set,
                                                     cabc.MutableSet, cabc.Collection, cabc.Iterable):
        outer = cabc.Set if origin in (cabc.Set, cabc.MutableSet) else origin
        return _items(check_for(args[0]) if args else _anything, outer, what)
    if origin is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return _items(check_for(args[0]) if args else _anything, tuple, what)
        if args == ((),):
            args = ()
        fixed = tuple(check_for(a) for a in args)

        def fixed_tuple(value: Any) -> str | None:
            if not isinstance(value, tuple) or len(value) != len(fixed):
                return f"expected {what}, {_got(value)}"
            return _each(zip(fixed, value))

        return fixed_tuple
    if origin in (dict, cabc.Mapping, cabc.MutableMapping):
        key_check = check_for(args[0]) if args else _anything
        value_check = check_for(args[1]) if args else _anything

        def mapping(value: Any) -> str | None:
            if not isinstance(value, origin):
                return f"expected {what}, {_got(value)}"
            for key, element in value.items():
                why = key_check(key)
                if why is not None:
                    return f"[{_short(key)}]: its key {why}"
                why = value_check(element)
                if why is not None:
                    return _at(f"[{_short(key)}]", why)
            return None

        return mapping
    cls = origin if origin is not None else tp
    if isinstance(cls, type) and not getattr(cls, "_is_protocol", False):
        return _is(cls, describe(cls))
    return _anything  # Callable, a protocol, …: not checkable at run time


def unshowable(value: Any, seen: set[int] | None = None) -> tuple[str, type] | None:
    """(path, type) of something in ``value`` the model would see only as an address, or None
    (`to_jsonable` writes what has no JSON form as its ``repr``)."""
    kind = type(value)
    if kind in PLAIN:
        return None
    if isinstance(value, enum.Enum):
        return unshowable(value.value, seen)
    if isinstance(value, (str, int, float)) or is_pydantic(kind):
        return None
    if seen is None:
        seen = set()
    elif id(value) in seen:
        return None  # a cycle: recording writes it as it can
    seen.add(id(value))
    if isinstance(value, cabc.Mapping):
        for key, element in value.items():
            if type(key) is not str:
                found = unshowable(key, seen)
                if found is not None:
                    return f"[{_short(key)}] (its key)", found[1]
            found = unshowable(element, seen)
            if found is not None:
                return f"[{_short(key)}]{found[0]}", found[1]
        return None
    if isinstance(value, (list, tuple, set, frozenset)):
        parts: Any = ((f"[{i}]", element) for i, element in enumerate(value))
    elif is_dataclass(kind) or attrs.has(kind):
        parts = ((f".{name}", item) for name, item in fields_of(value).items())  # type: ignore[union-attr]
    else:
        try:
            json.dumps(value)
            return None
        except (TypeError, ValueError):
            pass
        if kind.__repr__ is object.__repr__ or re.search(_ADDRESS, repr(value)):  # type: ignore[comparison-overlap]  # mypy binds it
            return "", kind
        return None
    for step, element in parts:
        found = unshowable(element, seen)
        if found is not None:
            return step + found[0], found[1]
    return None


def input_checker(function: str, params: Mapping[str, Any], hints: Mapping[str, Any]) -> Callable[[Any], None]:
    """The check of one function's inputs: refuses ``input-invalid`` naming the first that does not fit."""
    checks = []
    for name, default in params.items():
        tp = hints.get(name, Any)
        checks.append((name, check_for(tp), default, tp))

    def check_inputs(inputs: Mapping[str, Any]) -> None:
        for name, check, default, tp in checks:
            value = inputs[name]
            if value is default:
                continue  # a default is the author's choice (``x: str = None`` is common)
            try:
                why = check(value)
                found = unshowable(value) if why is None else None
            except RecursionError:
                raise FunctAIError(
                    f"{function}: input {name!r} is nested too deeply to check or show to the model (Python's "
                    "recursion limit ran out); pass flatter data", code="input-invalid") from None
            if found is not None:
                path, kind = found
                raise FunctAIError(
                    f"{function}: input {name!r} cannot be shown to the model: {name}{path} is a "
                    f"{kind.__module__}.{kind.__qualname__}, which has no JSON form and whose repr is only an "
                    "address; pass JSON data (text, numbers, lists, dicts) or a dataclass, attrs or pydantic "
                    "object, or give the class a __repr__ (or turn the check off with check_inputs=False)",
                    code="input-invalid",
                )
            if why is not None:
                expected = describe(tp)
                if why[0] in "[.":
                    path, _, rest = why.partition(": ")
                    message = f"{function}: input {name!r} must be {expected}; {name}{path}: {rest}"
                else:
                    message = f"{function}: input {name!r} must be {expected}, {_got(value)}"
                raise FunctAIError(
                    message + " (or turn the check off with check_inputs=False)",
                    code="input-invalid",
                )

    return check_inputs


class Recorded:
    """An input read back from a record whose type JSON cannot give back (a date, a ``Decimal``):
    it stands for the value as the record wrote it, its repr, so the model is shown and the record
    keeps what they were before the turn waited. Not a dataclass: its fields would be shown."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recorded) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)
