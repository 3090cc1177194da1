"""Strict readers of a reply (or a tool input) as a type: one closure per type, built once and cached.

A value that does not fit raises `Bad`, which containers extend with the path
to the value while it unwinds, so the reason names where the reply went wrong.
"""

from __future__ import annotations

import json
import re
import threading
from itertools import repeat
from typing import Any, Callable

from ..._errors import OutputError
from .kinds import JSON_SCALARS, NoneType, Reader, Unsupported, cached, class_info, classify, describe, unwrap_output


class Bad(Exception):
    """A reply value that does not fit. ``shape`` marks "wrong JSON kind right here", which a
    Union uses to tell members that never applied from those whose failure is worth reporting."""

    def __init__(self, head: str, tail: str = "", *, shape: bool = False,
                 subs: tuple[tuple[Any, "Bad"], ...] = ()) -> None:
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


def _wrong(what: str, value: Any) -> Bad:
    return Bad(f"expected {what}", f", got {_show(value)}", shape=True)


def _segment(key: str) -> str:
    return "." + key if key.isidentifier() else "[" + json.dumps(key, ensure_ascii=False) + "]"


def _read_any(value: Any) -> Any:
    return value


def _exact(kind: type, what: str) -> Reader:
    def read(value: Any) -> Any:
        if type(value) is kind:
            return value
        raise _wrong(what, value)

    return read


def _read_float(value: Any) -> Any:
    t = type(value)
    if t is float:
        return value
    if t is int:
        try:
            return float(value)
        except OverflowError:
            raise Bad("number too large", f", got {_show(value)}") from None
    raise _wrong("a number", value)


_SIMPLE_READERS: dict[str, Reader] = {
    "any": _read_any,
    "str": _exact(str, "a string"),
    "int": _exact(int, "an integer"),
    "float": _read_float,
    "bool": _exact(bool, "true or false"),
    "none": _exact(NoneType, "null"),
}

_readers: dict[Any, Reader] = {}
_building: set[Any] = set()
_lock = threading.RLock()


def reader_for(tp: Any) -> Reader:
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
            return lambda value: reader_for(tp)(value)
        _building.add(tp)
        try:
            reader = _build_reader(tp)
        finally:
            _building.discard(tp)
        _readers[tp] = reader
        return reader


def _build_reader(tp: Any) -> Reader:
    kind, data = classify(tp)
    simple = _SIMPLE_READERS.get(kind)
    if simple is not None:
        return simple
    if kind == "list" or kind == "tuple_var":
        return _sequence_reader(reader_for(data), list if kind == "list" else tuple)
    if kind == "set":
        return _sequence_reader(reader_for(data[1]), data[0])
    if kind == "tuple":
        return _tuple_reader(tuple(reader_for(t) for t in data))
    if kind == "dict":
        return _dict_reader(reader_for(data))
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


def _sequence_reader(item: Reader, make: Callable[[Any], Any]) -> Reader:
    def read(value: Any) -> Any:
        if type(value) is not list:
            raise _wrong("an array", value)
        out = _each(zip(repeat(item), value))
        if make is list:
            return out
        try:
            return make(out)
        except TypeError:  # set[Any] holding arrays or objects
            raise Bad("expected an array of strings, numbers, booleans or null", f", got {_show(value)}") from None

    return read


def _tuple_reader(items: tuple[Reader, ...]) -> Reader:
    n = len(items)
    what = f"an array of {n} item{'' if n == 1 else 's'}"

    def read(value: Any) -> Any:
        if type(value) is not list:
            raise _wrong(what, value)
        if len(value) != n:
            got = len(value)
            raise Bad(f"expected {what}", f", got {got} item{'' if got == 1 else 's'}", shape=True)
        return tuple(_each(zip(items, value)))

    return read


def _each(pairs: Any) -> list[Any]:
    """Each (reader, item) of an array read, the failing one's index added to the path."""
    out = []
    for i, (item, element) in enumerate(pairs):
        try:
            out.append(item(element))
        except Bad as bad:
            bad.path.append(f"[{i}]")
            raise
    return out


def _dict_reader(item: Reader) -> Reader:
    def read(value: Any) -> Any:
        if type(value) is not dict:
            raise _wrong("an object", value)
        out = {}
        for key, element in value.items():
            try:
                out[key] = item(element)
            except Bad as bad:
                bad.path.append(_segment(key))
                raise
        return out

    return read


def _choice_reader(choices: dict[tuple[type, Any], Any], values: Any, enum_cls: Any) -> Reader:
    shown = values if len(values) <= 20 else list(values[:20])
    what = "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in shown)
    if len(values) > 20:
        what += ", ..."
    names = enum_cls.__members__ if enum_cls is not None else {}
    missing = object()

    def read(value: Any) -> Any:
        t = type(value)
        if t in JSON_SCALARS:
            found = choices.get((t, value), missing)
            if found is not missing:
                return found
            if t is str and value in names:  # an Enum member's name, when no value matched
                return names[value]
        raise _wrong(what, value)

    return read


