"""Where conversations are kept: one append-only log of JSON records each.

The conversation logic decides what records mean; a store only keeps them
safely and in order. Every store follows the `Store` protocol, so another
backend (a database, say) can be plugged in with `open_store`. This module
holds the protocol, the in-memory store and `open_store`; the folder store
(one JSON-lines file per conversation) is `functai.conversations.folder`.

A store may also offer ``read_rows(conversation, start)`` (both built-in
ones do): the same records as `Store.read`, decoded only as far as opening a
conversation needs (`functai.conversations.rows`).
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Protocol, runtime_checkable

from .. import codec
from ..errors import FunctAIError
from ..files import check_folder_name

__all__ = [
    "FolderStore",
    "MemoryStore",
    "Store",
    "StoreConflict",
    "check_conversation_id",
    "open_store",
]

#: What a conversation id may look like; it becomes a file name.
CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class StoreConflict(FunctAIError):
    """An ``append(..., expect=n)`` found a count other than ``n``; nothing was appended.

    ``count`` is the store's current record count: read from there and retry.
    """

    code = "store-conflict"

    def __init__(self, message: str | None = None, *, count: int, conversation: str | None = None) -> None:
        if message is None:
            where = f" in conversation {conversation!r}" if conversation is not None else ""
            message = f"the store holds {count} records{where}, not the expected number; read again and retry"
        super().__init__(message)
        self.count = count
        self.conversation = conversation


@runtime_checkable
class Store(Protocol):
    """An append-only log of JSON-object records per conversation id.

    Write your own store by implementing these five methods with the same
    guarantees: records come back in append order as fresh dicts (changing
    them changes nothing stored), an append is all-or-none, and ``expect``
    is checked and the records appended as one atomic step.
    """

    def read(self, conversation: str, start: int = 0) -> list[dict[str, Any]]:
        """The records from index ``start`` (0-based, append order); ``[]`` for an unknown conversation."""
        ...

    def count(self, conversation: str) -> int:
        """How many records the conversation holds (0 when unknown)."""
        ...

    def append(
        self,
        conversation: str,
        records: Sequence[dict[str, Any]],
        *,
        expect: int | None = None,
        sync: bool = False,
    ) -> int:
        """Append ``records`` atomically and return the new count.

        With ``expect`` not None and the current count different, append
        nothing and raise `StoreConflict` carrying the current count.
        ``sync=True`` makes the records durable (fsync) before returning.
        """
        ...

    def sync(self, conversation: str) -> None:
        """Make what was appended so far durable (a no-op where nothing is on disk)."""
        ...

    def conversations(self) -> list[str]:
        """The ids of the conversations held, sorted."""
        ...


def check_conversation_id(conversation: object) -> str:
    """Refuse an id that could name anything but one file in the store's folder."""
    if not isinstance(conversation, str) or CONVERSATION_ID.fullmatch(conversation) is None:
        raise FunctAIError(
            f"conversation id {conversation!r} is not allowed: use 1 to 200 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit",
            code="conversation-id",
        )
    return conversation


def _line(record: object) -> str:
    """One record as one JSON line (without the newline), as every store writes it."""
    if not isinstance(record, dict):
        raise TypeError(f"a store record must be a dict, not {type(record).__name__}")
    return codec.dumps_str(record, non_finite="text")  # strict JSON, valid UTF-8 (a lone surrogate escaped)


def _record(line: str | bytes) -> dict[str, Any]:
    return codec.loads(line)  # type: ignore[no-any-return]


def _records(lines: Sequence[str | bytes]) -> list[dict[str, Any]]:
    """Lines known to be one JSON object each (a store's own), decoded in one go where the
    codec takes them all (an escaped lone surrogate, say, it leaves to `_record`)."""
    if len(lines) > 1:
        try:
            records = codec.loads_lines((b"\n" if type(lines[0]) is bytes else "\n").join(lines))  # type: ignore[arg-type]
        except (TypeError, ValueError):  # text and bytes mixed, or a line only `_record` reads
            pass
        else:
            if len(records) == len(lines):
                return records  # type: ignore[no-any-return]
    return [_record(line) for line in lines]


