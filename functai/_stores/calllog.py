"""A call log kept by URL: the JSON lines a folder keeps in ``calls.jsonl`` and ``ratings.jsonl``
(`functai._calls.records`, `functai._logfiles`), as rows of ``functai_calls`` and ``functai_ratings`` in a SQL store."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from .. import _codec as codec
from .._errors import FunctAIError
from .._files import check_folder
from .._log import warn
from .._logfiles import record_problem, report_skipped
from .._models.keys import SecretURL, reveal
from .callquery import CallQuery, call_row, indexable, rating_row
from .opening import open_url
from .protocol import not_an_object, to_line
from .urls import is_url, redact, scheme_of, sqlite_path


class LogStore(Protocol):
    """What a store needs to also keep a call log (SQLiteStore and PostgresStore have it)."""

    def log_lines(self, table: str, items: Sequence[tuple[Any, ...]]) -> None: ...

    def read_log(self, table: str) -> Iterator[str]: ...

    def find_calls(self, query: CallQuery) -> list[tuple[int, str]] | None: ...

    def find_ratings(self, ids: Sequence[str]) -> list[tuple[int, str]]: ...


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


def check_log_url(url: str | SecretURL) -> None:
    """Refuse a URL that can never keep the log, creating and connecting to nothing."""
    log_store(url)
    text = reveal(url)
    if scheme_of(text) == "sqlite":
        path = sqlite_path(text)
        check_folder(os.path.dirname(path), "SQLite call log", file=os.path.basename(path))


def append(url: str | SecretURL, table: str, records: list[dict[str, Any]]) -> None:
    """Append call records (``calls``, keyed by id and found by their `columns`) or ratings
    (``ratings``, by call), in one transaction."""
    if table == "calls":
        rows = [(row[0], to_line(data), *row[1:]) for data in records for row in [call_row(data)]]
    else:
        rows = [(*rating_row(data), to_line(data)) for data in records]
    log_store(url).log_lines(table, rows)


def append_call(url: str | SecretURL, data: dict[str, Any]) -> None:
    """Write a call's record. Its answer is already paid for: a log that cannot be reached
    (``store-io``) loses the record with a warning, not the answer; ``store-unwritable`` raises."""
    try:
        append(url, "calls", [data])
    except FunctAIError as error:
        if error.code != "store-io":
            raise
        warn("call record not written", code="call-log-unreachable", call=data.get("id"), error=error.message)


def append_rating(url: str, data: dict[str, Any]) -> None:
    append(url, "ratings", [data])


def place(url: str, table: str) -> str:
    """How a message names a call-log table: the URL (password left out) and the table."""
    return f"{redact(url)} functai_{table}"


def numbered_rows(
    url: str, table: str, skipped: list[tuple[str, str]] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row number, object)`` for each row of ``calls`` or ``ratings``; other rows are reported as skipped."""
    for number, line in enumerate(log_store(url).read_log(table), 1):
        data, why = _decoded(line)
        if why:
            report_skipped(place(url, table), number, why, skipped)
        else:
            yield number, data


def find_calls(url: str, query: CallQuery, skipped: list[tuple[str, str]] | None = None,
               ) -> list[dict[str, Any]] | None:
    """The records ``query`` picks, by the table's index (None: a log from before it, to read whole)."""
    rows = log_store(url).find_calls(query)
    if rows is None:
        return None
    found = []
    for seq, line in rows:  # a line edited since its row was written: the filters are checked on the record
        data, why = _decoded(line)
        why = why or record_problem(data) or ("" if query.matches(data) else "not the call its row's columns say")
        if why:
            report_skipped(place(url, "calls"), seq, why, skipped)
        else:
            found.append(data)
    return found


def find_ratings(url: str, ids: list[str]) -> list[dict[str, Any]]:
    """The ratings of the calls ``ids`` as data, in the order they were written."""
    decoded = (_decoded(line) for _, line in log_store(url).find_ratings([indexable(call) for call in ids]))
    return [data for data, why in decoded if not why]


def _decoded(line: str) -> tuple[dict[str, Any], str]:
    """A row's object and ``""``, or ``{}`` and why the row is not one."""
    try:
        data = codec.loads(line)
    except ValueError:
        return {}, "not JSON"
    return (data, "") if isinstance(data, dict) else ({}, not_an_object(data))