def _union_reader(tp: Any, members: tuple[Any, ...]) -> Reader:
    readers = tuple((m, reader_for(m)) for m in members)
    allows_none = any(unwrap_output(m) is NoneType for m in members)
    what = describe(tp)

    def read(value: Any) -> Any:
        if value is None and allows_none:
            return None
        bads = []
        for member, reader in readers:
            try:
                return reader(value)
            except Bad as bad:
                bads.append((member, bad))
        # Members whose failure is "wrong kind of JSON value here" never applied.
        useful = tuple((m, b) for m, b in bads if not (b.shape and not b.path))
        if len(useful) == 1:
            raise useful[0][1]
        if not useful:
            raise _wrong(what, value)
        raise Bad(f"expected {what}", subs=useful)

    return read


def _class_reader(tp: Any) -> Reader:
    info = class_info(tp)
    cls, title = info.cls, info.title
    by_key: dict[str, tuple[str, Reader]] = {}
    for f in info.fields:
        try:
            by_key[f.name] = (f.init, reader_for(f.type))
        except Unsupported as exc:
            exc.add_where(f"field {f.name!r} of {title}")
            raise
    known = frozenset(by_key)
    required = frozenset(f.name for f in info.fields if f.required)
    order = [f.name for f in info.fields]
    what = f"an object ({title})"

    def structure_error(value: dict[str, Any]) -> Bad:
        missing = [name for name in order if name in required and name not in value]
        extra = [key for key in value if key not in known]
        parts, tail = [], ""
        if missing:
            plural = "s" if len(missing) > 1 else ""
            parts.append(f"missing required field{plural} " + ", ".join(json.dumps(n) for n in missing))
        if extra:
            plural = "s" if len(extra) > 1 else ""
            parts.append(f"unexpected field{plural} " + ", ".join(json.dumps(k, ensure_ascii=False) for k in extra))
            tail = f" (fields of {title}: " + (", ".join(json.dumps(n) for n in order) or "none") + ")"
        return Bad(" and ".join(parts), tail)

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
            except Bad as bad:
                bad.path.append(_segment(key))
                raise
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:  # __post_init__ checks, attrs validators
            raise Bad(f"invalid {title}", f": {exc}") from None

    return read


def _pydantic_bad(exc: Any) -> Bad:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = [part for part in first.get("loc", ())]
    kind = first.get("type")
    if kind == "missing" and loc:
        bad = Bad(f"missing required field {json.dumps(str(loc.pop()))}")
    elif kind == "extra_forbidden" and loc:
        bad = Bad(f"unexpected field {json.dumps(str(loc.pop()))}")
    else:
        bad = Bad(first.get("msg", "invalid value"), f", got {_show(first.get('input'))}")
    if len(errors) > 1:
        bad.tail += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    bad.path = [f"[{p}]" if isinstance(p, int) else _segment(str(p)) for p in reversed(loc)]
    return bad


def _pydantic_reader(cls: Any) -> Reader:
    from pydantic import ValidationError  # only reached when the caller uses pydantic

    def read(value: Any) -> Any:
        try:  # JSON mode, so models read nested data exactly as they would a reply
            return cls.model_validate_json(json.dumps(value))
        except ValidationError as exc:
            raise _pydantic_bad(exc) from None

    return read


_FENCE_TAG = r"[A-Za-z0-9_.+-]*"  # compiled on first use (re caches it), not at import
_top_readers: dict[Any, Callable[[str], Any]] = {}


def _unfence(text: str) -> str:
    """Drop surrounding whitespace and one surrounding ``` fence (with optional tag)."""
    text = text.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        inner = text[3:-3]
        newline = inner.find("\n")
        if newline >= 0 and re.fullmatch(_FENCE_TAG, inner[:newline].strip()):
            inner = inner[newline + 1 :]
        return inner.strip()
    return text


def _read_text(text: str) -> str:
    if text is None:
        raise OutputError("the reply has no text", reply=None)
    return text


def _json_top(reader: Reader) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        body = _unfence(_read_text(text))
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
        except Bad as bad:
            raise OutputError(bad.render(), reply=text) from None

    return read


def _build_top(tp: Any) -> Callable[[str], Any]:
    return _read_text if unwrap_output(tp) is str else _json_top(reader_for(tp))


def top_reader(tp: Any) -> Callable[[str], Any]:
    """The reader of a whole reply as ``tp``; raises `Unsupported` for a type never read."""
    return cached(_top_readers, tp, _build_top)  # type: ignore[no-any-return]


def read_output(text: str, tp: Any) -> Any:
    """Read the reply as a value of ``tp``; raise OutputError with a reason the model can fix.

    ``str`` gets the text unchanged; other types are read as JSON (one surrounding code fence
    dropped) and checked strictly: bool is not int, 3.0 is not int, unknown or missing fields
    are errors. A type that can never be read raises TypeError."""
    try:
        read = top_reader(tp)
    except Unsupported as exc:
        raise TypeError(str(exc)) from None
    return read(text)


def read_value(data: Any, tp: Any) -> Any:
    """JSON data (a tool input the model wrote) as a value of ``tp``: ValueError with the reason
    when it does not fit, TypeError when ``tp`` cannot be read from JSON."""
    try:
        read = reader_for(tp)
    except Unsupported as exc:
        raise TypeError(str(exc)) from None
    try:
        return read(data)
    except Bad as bad:
        raise ValueError(bad.render()) from None