def rows_of(lines: Sequence[str | bytes]) -> list[Any]:
    """Lines known to be one JSON object each, as `rows` decodes them for an open (a record it
    cannot take whole comes back as its dict, which the fold takes as well)."""
    if len(lines) > 1:
        from . import rows

        try:
            found = rows.decode_lines((b"\n" if type(lines[0]) is bytes else "\n").join(lines))  # type: ignore[arg-type]
        except (TypeError, ValueError):  # text and bytes mixed, a kind rows do not know: as dicts
            pass
        else:
            if len(found) == len(lines):
                return found
    return _records(lines)


def check_start(start: int) -> int:
    """``start`` of a read, refused when negative (every store reads from a position)."""
    if start < 0:
        raise ValueError(f"start must be 0 or more, not {start}")
    return start


# Locks are reset in a forked child: a lock held by another thread at fork
# time would otherwise never be released there.
_forkable: weakref.WeakSet[Any] = weakref.WeakSet()


def _after_fork() -> None:
    global _folder_stores_lock
    _folder_stores_lock = threading.Lock()
    for store in list(_forkable):
        store._reset_locks()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class MemoryStore:
    """Conversations in process memory, for tests and for calls that need no history on disk.

    Records are kept as their JSON text, so what goes in is copied (and
    shaped exactly as `FolderStore` would shape it) and every read returns
    new dicts. One lock makes it safe to share between threads.
    """

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        _forkable.add(self)

    def _reset_locks(self) -> None:
        self._lock = threading.Lock()

    def read(self, conversation: str, start: int = 0) -> list[dict[str, Any]]:
        check_conversation_id(conversation)
        check_start(start)
        with self._lock:
            lines = self._lines.get(conversation, [])[start:]
        return _records(lines)

    def read_rows(self, conversation: str, start: int = 0) -> tuple[list[Any], Callable[[int], dict[str, Any]]]:
        """`read`, decoded as an open needs it (`rows_of`); and the whole record at a position of the list."""
        check_conversation_id(conversation)
        check_start(start)
        with self._lock:
            lines = self._lines.get(conversation, [])[start:]
        return rows_of(lines), lambda position: _record(lines[position])

    def count(self, conversation: str) -> int:
        check_conversation_id(conversation)
        with self._lock:
            return len(self._lines.get(conversation, ()))

    def append(
        self,
        conversation: str,
        records: Sequence[dict[str, Any]],
        *,
        expect: int | None = None,
        sync: bool = False,
    ) -> int:
        check_conversation_id(conversation)
        new = [_line(record) for record in records]  # before the lock: a bad record appends nothing
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


from .folder import FolderStore  # noqa: E402  (it builds on the protocol above)

_shared_memory = MemoryStore()
_folder_stores: dict[str, FolderStore] = {}
_folder_stores_lock = threading.Lock()


def store_reference(store: Store) -> str | None:
    """How a call record names a store so it can be opened again: a folder
    path, ``"memory"`` for this process's shared memory store, else None."""
    if isinstance(store, FolderStore):
        return str(store.folder)
    if store is _shared_memory:
        return "memory"
    url = getattr(store, "url", None)  # a store opened by URL (functai.stores) names itself, password left out
    return url if isinstance(url, str) else None


def open_reference(reference: str) -> Store:
    """The store a call record names (see `store_reference`)."""
    return _shared_memory if reference == "memory" else open_store(reference)


def open_store(store: None | str | os.PathLike[str] | Store) -> Store:
    """The store a conversation should use.

    None (or ``"memory:"``) is the one process-wide `MemoryStore` (so two
    views of a conversation in one process see each other); a folder path is
    the `FolderStore` for it, one per absolute path (so its index is shared);
    a URL (``sqlite:///…``, ``postgresql://…``, a ``.db`` file, a scheme of
    the ``functai.stores`` entry points) is the store it names
    (`functai.stores`); a `Store` is used as it is.
    """
    if store is None:
        return _shared_memory
    if isinstance(store, str) and (":" in store or store.endswith((".db", ".sqlite", ".sqlite3"))):
        from ..stores.urls import is_url, open_url

        if is_url(store):
            return open_url(store)
    if isinstance(store, (str, os.PathLike)):
        path = os.fspath(store)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        check_folder_name(path)
        key = os.path.abspath(path)
        with _folder_stores_lock:
            found = _folder_stores.get(key)
            if found is None:
                found = _folder_stores[key] = FolderStore(key)
            return found
    if isinstance(store, Store):
        return store
    raise TypeError(f"a store is None, a folder path, a URL or a Store, not {type(store).__name__}")
