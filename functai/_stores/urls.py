"""URLs as text: the scheme that says which store one names, a SQLite file's path, and a URL
taken apart or shown without its password. Nothing here opens a store (`functai._stores.opening`
does), so the stores themselves, the call log and the secrets may all use it.

A URL is ``scheme://…``, ``memory:``, a built-in ``scheme:`` without ``//``, or a
path ending ``.db``, ``.sqlite`` or ``.sqlite3``; anything else is a folder path.
"""

from __future__ import annotations

import os
import re
from typing import Protocol
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from .._errors import FunctAIError

#: The schema version SQL stores write; a store written by a newer version is refused.
SCHEMA_VERSION = 3

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")

#: The schemes functai knows itself: ``name:`` is one of these stores with or without ``//``.
BUILTIN = frozenset({"sqlite", "postgresql", "postgres", "memory"})


class Hidden(Protocol):
    """A URL kept behind a handle (`functai._models.keys.SecretURL`), which shows itself without its password."""

    @property
    def shown(self) -> str: ...


def scheme_of(text: str) -> str | None:
    """The URL scheme of ``text`` (lower case), ``"sqlite"`` for a SQLite file path, None for a folder."""
    found = _SCHEME.match(text)
    if found is not None and (text[found.end():].startswith("//") or found.group(1).lower() in BUILTIN):
        return found.group(1).lower()
    if text.lower().endswith(SQLITE_SUFFIXES):
        return "sqlite"
    return None


def is_url(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` names a store by URL (or SQLite file), not a folder (cheap: asked on every logged call)."""
    return (isinstance(text, str) and (":" in text or text.endswith(SQLITE_SUFFIXES))
            and scheme_of(text) is not None)


def split_url(url: str) -> SplitResult | None:
    """``url`` taken apart, or None when its host or port cannot be read (where a password ends is then unknown)."""
    if "\x00" in url:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
        host = parts.hostname
        if host and "[" in parts.netloc and not host.startswith("v"):
            import ipaddress  # a bracketed host is an IPv6 address: checked as urlsplit does from Python 3.11 on

            ipaddress.IPv6Address(host)
    except ValueError:
        return None
    return parts


def host_port(parts: SplitResult) -> str:
    """``host:port`` of a URL taken apart by `split_url`, without user or password."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return host + (f":{parts.port}" if parts.port is not None else "")


def redact(url: "str | Hidden") -> str:
    """The URL without its password (in its user part or its query), as records, messages and pages
    may show it; where the URL cannot be taken apart, all up to its host goes too."""
    if not isinstance(url, str):
        return url.shown  # a SecretURL: shown without its password already
    parts = split_url(url)
    if parts is None:  # where a password ends is unknown (it may hold a "/"): all up to the last "@" goes too
        return re.sub(r"^([^:]*://)(?:.*@)?[^/?#]*", r"\1…", url)
    shown = url
    if parts.password is not None:
        shown = urlunsplit((parts.scheme, f"{parts.username or ''}@{host_port(parts)}", parts.path, parts.query,
                            parts.fragment))
    query = "&".join(field for field in parts.query.split("&")  # libpq reads ?password= (and sslpassword=) too
                     if "password" not in unquote(field.split("=", 1)[0]).lower())
    if query != parts.query:  # the query follows the only "?" a URL's path and host can hold
        shown = shown.replace("?" + parts.query, "?" + query if query else "", 1)
    return shown


def sqlite_path(url: str) -> str:
    """The absolute path of a SQLite file path or URL (``sqlite:///rel.db``, ``sqlite:////abs/x.db``)."""
    if url.lower().startswith("sqlite:"):
        rest = url[len("sqlite:"):]
        if not rest.startswith("///") or len(rest) == 3:
            raise FunctAIError(f"{redact(url)!r} is not a SQLite URL: write sqlite:///relative/file.db or "
                               "sqlite:////absolute/file.db", code="store-url")
        path = rest[3:].split("?", 1)[0]
    else:
        path = url
    if "\x00" in path:
        raise FunctAIError(f"the SQLite path {path!r} holds a NUL byte, which no file name can; name a real file",
                           code="store-url")
    return os.path.abspath(path)
