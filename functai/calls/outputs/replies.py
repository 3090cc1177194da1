"""Reading a reply's text (or a tool input's data) as a value of the output type."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from functai.errors import OutputError

from .kinds import Reader, Unsupported, unwrap_output
from .readers import Bad, reader_for

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


def _no_text() -> OutputError:
    return OutputError("the reply has no text", reply=None)


def _read_text(text: str) -> str:
    if text is None:
        raise _no_text()
    return text


def top_reader(tp: Any) -> Callable[[str], Any]:
    """The reader of a whole reply as ``tp``, built once per type; raises `Unsupported` for a type never read."""
    try:
        fn = _top_readers.get(tp)
        cacheable = True
    except TypeError:
        fn, cacheable = None, False
    if fn is not None:
        return fn
    fn = _read_text if unwrap_output(tp) is str else _json_top(reader_for(tp))
    if cacheable:
        _top_readers[tp] = fn
    return fn


def _json_body(text: str) -> str:
    """The JSON a reply holds, fence and whitespace dropped; no text or nothing else is an error."""
    if text is None:
        raise _no_text()
    body = _unfence(text)
    if not body:
        raise OutputError("the reply is empty; expected JSON", reply=text)
    return body


def _json_top(reader: Reader) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        body = _json_body(text)
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


def read_output(text: str, tp: Any) -> Any:
    """Read the reply as a value of ``tp``; raise OutputError with a reason the model can fix.

    ``str`` gets the text unchanged; other types are parsed as JSON (after
    dropping whitespace and one surrounding code fence) and checked strictly:
    bool is not int, 3.0 is not int, int is accepted (as float) for float,
    unknown or missing object fields are errors. A type that can never be read
    raises TypeError, as `output_schema` does.
    """
    try:
        read = top_reader(tp)
    except Unsupported as exc:
        raise TypeError(str(exc)) from None
    return read(text)


def read_value(data: Any, tp: Any) -> Any:
    """JSON data (a tool input the model wrote) as a value of ``tp``.

    Raises ValueError with the reason when it does not fit, TypeError when
    ``tp`` is not a type that can be read from JSON.
    """
    try:
        read = reader_for(tp)
    except Unsupported as exc:
        raise TypeError(str(exc)) from None
    try:
        return read(data)
    except Bad as bad:
        raise ValueError(bad.render()) from None
