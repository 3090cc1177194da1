"""Every store: the `Store` protocol, the memory, folder, SQLite and PostgreSQL stores.

``open_store(None)`` is this process's memory store, ``open_store("convs/")``
a folder store, ``open_store("sqlite:///convs.db")`` or
``"postgresql://host/db"`` a store picked by URL scheme (`urls`); the same
URLs name a call log (``log_calls=``, see `calllog`). Other distributions
add schemes through the ``functai.stores`` entry-point group. The SQL stores
load when their scheme is first used.
"""

from __future__ import annotations

from .folder import FolderStore
from .memory import MemoryStore
from .opening import open_store
from .protocol import Store, StoreConflict
from .urls import SCHEMA_VERSION, is_url, open_url, redact

__all__ = [
    "SCHEMA_VERSION",
    "FolderStore",
    "MemoryStore",
    "Store",
    "StoreConflict",
    "is_url",
    "open_store",
    "open_url",
    "redact",
]
