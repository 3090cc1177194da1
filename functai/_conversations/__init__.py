"""Conversations: turns of an AI function in a tree, kept in a store."""

from .conversation import Conversation, Turn, all_turns, current_turn, last_turns

__all__ = ["Conversation", "Turn", "all_turns", "current_turn", "last_turns"]
