"""Who answers a request: the provider and the server, and a one-way fingerprint of what is sent
to say who is asking (the API key, tenant headers). A plugin that keeps replies (a cache) keys
them on it, so a reply one server or tenant gave is never handed out for another; the secret
itself is never readable from it."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Mapping

import attrs


@attrs.frozen
class Endpoint:
    """``provider``: the provider's name (``"openai"``, ``"azure"``), or for a client given by hand
    its class; ``url``: where requests go (with Azure's API version), None when the client does
    not say."""

    provider: str
    url: str | None = None
    _secret: bytes = attrs.field(default=b"", repr=False, alias="secret")

    def fingerprint(self, salt: bytes) -> str:
        """A keyed one-way hash (HMAC-SHA256 under ``salt``) of the headers sent, the key among them:
        equal for the same key and headers, and not a way back to either."""
        return hmac.new(salt, self._secret, hashlib.sha256).hexdigest()


def sent_headers(headers: Mapping[str, str]) -> bytes:
    """Headers as the bytes an `Endpoint` fingerprints: names lowercased, sorted."""
    lines = sorted(f"{name.lower()}:{value}" for name, value in headers.items())
    return "\n".join(lines).encode()


def endpoint_of(client: Any) -> Endpoint:
    """The client's `Endpoint` when it has one, else one naming its class (a client given by hand)."""
    found = getattr(client, "endpoint", None)
    if isinstance(found, Endpoint):
        return found
    kind = type(client)
    return Endpoint(f"{kind.__module__}.{kind.__qualname__}")
