"""Every store behind the `Store` protocol: memory, folder, SQLite and PostgreSQL.

``open_store`` takes None (this process's memory store), a folder path, or a URL
(`urls`; the same URLs name a call log, `calllog`). The SQL stores load on first use.
"""

from __future__ import annotations

from .folder import FolderStore
from .memory import MemoryStore
from .opening import open_store, open_url
from .protocol import Store, StoreConflict
from .urls import SCHEMA_VERSION, is_url, redact

__all__ = ["SCHEMA_VERSION", "FolderStore", "MemoryStore", "Store", "StoreConflict", "is_url", "open_store", "open_url",
           "redact"]
