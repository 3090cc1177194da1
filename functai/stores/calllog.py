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
from ..calls.records import report_skipped
from ..errors import FunctAIError
from ..files import check_folder
from ..log import warn
from ..models.keys import SecretURL, reveal
from .protocol import not_an_object
from .urls import is_url, open_url, redact, scheme_of, sqlite_path


class LogStore(Protocol):
    """What a store needs to also keep a call log (SQLiteStore and PostgresStore have it)."""

    def log_lines(self, table: str, items: Iterable[tuple[str, str]]) -> None: ...

    def read_log(self, table: str) -> Iterator[str]: ...


def is_log_url(where: str | os.PathLike[str] | SecretURL) -> bool:
    """Whether a ``log_calls`` value names a store by URL rather than a folder (cheap: on every call)."""
    return isinstance(where, SecretURL) or is_url(where)


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


#: The code of the warning that a call's record was not written because its log could not be reached.
UNREACHABLE = "call-log-unreachable"


def check_log_url(url: str | SecretURL) -> None:
    """Refuse, when ``log_calls`` is set, a URL that can never keep the log: an unknown scheme, a
    malformed URL, a missing driver, a store without a call log, a SQLite file that cannot be
    written. Nothing is created and nothing connects: a server is reached by the first call."""
    log_store(url)
    text = reveal(url)
    if scheme_of(text) == "sqlite":
        path = sqlite_path(text)
        check_folder(os.path.dirname(path), "SQLite call log", file=os.path.basename(path))


def append_call(url: str | SecretURL, data: dict[str, Any]) -> None:
    """Write a call's record. Its answer is already paid for: a log that cannot be reached (a
    server down, ``store-io``) loses the record, not the answer — a warning says so
    (`UNREACHABLE`); a log that refuses the write (``store-unwritable``) raises, as a folder does."""
    try:
        log_store(url).log_lines("calls", [(str(data.get("id", "")), encode(data))])
    except FunctAIError as error:
        if error.code != "store-io":
            raise
        warn("call record not written", code=UNREACHABLE, call=data.get("id"), error=error.message)


def append_rating(url: str, data: dict[str, Any]) -> None:
    log_store(url).log_lines("ratings", [(str(data.get("call", "")), encode(data))])


def place(url: str, table: str) -> str:
    """How a message names a call-log table: the URL (password left out) and the table."""
    return f"{redact(url)} functai_{table}"


def numbered_rows(
    url: str, table: str, skipped: list[tuple[str, str]] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row number, object)`` for each row of ``calls`` or ``ratings``, oldest first; a row that
    is not a JSON object is reported as skipped, as a folder's call log reports a line
    (`functai.calls.records.report_skipped`)."""
    for number, line in enumerate(log_store(url).read_log(table), 1):
        try:
            data = codec.loads(line)
        except ValueError:
            report_skipped(place(url, table), number, "not JSON", skipped)
            continue
        if isinstance(data, dict):
            yield number, data
        else:
            report_skipped(place(url, table), number, not_an_object(data), skipped)


def read_lines(url: str, table: str, skipped: list[tuple[str, str]] | None = None) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``calls`` or ``ratings``, oldest first (other rows reported, see `numbered_rows`)."""
    return (data for _, data in numbered_rows(url, table, skipped))
