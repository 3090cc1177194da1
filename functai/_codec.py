"""Strict JSON for what functai writes and reads back: call records, the call log, ratings, stores.

msgspec (imported on first use) writes compact UTF-8, never ``NaN`` or ``Infinity`` (see `dumps`),
and anything else as ``str(obj)``. Input msgspec refuses is read again by ``json.loads``, so what
older versions wrote (``NaN``, a byte-order mark) still reads.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Literal

from ._calls.outputs.jsonable import non_finite_as_text

_encode: Callable[[Any], bytes] | None = None
_decode: Callable[[Any], Any] | None = None
_decode_lines: Callable[[Any], list[Any]] | None = None


def _default(obj: Any) -> Any:
    """What msgspec cannot write itself: a key that is not text, an int or float subclass, anything else."""
    if obj is True or obj is False or obj is None:  # only ever a dict key here: msgspec writes these values
        return "true" if obj is True else "false" if obj is False else "null"
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    return str(obj)


def encoder() -> Callable[[Any], bytes]:
    """msgspec's encoder with the codec's rules for what is not JSON data."""
    global _encode, _decode, _decode_lines
    import msgspec

    _encode = msgspec.json.Encoder(enc_hook=_default).encode
    decoder = msgspec.json.Decoder()
    _decode, _decode_lines = decoder.decode, decoder.decode_lines
    return _encode


def dumps(obj: Any, *, non_finite: Literal["error", "text"] = "error") -> bytes:
    """``obj`` as strict JSON in UTF-8. A non-finite float raises ``json-not-finite`` naming where
    it is, or with ``non_finite="text"`` (records, stores: a call never loses its record over a NaN)
    is written as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` with a warning."""
    encode = _encode or encoder()
    found: list[str] = []
    try:
        obj = non_finite_as_text(obj, found)
        if found:
            if non_finite != "text":
                raise _not_finite(found)
            from ._log import warn

            warn("a non-finite number was written as text", where=", ".join(found))
        return encode(obj)
    except UnicodeEncodeError:  # a lone surrogate
        return _escaped(obj)
    except RecursionError:  # json says so rather than follow a cycle until the stack ends
        raise ValueError("cannot write this as JSON: it contains itself (a circular reference) "
                         "or is nested too deeply") from None


def dumps_str(obj: Any, *, non_finite: Literal["error", "text"] = "error") -> str:
    """`dumps`, as text (what a SQL column keeps)."""
    return dumps(obj, non_finite=non_finite).decode()


def loads(data: bytes | bytearray | str) -> Any:
    """One JSON document (bytes or text); ``ValueError`` when it is not one, or is nested deeper
    than the parser reads."""
    try:
        try:
            if _decode is None:
                encoder()
            return _decode(data)  # type: ignore[misc]
        except ValueError:  # msgspec.DecodeError: older or looser input, read as the standard library reads it
            return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested deeper than the parser reads") from None


def reread(obj: Any) -> Any:
    """``obj`` as `loads` gives back what ``dumps(obj, non_finite="text")`` wrote (a record as a store
    that keeps its line reads it), without the warning that writing it gave."""
    return loads(dumps(non_finite_as_text(obj, [])))


def loads_lines(data: bytes | memoryview | str) -> list[Any]:
    """Every line of a JSON-lines buffer, decoded at once; ``ValueError`` when any line is not JSON
    (or is nested deeper than the parser reads)."""
    if _decode_lines is None:
        encoder()
    try:
        return _decode_lines(data)  # type: ignore[misc]
    except RecursionError:
        raise ValueError("JSON nested deeper than the parser reads") from None


def _escaped(obj: Any) -> bytes:
    """``obj`` with every non-ASCII character escaped: how a lone surrogate is written."""
    import msgspec

    try:
        data = msgspec.to_builtins(obj, enc_hook=_default, str_keys=True)
    except TypeError:  # a key msgspec will not turn into text here (a tuple, True): json's rules
        data = obj
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=_default).encode()


def _not_finite(found: list[str]) -> Exception:
    from ._errors import FunctAIError

    more = len(found) - 1
    also = f" (and {more} more: {', '.join(found[1:4])}{', …' if more > 3 else ''})" if more else ""
    return FunctAIError(
        f"cannot write a non-finite number at {found[0]}{also} as JSON, which has no NaN or Infinity; "
        "use None, a string, or a finite number there",
        code="json-not-finite",
        where=found,
    )
