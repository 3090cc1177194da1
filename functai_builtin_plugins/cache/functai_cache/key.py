"""The cache key: a SHA-256 digest of a request exactly as it would be sent, and of who answers it.

Everything the model is asked goes in (model, messages, tools, output schema,
settings), as canonical JSON: sorted keys, no whitespace, text as it is (not
escaped). Any change a plugin made to the request changes the key; two
requests share one only when their JSON is the same, so they are sent alike.
So does who answers (`functai.Endpoint`): the provider, the server's URL (an
Azure resource and API version with it) and a fingerprint of the headers sent
(the API key, a tenant header), an HMAC under the store's own salt — never
the secret itself.

msgspec writes the JSON (a request of 4 KB in a few µs, where ``json`` takes
tens). It writes ``NaN`` and ``Infinity`` as ``null``, so JSON holding
``null`` is written again by ``json`` itself, which refuses them: a request
holding them has no key and is neither answered nor kept. So has one whose
settings are not JSON data. (Messages, tools and schemas are JSON data as
functai builds them; bytes, dates or sets a plugin put there, which no
server could be sent, are keyed as msgspec writes them.)
"""

from __future__ import annotations

import hashlib
import json
import math
from types import MappingProxyType
from typing import Any, Mapping

import msgspec
from functai import Endpoint, Request

#: The key format's version, hashed into every key: a new format never reads an old one's entries.
KEY_VERSION = "functai-cache/2"

_PREFIX = (KEY_VERSION + "\n").encode()


def _plain(value: object) -> dict[str, Any]:
    """Messages and tools are read-only mappings: JSON objects all the same."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


def _copy(value: object) -> dict[str, Any]:
    if type(value) is MappingProxyType:
        return value.copy()  # the dict inside, copied in C
    return _plain(value)


_fast = msgspec.json.Encoder(enc_hook=_copy, order="deterministic").encode
_exact = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                          default=_plain).encode


def _json_data(value: object) -> bool:
    """Whether ``value`` is JSON data (what a setting given by hand must be to be sent as JSON)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is dict or kind is MappingProxyType or isinstance(value, Mapping):
        for name, item in value.items():  # type: ignore[attr-defined]
            if type(name) is not str or not _json_data(item):
                return False
        return True
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        for item in value:  # type: ignore[attr-defined]
            if not _json_data(item):
                return False
        return True
    return False


def _parts(request: Request) -> dict[str, Any]:
    parts = {"model": request.model, "messages": request.messages, "tools": request.tools,
             "settings": request.settings}
    if request.output_schema is not None:  # left out for plain text (so such JSON holds no ``null``)
        parts["output_schema"] = request.output_schema
    return parts


def _text_only(request: Request) -> bool:
    """Whether the request holds no number but in its settings (checked apart): no tools, no output
    schema, messages of text. Most plain calls: their JSON need not be searched for a NaN."""
    if request.tools or request.output_schema is not None:
        return False
    for message in request.messages:
        for value in message.values():
            if type(value) is not str and value is not None:
                return False
    return True


def _canonical(request: Request) -> bytes:
    """The request as canonical JSON (UTF-8); raises TypeError or ValueError for what is not JSON data."""
    if not _json_data(request.settings):
        raise TypeError("a setting is not JSON data")
    parts = _parts(request)
    try:
        data = _fast(parts)
    except (TypeError, ValueError, OverflowError):  # what msgspec cannot write (an int over 64 bits, …)
        return _exact(parts).encode()
    if not _text_only(request) and b"null" in data:  # maybe a NaN or Infinity written as null
        return _exact(parts).encode()  # json refuses them
    return data


def canonical(request: Request) -> str:
    """The request as canonical JSON: sorted keys, no whitespace, text as it is (not escaped)."""
    return _canonical(request).decode()


def asker(endpoint: Endpoint | None, salt: bytes) -> bytes:
    """Who answers, as the line the key starts with: provider, URL, and the fingerprint under ``salt``."""
    if endpoint is None:
        return b"\n"
    line = json.dumps([endpoint.provider, endpoint.url, endpoint.fingerprint(salt)], ensure_ascii=False)
    return line.encode() + b"\n"


def request_key(request: Request, endpoint: Endpoint | None = None, salt: bytes = b"") -> str | None:
    """The hex digest naming ``request`` sent to ``endpoint`` in a cache salted ``salt``, or None
    when the request holds something that is not JSON data (never answered from, nor kept in,
    the cache)."""
    try:
        data = _canonical(request)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(_PREFIX + asker(endpoint, salt) + data).hexdigest()
