"""Who answers a request: the provider and the server, and a one-way fingerprint of what is sent
to say who is asking (the API key, tenant headers). A plugin that keeps replies (a cache) keys
them on it, so a reply one server or tenant gave is never handed out for another; the secret
itself is never readable from it."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Mapping


class Endpoint:
    """``provider``: the provider's name (``"openai"``, ``"azure"``), or for a client given by hand
    its class; ``url``: where requests go (with Azure's API version), None when the client does
    not say. Not an attrs class: what stands for the headers is no field, so nothing that writes
    an object's fields out (``attrs.asdict``, a record) can write it."""

    __slots__ = ("_provider", "_url", "__secret")

    def __init__(self, provider: str, url: str | None = None, *, secret: bytes = b"") -> None:
        self._provider, self._url = provider, url
        self.__secret = secret

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def url(self) -> str | None:
        return self._url

    def fingerprint(self, salt: bytes) -> str:
        """A keyed one-way hash (HMAC-SHA256 under ``salt``) of the headers sent, the key among them:
        equal for the same key and headers, and not a way back to either."""
        return hmac.new(salt, self.__secret, hashlib.sha256).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Endpoint) and (self._provider, self._url, self.__secret) == (
            other._provider, other._url, other.__secret)

    def __hash__(self) -> int:
        return hash((self._provider, self._url))

    def __repr__(self) -> str:
        return f"Endpoint(provider={self._provider!r}, url={self._url!r})"


def sent_headers(headers: Mapping[str, str]) -> bytes:
    """Headers as the bytes an `Endpoint` fingerprints (hashed first): names lowercased, sorted."""
    lines = sorted(f"{name.lower()}:{value}" for name, value in headers.items())
    return "\n".join(lines).encode()


#: What a provider plugin's client that does not say who it asks was made for (`named`), by its id;
#: the client itself is held with it, so that its id is never another's.
_named: dict[int, tuple[Any, Endpoint]] = {}


def named(client: Any, provider: str, settings: Mapping[str, Any]) -> None:
    """Name a provider plugin's ``client`` made with ``settings`` (revealed) when it has no `Endpoint`
    of its own: its provider, base URL, and a stand-in for its key and headers."""
    if not isinstance(getattr(client, "endpoint", None), Endpoint):
        asked = {"api-key": str(settings.get("api_key") or ""), **(settings.get("headers") or {})}
        _named[id(client)] = (client, Endpoint(provider, settings.get("base_url"), secret=sent_headers(asked)))


def forget(client: Any) -> None:
    _named.pop(id(client), None)


def endpoint_of(client: Any) -> Endpoint:
    """The client's `Endpoint` when it has one; for a provider plugin's client without one, what it was
    made for; else one naming its class (a client given by hand: give it an ``endpoint`` to tell its
    servers or tenants apart)."""
    found = getattr(client, "endpoint", None)
    if isinstance(found, Endpoint):
        return found
    made = _named.get(id(client))
    if made is not None and made[0] is client:
        return made[1]
    kind = type(client)
    return Endpoint(f"{kind.__module__}.{kind.__qualname__}")
