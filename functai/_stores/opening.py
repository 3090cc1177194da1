"""`open_store`: the store a conversation uses, from None, a folder path, a URL or a `Store`."""

from __future__ import annotations

import os

from . import memory
from .folder import FolderStore, open_folder
from .protocol import Store
from .urls import is_url, open_url

__all__ = ["open_reference", "open_store", "store_reference"]


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
