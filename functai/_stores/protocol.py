"""Where conversations are kept: one append-only log of JSON records each.

The conversation logic decides what records mean; a store only keeps them
safely and in order. Every store follows the `Store` protocol, so another
backend (a database, say) can be plugged in with `open_store`. This module
holds the protocol and what every store shares (ids, record lines, fork
safety); the stores are `memory`, `folder`, `sqlite` and `postgres`, and
`opening.open_store` picks one.
A store may also offer ``read_rows(conversation, start)``: the same records,
decoded only as far as opening a conversation needs (`functai._conversations.rows`).
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from .. import _codec as codec
from .._errors import FunctAIError

__all__ = ["Store", "StoreConflict", "check_conversation_id"]

#: What a conversation id may look like; it becomes a file name.
CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class StoreConflict(FunctAIError):
    """An ``append(..., expect=n)`` found ``count`` records, not ``n``; nothing was appended."""

    code = "store-conflict"

    def __init__(self, *, count: int, conversation: str | None = None) -> None:
        where = f" in conversation {conversation!r}" if conversation is not None else ""
        super().__init__(f"the store holds {count} records{where}, not the expected number; read again and retry")
        self.count = count
        self.conversation = conversation


@runtime_checkable
class Store(Protocol):
    """An append-only log of JSON-object records per conversation id.

    A store of your own keeps the same guarantees: records come back in append order as fresh
    dicts, an append is all-or-none, and ``expect`` is checked and the records appended atomically.
    """

    def read(self, conversation: str, start: int = 0) -> list[dict[str, Any]]:
        """The records from index ``start`` (0-based, append order); ``[]`` for an unknown conversation."""
        ...

    def count(self, conversation: str) -> int:
        """How many records the conversation holds (0 when unknown)."""
        ...

    def append(self, conversation: str, records: Sequence[dict[str, Any]], *, expect: int | None = None,
               sync: bool = False) -> int:
        """Append ``records`` atomically and return the new count; with ``expect`` not the current
        count, append nothing and raise `StoreConflict`. ``sync=True``: durable before returning."""
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


def to_line(record: object) -> str:
    """One record as one JSON line (without the newline), as every store writes it."""
    if not isinstance(record, dict):
        raise TypeError(f"a store record must be a dict, not {type(record).__name__}")
    return codec.dumps_str(record, non_finite="text")  # strict JSON, valid UTF-8 (a lone surrogate escaped)


def from_line(line: str | bytes) -> dict[str, Any]:
    return codec.loads(line)  # type: ignore[no-any-return]


def from_lines(lines: Sequence[str | bytes]) -> list[dict[str, Any]]:
    """Lines known to be one JSON object each (a store's own), decoded in one go where the
    codec takes them all (an escaped lone surrogate, say, it leaves to `from_line`)."""
    if len(lines) > 1:
        try:
            records = codec.loads_lines((b"\n" if type(lines[0]) is bytes else "\n").join(lines))  # type: ignore[arg-type]
        except (TypeError, ValueError):  # text and bytes mixed, or a line only `from_line` reads
            pass
        else:
            if len(records) == len(lines):
                return records
    return [from_line(line) for line in lines]


def no_record(position: int) -> dict[str, Any]:
    """The whole-record reader of a `read_rows` that read nothing."""
    raise IndexError(position)


def rows_of(lines: Sequence[str | bytes]) -> list[Any]:
    """Lines known to be one JSON object each, as rows for an open (or dicts, which the fold takes too)."""
    if len(lines) > 1:
        try:
            found = rows_in((b"\n" if type(lines[0]) is bytes else "\n").join(lines), len(lines))  # type: ignore[arg-type]
        except TypeError:  # text and bytes mixed
            found = None
        if found is not None:
            return found
    return from_lines(lines)


def rows_in(text: str | bytes, count: int) -> list[Any] | None:
    """``count`` lines joined by newlines, as rows; None when they are not all rows (a kind rows do
    not know, a line that is not JSON): then each is read as a record."""
    from .._conversations import rows  # the fold's row decoder: see tests/test_layers.py

    try:
        found = rows.decode_lines(text)
    except ValueError:
        return None
    return found if len(found) == count else None


def check_start(start: int) -> None:
    """Refuse a negative ``start`` of a read."""
    if start < 0:
        raise ValueError(f"start must be 0 or more, not {start}")


#: Stores whose locks are reset in a forked child (a lock held by another thread at fork would never be released).
forkable: weakref.WeakSet[Any] = weakref.WeakSet()


def _after_fork() -> None:
    for store in list(forkable):
        store._reset_locks()


os.register_at_fork(after_in_child=_after_fork)


def json_kind(value: Any) -> str:
    """The kind of JSON value a decoded ``value`` is, as messages name it ("value" for what JSON cannot hold)."""
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "null"
    for kind, types in (("number", (int, float)), ("string", str), ("array", list), ("object", dict)):
        if isinstance(value, types):
            return kind
    return "value"


def not_an_object(value: Any) -> str:
    """Why a JSON value that is not an object is no record (every store and log says it the same way)."""
    return f"JSON {json_kind(value)}, not an object"
