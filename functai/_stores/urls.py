"""Which store a URL names: built-in schemes first, then the ``functai.stores`` entry points.

A URL is ``scheme://…``, ``memory:``, a built-in ``scheme:`` without ``//``, or a
path ending ``.db``, ``.sqlite`` or ``.sqlite3``; anything else is a folder path.
A distribution adds a scheme with an entry point named after it, read only when
a URL's scheme is not built in::

    [project.entry-points."functai.stores"]
    redis = "functai_store_redis:open_store"   # called with the whole URL, returns a Store
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import SplitResult, urlsplit, urlunsplit

from .._errors import FunctAIError
from .._hooks.installed import entry_points
from . import memory
from .folder import open_folder
from .protocol import Store

if TYPE_CHECKING:
    from .._models.keys import SecretURL

#: The schema version SQL stores write; a store written by a newer version is refused.
SCHEMA_VERSION = 2

GROUP = "functai.stores"

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")

#: The schemes functai knows itself: ``name:`` is one of these stores with or without ``//``.
BUILTIN = frozenset({"sqlite", "postgresql", "postgres", "memory"})

_lock = threading.Lock()
#: The stores opened: by `_key`, and by the text that named them (not a relative SQLite path's).
_stores: dict[object, Any] = {}


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
    except ValueError:
        return None
    return parts


def host_port(parts: SplitResult) -> str:
    """``host:port`` of a URL taken apart by `split_url`, without user or password."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return host + (f":{parts.port}" if parts.port is not None else "")


def redact(url: "str | SecretURL") -> str:
    """The URL without its password, as records and messages may show it."""
    if not isinstance(url, str):
        return url.shown  # a SecretURL: shown without its password already
    parts = split_url(url)
    if parts is None:  # where a password ends is unknown, so all of user, password, host and port go
        return re.sub(r"^([^:]*://)[^/?#]*", r"\1…", url)
    if parts.password is None:
        return url
    return urlunsplit((parts.scheme, f"{parts.username or ''}@{host_port(parts)}", parts.path, parts.query,
                       parts.fragment))


def _builtin(scheme: str) -> Callable[[str], Any] | None:
    """The factory of a built-in scheme, imported on first use (a driver is paid for by its users)."""
    if scheme == "sqlite":
        from .sqlite import open_sqlite

        return open_sqlite
    if scheme in ("postgresql", "postgres"):
        from .postgres import open_postgres

        return open_postgres
    return None


def _installed(scheme: str) -> Callable[[str], Any]:
    found = [ep for ep in entry_points(GROUP) if ep.name.lower() == scheme]
    if not found:
        known = sorted({"sqlite", "postgresql", "memory"} | {ep.name for ep in entry_points(GROUP)})
        raise FunctAIError(
            f"no store is installed for URL scheme {scheme!r}: use a folder path or one of "
            f"{', '.join(s + ':' for s in known)} (a distribution adds a scheme with an entry point "
            f"in the {GROUP!r} group)",
            code="store-url",
        )
    if len(found) > 1:
        owners = ", ".join(sorted(str(getattr(getattr(ep, "dist", None), "name", ep.value)) for ep in found))
        raise FunctAIError(f"several distributions provide the store scheme {scheme!r} ({owners}); uninstall all "
                           "but one", code="store-url")
    try:
        factory = found[0].load()
    except Exception as error:
        raise FunctAIError(f"the store for scheme {scheme!r} ({found[0].value}) failed to load: "
                           f"{type(error).__name__}: {error}", code="store-url") from error
    if not callable(factory):
        raise FunctAIError(f"the {GROUP!r} entry point {scheme!r} ({found[0].value}) is not callable",
                           code="store-url")
    return factory  # type: ignore[no-any-return]


def open_url(url: str) -> "Store":
    """The store ``url`` names; one object per URL in a process, so connections and caches are shared."""
    store = _stores.get(url)
    if store is not None:
        return store  # type: ignore[no-any-return]  # what the cache holds, kept as opened
    scheme = scheme_of(url)
    if scheme is None:
        return open_folder(url)
    if scheme == "memory":
        if url.rstrip("/").lower() != "memory:":
            raise FunctAIError(f"{url!r}: the memory store takes no path; write 'memory:'", code="store-url")
        return memory.shared
    key = _key(url, scheme)
    factory = _builtin(scheme) or _installed(scheme)
    with _lock:
        store = _stores.get(key)
        if store is None:
            store = factory(url)
            if not isinstance(store, Store):
                raise FunctAIError(f"the store for scheme {scheme!r} returned {type(store).__name__}, which is "
                                   "not a Store (read/count/append/sync/conversations)", code="store-url")
            _stores[key] = store
        if scheme != "sqlite" or not _relative_sqlite(url):
            _stores[url] = store  # the same text names the same store wherever the process is
    return store


def _key(url: str, scheme: str | None) -> object:
    """What tells stores apart: the URL, or a SQLite file's absolute path."""
    return ("sqlite", sqlite_path(url)) if scheme == "sqlite" else url


def _relative_sqlite(url: str) -> bool:
    path = url[len("sqlite:///"):] if url.lower().startswith("sqlite:") else url
    return not os.path.isabs(path)


def forget(url: str) -> None:
    """Drop the cached store for ``url`` and close its connection (tests, tools that copy)."""
    with _lock:
        store = _stores.pop(_key(url, scheme_of(url)), None)
        for text in [text for text, found in _stores.items() if found is store]:
            del _stores[text]
    close = getattr(store, "close", None)
    if close is not None:
        close()


def sqlite_path(url: str) -> str:
    """The absolute path of a SQLite file path or URL (``sqlite:///rel.db``, ``sqlite:////abs/x.db``)."""
    if url.lower().startswith("sqlite:"):
        rest = url[len("sqlite:"):]
        if not rest.startswith("///") or len(rest) == 3:
            raise FunctAIError(f"{url!r} is not a SQLite URL: write sqlite:///relative/file.db or "
                               "sqlite:////absolute/file.db", code="store-url")
        path = rest[3:].split("?", 1)[0]
    else:
        path = url
    if "\x00" in path:
        raise FunctAIError(f"the SQLite path {path!r} holds a NUL byte, which no file name can; name a real file",
                           code="store-url")
    return os.path.abspath(path)
