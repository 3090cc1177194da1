"""Secrets set as settings, kept out of the values that flow through a call.

A setting holds an opaque handle (`Key`, `Secret`, `SecretURL`) whose repr shows nothing
secret; the secret stays in this module until a client is built from it, so no frame of a
failing call holds it (tracebacks that print locals, debuggers, crash reporters).
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from types import MappingProxyType
from typing import Any, Mapping

__all__ = ["Key", "Secret", "SecretURL", "hide_key", "hide_headers", "hide_url", "reveal", "reveal_headers",
           "refuse_url_credentials", "refuse_unsendable", "is_secret_header", "without_secrets", "echoes",
           "SECRET_HEADER", "MIN_SCRUB"]

#: Secrets shorter than this are not scrubbed from text: it would mangle messages, and so short a key is no secret.
MIN_SCRUB = 8

#: Header names whose values are secrets: kept behind a handle, scrubbed from server text like the key.
SECRET_HEADER = r"auth|key|token|secret|passw|cookie|credential|session"


def is_secret_header(name: str) -> bool:
    """Whether a header's name says its value is a secret (`SECRET_HEADER`)."""
    return re.search(SECRET_HEADER, name, re.IGNORECASE) is not None


_lock = threading.Lock()
_keys: dict[str, str] = {}


class Key:
    """A handle for an API key; equal handles name the same key."""

    __slots__ = ("_id",)

    def __init__(self, ident: str) -> None:
        self._id = ident

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other._id == self._id

    def __hash__(self) -> int:
        return hash(("functai.Key", self._id))

    def __repr__(self) -> str:
        return "<api key>"


class Secret(Key):
    """A handle for a secret header value (a token, a cookie)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<secret>"


class SecretURL(Key):
    """A handle for a URL with a password; it shows itself as the URL without the password."""

    __slots__ = ("shown",)

    def __init__(self, ident: str, shown: str) -> None:
        super().__init__(ident)
        #: The URL without its password, as messages and records may show it.
        self.shown = shown

    def __repr__(self) -> str:
        return f"<url {self.shown}>"


def _ident(value: str) -> str:
    ident = hashlib.sha256(value.encode()).hexdigest()[:32]
    with _lock:
        _keys.setdefault(ident, value)
    return ident


def hide_key(value: str | Key) -> Key:
    """A handle for ``value`` (the same handle for the same key)."""
    if isinstance(value, Key):
        return value
    return Key(_ident(value))


def hide_headers(headers: Mapping[str, Any]) -> Mapping[str, Any]:
    """``headers`` with each value whose name is like a secret's (`SECRET_HEADER`) behind a `Secret`."""
    if not any(is_secret_header(name) for name in headers):
        return headers
    return MappingProxyType({
        name: Secret(_ident(value)) if is_secret_header(name) and isinstance(value, str) else value
        for name, value in headers.items()
    })


def hide_url(url: Any) -> Any:
    """A `SecretURL` for a URL with a password; anything else as it is."""
    if not isinstance(url, str) or "@" not in url:
        return url
    from .._stores.urls import redact

    shown = redact(url)
    return SecretURL(_ident(url), shown) if shown != url else url


def refuse_url_credentials(url: str, where: str) -> None:
    """Refuse a base URL with ``user:password@``: a key belongs in ``api_key`` or ``headers``,
    where it is hidden and scrubbed."""
    from .._errors import ModelConfigError
    from .._stores.urls import host_port, split_url

    parts = split_url(url)
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        if "@" not in url:
            return  # not a URL: the client says why when it is used
        # a host or port that cannot be read, or no http(s)://host before the "@" (a scheme mistyped, left
        # out): all up to the "@" may be a password, so none of the URL is shown
        shown = "(not shown)"
    elif parts.username is None and parts.password is None:
        if parts.query or parts.fragment:  # a key given as ?key=, say: never shown, and never sent
            raise ModelConfigError(
                f"{where} {parts.scheme}://{host_port(parts)}{parts.path!s} has a query or fragment (not shown): "
                "functai adds /chat/completions to the base URL's path, and a key belongs in api_key= or a "
                "header, where it is hidden and scrubbed; give the base URL without it",
                code="base-url-query",
            )
        return
    else:
        shown = f"{parts.scheme}://{host_port(parts)}{parts.path}"
    del url, parts

    raise ModelConfigError(
        f"{where} {shown!r} carries a user name and password; functai does not send credentials in a URL: "
        "give the key as api_key= (sent as a Bearer token), or the header yourself, e.g. "
        "headers={'Authorization': 'Basic <base64 of user:password>'}",
        code="base-url-credentials",
    )


def refuse_unsendable(value: str, what: str) -> None:
    """Refuse a key or header value no HTTP header can carry (a character that is not ASCII, a line
    break), without showing it: sent, the HTTP library refused it in an error quoting the key."""
    from .._errors import ModelConfigError

    if not value.isascii() or "\r" in value or "\n" in value or "\0" in value:
        raise ModelConfigError(
            f"{what} holds a character an HTTP header cannot carry (one that is not ASCII, or a line break; "
            "the value is not shown): give it as it was issued, without the character a copy and paste added",
            code="header-value",
        )


def reveal(value: Any) -> Any:
    """What a handle stands for (anything else is returned as is)."""
    if isinstance(value, Key):
        return _keys[value._id]
    return value


def reveal_headers(headers: Mapping[str, Any]) -> dict[str, str]:
    """``headers`` with their values themselves: for the client that sends them, only there."""
    return {name: reveal(value) for name, value in headers.items()}


def echoes(value: Any) -> list[str]:
    """The texts a server may echo of a secret: the value, its credential without the scheme word
    (``Bearer``/``Basic``), and for Basic the decoded ``user:password`` and password."""
    if not isinstance(value, str):
        return []
    forms = [value]
    scheme, _, credential = value.strip().partition(" ")
    credential = credential.strip()
    if credential:
        forms.append(credential)
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(credential, validate=True).decode()
            except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
                decoded = ""
            if decoded:
                forms += [decoded, decoded.partition(":")[2]]
    return forms


def without_secrets(text: str, settings: Mapping[str, Any]) -> str:
    """``text`` with the API key and the secret headers set for a call cut out: what a client's own
    exception may quote, before it is kept in a record."""
    headers = settings.get("headers") or {}
    for value in (settings.get("api_key"), *(value for value in headers.values() if isinstance(value, Key))):
        for secret in echoes(reveal(value)):  # as the client scrubs a server's text: Bearer, Basic parts too
            if len(secret) >= MIN_SCRUB:
                text = text.replace(secret, "***")
    return text
