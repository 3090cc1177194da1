"""Conversations in process memory: `MemoryStore`, and the one a conversation opened without a store uses."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Callable

from .protocol import StoreConflict, check_conversation_id, check_start, forkable, to_line
from .protocol import from_line, from_lines, rows_of

__all__ = ["MemoryStore", "shared"]


class MemoryStore:
    """Conversations in process memory, for tests and calls that need no history on disk; records
    are kept as their JSON text, so what goes in is copied and shaped as `FolderStore` shapes it."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        forkable.add(self)

    def _reset_locks(self) -> None:
        self._lock = threading.Lock()

    def _since(self, conversation: str, start: int) -> list[str]:
        check_conversation_id(conversation)
        check_start(start)
        with self._lock:
            return self._lines.get(conversation, [])[start:]

    def read(self, conversation: str, start: int = 0) -> list[dict[str, Any]]:
        return from_lines(self._since(conversation, start))

    def read_rows(self, conversation: str, start: int = 0) -> tuple[list[Any], Callable[[int], dict[str, Any]]]:
        """`read`, decoded as an open needs it (`rows_of`); and the whole record at a position of the list."""
        lines = self._since(conversation, start)
        return rows_of(lines), lambda position: from_line(lines[position])

    def count(self, conversation: str) -> int:
        check_conversation_id(conversation)
        with self._lock:
            return len(self._lines.get(conversation, ()))

    def append(self, conversation: str, records: Sequence[dict[str, Any]], *, expect: int | None = None,
               sync: bool = False) -> int:
        check_conversation_id(conversation)
        new = [to_line(record) for record in records]  # before the lock: a bad record appends nothing
        with self._lock:
            lines = self._lines.get(conversation, [])
            if expect is not None and len(lines) != expect:
                raise StoreConflict(count=len(lines), conversation=conversation)
            if new:
                lines.extend(new)
                self._lines[conversation] = lines
            return len(lines)

    def sync(self, conversation: str) -> None:
        check_conversation_id(conversation)

    def conversations(self) -> list[str]:
        with self._lock:
            return sorted(c for c, lines in self._lines.items() if lines)

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._lines)} conversations)"


#: The process-wide memory store (``open_store(None)``, ``"memory:"``); the pytest plugin swaps it per test.
shared = MemoryStore()
