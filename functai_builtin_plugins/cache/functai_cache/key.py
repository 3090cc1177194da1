"""The cache key: a SHA-256 digest of a request exactly as it would be sent.

Everything the model is asked goes in (model, messages, tools, output schema,
settings), so any change a plugin made to the request changes the key. The
wire format is JSON, so two requests with the same canonical JSON are sent
alike and may share an answer; anything that is not JSON data makes the
request uncacheable rather than risk a wrong hit.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from functai import Request

#: The key format's version, hashed into every key: a new format never reads an old one's entries.
KEY_VERSION = "functai-cache/1"

_PREFIX = (KEY_VERSION + "\n").encode()


def _plain(value: object) -> dict[str, Any]:
    """Messages and tools are read-only mappings: JSON objects all the same."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                           default=_plain).encode


def canonical(request: Request) -> str:
    """The request as canonical JSON: sorted keys, no whitespace, text as it is (not escaped)."""
    return _encode({"model": request.model, "messages": request.messages, "tools": request.tools,
                    "output_schema": request.output_schema, "settings": request.settings})


def request_key(request: Request) -> str | None:
    """The hex digest naming ``request`` in a cache, or None when it holds something that is not
    JSON data (such a request is never answered from, nor kept in, the cache)."""
    try:
        text = canonical(request)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(_PREFIX + text.encode()).hexdigest()
