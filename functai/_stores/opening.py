"""`open_store`: the store a conversation uses, from None, a folder path, a URL or a `Store`;
`open_url`: which store a URL names, built-in schemes first, then the ``functai.stores`` entry points.

A distribution adds a scheme with an entry point named after it, read only when
a URL's scheme is not built in::

    [project.entry-points."functai.stores"]
    redis = "functai_store_redis:open_store"   # called with the whole URL, returns a Store
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from .._errors import FunctAIError
from .._hooks.installed import entry_points
from . import memory
from .folder import FolderStore, open_folder
from .protocol import Store
from .urls import is_url, scheme_of, sqlite_path

__all__ = ["GROUP", "forget", "open_reference", "open_store", "open_url", "store_reference"]

GROUP = "functai.stores"

_lock = threading.Lock()
#: The stores opened: by `_key`, and by the text that named them (not a relative SQLite path's).
_stores: dict[object, Any] = {}


def store_reference(store: Store) -> str | None:
    """How a call record names a store so it can be opened again: a folder
    path, ``"memory"`` for this process's shared memory store, else None."""
    if isinstance(store, FolderStore):
        return str(store.folder)
    if store is memory.shared:
        return "memory"
    url = getattr(store, "url", None)  # a store opened by URL (functai.stores) names itself, password left out
    return url if isinstance(url, str) else None


def open_reference(reference: str) -> Store:
    """The store a call record names (see `store_reference`)."""
    return memory.shared if reference == "memory" else open_store(reference)


def open_store(store: None | str | os.PathLike[str] | Store) -> Store:
    """The store a conversation should use: None is the one process-wide `MemoryStore` (so
    views in one process see each other), a folder path its one `FolderStore` (so its index is
    shared), a URL the store it names (`functai.stores`), a `Store` itself."""
    if store is None:
        return memory.shared
    if isinstance(store, str) and (":" in store or store.endswith((".db", ".sqlite", ".sqlite3"))) and is_url(store):
        return open_url(store)
    if isinstance(store, (str, os.PathLike)):
        return open_folder(store)
    if isinstance(store, Store):
        return store
    raise TypeError(f"a store is None, a folder path, a URL or a Store, not {type(store).__name__}")


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
    except (Exception, SystemExit) as error:  # an import that exits is a failure too
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
