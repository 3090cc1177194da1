"""Where ``log_calls=`` keeps call records and ratings: a folder, or a SQL store by URL.

A folder keeps ``calls.jsonl`` and ``ratings.jsonl`` (`functai.calls.records`).
A SQLite or PostgreSQL URL keeps the same JSON lines, as text, in the
tables ``functai_calls`` and ``functai_ratings`` of that database — beside
its conversations when ``store=`` names the same URL. Every process and
machine that uses the URL appends to, and reads, one log; ratings made on
two machines are both seen.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from .. import codec
from ..errors import FunctAIError
from ..models.keys import SecretURL, reveal
from .urls import is_url, open_url, redact


class LogStore(Protocol):
    """What a store needs to also keep a call log (SQLiteStore and PostgresStore have it)."""

    def log_lines(self, table: str, items: Iterable[tuple[str, str]]) -> None: ...

    def read_log(self, table: str) -> Iterator[str]: ...


def is_log_url(where: str | os.PathLike[str] | SecretURL) -> bool:
    """Whether a ``log_calls`` value names a store by URL rather than a folder (cheap: on every call)."""
    if isinstance(where, SecretURL):
        return True
    return isinstance(where, str) and (":" in where or where.endswith((".db", ".sqlite", ".sqlite3"))) and is_url(where)


def log_store(url: str | SecretURL) -> LogStore:
    """The store behind a call-log URL; refuses a store that cannot keep one."""
    store = open_url(reveal(url))  # cached by the URL's text: this is on every logged call
    if not (callable(getattr(store, "log_lines", None)) and callable(getattr(store, "read_log", None))):
        raise FunctAIError(
            f"log_calls={redact(url)!r}: that store keeps conversations but not a call log; use a folder, "
            "a sqlite:/// or a postgresql:// URL",
            code="store-url",
        )
    return store  # type: ignore[return-value]


def encode(data: dict[str, Any]) -> str:
    """One record as the JSON line every call log writes (without the newline; see `functai.codec`)."""
    return codec.dumps_str(data, non_finite="text")


def append_call(url: str | SecretURL, data: dict[str, Any]) -> None:
    log_store(url).log_lines("calls", [(str(data.get("id", "")), encode(data))])


def append_rating(url: str, data: dict[str, Any]) -> None:
    log_store(url).log_lines("ratings", [(str(data.get("call", "")), encode(data))])


def read_lines(url: str, table: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``calls`` or ``ratings``, oldest first (anything else is skipped)."""
    for line in log_store(url).read_log(table):
        try:
            data = codec.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            yield data
