"""Conversations: turns of an AI function in a tree, kept in a store."""

from .conversation import Conversation, Turn, all_turns, current_turn, last_turns
from ..stores import FolderStore, MemoryStore, Store, StoreConflict, open_store

__all__ = [
    "Conversation",
    "FolderStore",
    "MemoryStore",
    "Store",
    "StoreConflict",
    "Turn",
    "all_turns",
    "current_turn",
    "last_turns",
    "open_store",
]
