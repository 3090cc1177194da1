"""Strict JSON for what functai writes and reads back: call records, the call log, ratings, stores.

msgspec does the encoding and decoding (chosen over orjson and the standard
library, with figures, in docs/performance.md, "JSON codec"): it is about ten
times faster than ``json`` and exact for integers of any size in both
directions (orjson refuses to write an integer beyond 64 bits and reads one
back as a float). It is imported on first use, not with this module.

Written: compact JSON in UTF-8; keys in insertion order; text as UTF-8
(a lone surrogate, which UTF-8 cannot hold, is escaped as ``\\udXXX``);
integers of any size; never ``NaN`` or ``Infinity`` (see `dumps`).
Anything that is not JSON data is written as msgspec writes it — dataclasses
and attrs classes as objects, enums as their value, datetimes as ISO 8601,
sets and tuples as arrays, bytes as base64 — or else as ``str(obj)``;
a dict key that is not text is written as text (``True`` as ``"true"``,
``None`` as ``"null"``, as the standard library does).

Read: JSON. Input msgspec refuses is read again by ``json.loads``, so what
older versions wrote (``NaN``, ``Infinity``, a UTF-8 byte-order mark, an
escaped lone surrogate, a number beyond a float's range) still reads as it
did; what neither reads raises ``ValueError``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Literal

_encode: Callable[[Any], bytes] | None = None
_decode: Callable[[Any], Any] | None = None
_decode_lines: Callable[[Any], list[Any]] | None = None

#: How each non-finite float is written with ``non_finite="text"`` (the names JSON-minded
#: formats such as Protocol Buffers' JSON mapping use; ``float()`` reads them back).
NON_FINITE_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _default(obj: Any) -> Any:
    """What msgspec cannot write itself: a key that is not text, an int or float subclass, anything else."""
    if obj is True or obj is False or obj is None:  # only ever a dict key here: msgspec writes these values
        return "true" if obj is True else "false" if obj is False else "null"
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    return str(obj)


def load() -> Callable[[Any], bytes]:
    """Import msgspec and make the encoder and decoders; the encoder."""
    global _encode, _decode, _decode_lines
    import msgspec

    _encode = msgspec.json.Encoder(enc_hook=_default).encode
    decoder = msgspec.json.Decoder()
    _decode, _decode_lines = decoder.decode, decoder.decode_lines
    return _encode


def dumps(obj: Any, *, non_finite: Literal["error", "text"] = "error") -> bytes:
    """``obj`` as strict JSON in UTF-8.

    JSON has no ``NaN`` or ``Infinity``. With ``non_finite="error"`` a float
    that is one raises `FunctAIError` ``json-not-finite`` naming where it is
    (``output.scores[2]``); with ``non_finite="text"`` it is written as the
    string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` and a warning names
    where — what records and stores use, so that a call never loses its
    record, nor a record its value, over a NaN.
    """
    encode = _encode or load()
    try:
        out = encode(obj)
    except UnicodeEncodeError:  # a lone surrogate
        out = _escaped(obj)
    except RecursionError:  # msgspec follows a cycle until the stack ends; json says so first
        raise ValueError("cannot write this as JSON: it contains itself (a circular reference) "
                         "or is nested too deeply") from None
    # msgspec writes a non-finite float as null: more nulls than Nones means one may be there.
    nulls = out.count(b"null")
    if nulls and (type(obj) is not dict or nulls != [*obj.values()].count(None)) and may_hold_non_finite(obj, nulls):
        found: list[tuple[str, float]] = []
        fixed = _scan(obj, "", found, non_finite == "text")
        if found:
            if non_finite != "text":
                raise _not_finite(found)
            from .log import warn

            warn("a non-finite number was written as text", where=", ".join(path for path, _ in found))
            out = dumps(fixed)
    return out


def dumps_str(obj: Any, *, non_finite: Literal["error", "text"] = "error") -> str:
    """`dumps`, as text (what a SQL column keeps)."""
    return dumps(obj, non_finite=non_finite).decode()


def loads(data: bytes | bytearray | str) -> Any:
    """One JSON document (bytes or text); ``ValueError`` when it is not one."""
    try:
        return (_decode or (load() and _decode))(data)  # type: ignore[misc, truthy-function]
    except ValueError:  # msgspec.DecodeError: older or looser input, read as the standard library reads it
        return json.loads(data)


def loads_lines(data: bytes | str) -> list[Any]:
    """Every line of a JSON-lines buffer, decoded at once; ``ValueError`` when any line is not JSON
    (the caller then reads line by line with `loads` to say which)."""
    if _decode_lines is None:
        load()
    return _decode_lines(data)  # type: ignore[misc]


def _escaped(obj: Any) -> bytes:
    """``obj`` with every non-ASCII character escaped: how a lone surrogate is written."""
    import msgspec

    try:
        data = msgspec.to_builtins(obj, enc_hook=_default, str_keys=True)
    except TypeError:  # a key msgspec will not turn into text here (a tuple, True): json's rules
        data = obj
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=_default).encode()


_PLAIN = frozenset({str, int, bool, type(None)})


def may_hold_non_finite(obj: Any, nulls: int) -> bool:
    """False when ``obj`` holds no non-finite float: level by level, stop once its Nones
    explain every ``null`` written (each non-finite float adds one more)."""
    level, nones = [obj], 0
    while level:
        below = []
        for value in level:
            t = type(value)
            values = [*value.values()] if t is dict else value if t is list or t is tuple else None
            if values is None:
                if t is float and value - value == 0.0:
                    continue
                return True  # a non-finite float, or something msgspec writes by its own rules: look closely
            nones += values.count(None)
            if nones >= nulls:
                return False
            for item in values:
                if type(item) not in _PLAIN:
                    below.append(item)
        level = below
    return False


def _scan(value: Any, path: str, found: list[tuple[str, float]], replace: bool) -> Any:
    """Find the non-finite floats in ``value``; return it with them as text when ``replace``."""
    t = type(value)
    if t is float or isinstance(value, float):
        if value - value == 0.0:
            return value
        found.append((path or "(the value)", value))
        return NON_FINITE_TEXT[repr(float(value))]
    if t is str or t is int or t is bool or value is None:
        return value
    if isinstance(value, dict):
        items = [(k, _scan(v, _step(path, k), found, replace)) for k, v in value.items()]
        return dict(items) if replace else value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_scan(v, f"{path}[{i}]", found, replace) for i, v in enumerate(value)]
        return items if replace else value
    fields = _fields(value)
    if fields is not None:  # written by msgspec as an object: look inside it too
        return _scan(fields, path, found, replace)
    return value


def _fields(value: Any) -> dict[str, Any] | None:
    """The fields msgspec writes for a dataclass, attrs or msgspec Struct instance (else None)."""
    cls = type(value)
    names: Any = getattr(cls, "__struct_fields__", None)
    if names is None and hasattr(cls, "__dataclass_fields__"):
        import dataclasses

        names = [f.name for f in dataclasses.fields(value)]
    if names is None and hasattr(cls, "__attrs_attrs__"):
        names = [a.name for a in cls.__attrs_attrs__]
    if names is None:
        return None
    return {name: getattr(value, name) for name in names if hasattr(value, name)}


def _step(path: str, key: Any) -> str:
    key = key if isinstance(key, str) else str(_default(key))
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _not_finite(found: list[tuple[str, float]]) -> Exception:
    from .errors import FunctAIError

    (path, value), more = found[0], len(found) - 1
    also = f" (and {more} more: {', '.join(p for p, _ in found[1:4])}{', …' if more > 3 else ''})" if more else ""
    return FunctAIError(
        f"cannot write {value!r} at {path}{also} as JSON, which has no NaN or Infinity; "
        "use None, a string, or a finite number there",
        code="json-not-finite",
        where=[p for p, _ in found],
    )
