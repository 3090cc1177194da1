"""Stores, for store authors and tools: the protocol, opening by URL, copying.

A store distribution implements `Store` and registers a factory in the
``functai.stores`` entry-point group; `open_store` opens what a ``store=``
or ``log_calls=`` value names.
"""

from ._stores import SCHEMA_VERSION, FolderStore, MemoryStore, Store, StoreConflict, open_store
from ._stores.copy import copy_calls, copy_conversations

__all__ = [
    "SCHEMA_VERSION",
    "FolderStore",
    "MemoryStore",
    "Store",
    "StoreConflict",
    "copy_calls",
    "copy_conversations",
    "open_store",
]
