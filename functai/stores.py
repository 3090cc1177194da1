"""Stores, for store authors (a `Store` registered in the ``functai.stores`` entry-point group) and tools."""

from ._stores import SCHEMA_VERSION, FolderStore, MemoryStore, Store, StoreConflict, open_store
from ._stores.copy import copy_calls, copy_conversations
from ._stores.urls import redact

__all__ = [
    "SCHEMA_VERSION",
    "FolderStore",
    "MemoryStore",
    "Store",
    "StoreConflict",
    "copy_calls",
    "copy_conversations",
    "open_store",
    "redact",
]
