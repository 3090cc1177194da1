"""Where conversations are kept: the stores' public names, from `functai.stores`.

The stores themselves (protocol, memory, folder, SQLite, PostgreSQL) live in
`functai.stores`; conversations use them through the `Store` protocol only.
"""

from __future__ import annotations

from ..stores.folder import FolderStore
from ..stores.memory import MemoryStore
from ..stores.opening import open_reference, open_store, store_reference
from ..stores.protocol import Store, StoreConflict, check_conversation_id

__all__ = [
    "FolderStore",
    "MemoryStore",
    "Store",
    "StoreConflict",
    "check_conversation_id",
    "open_reference",
    "open_store",
    "store_reference",
]
