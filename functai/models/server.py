"""Where a model client sends its requests, as ``(host, port)``: what tracing reports as the server.

Read from the client's ``base_url``; only the host and port are kept, never a user or password.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"https": 443, "http": 80}


def server_of(client: Any) -> tuple[str, int | None] | None:
    """``(host, port)`` of the client's ``base_url`` (the scheme's port when none is written), else None."""
    url = getattr(client, "base_url", None)
    if url.__class__ is not str:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
        return (host, parts.port or _DEFAULT_PORTS.get(parts.scheme)) if host else None
    except ValueError:  # a port that is not a number: no server to report
        return None
