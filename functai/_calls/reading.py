"""Reading the call log back: every record in the order written, or the ones a question picks
(one call, the newest page, one function's, model's or error's calls) through the log's index,
each with its latest rating.

A folder log is read line by line (`numbered_lines`); its index is `functai._stores.logindex`.
A SQL log answers from its own indexed table (`functai._stores.calllog`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Iterator

from .._errors import FunctAIError
from .._files import unwritable
from .._logfiles import (
    LOG_FILE,
    NOT_A_RATING,
    RATINGS_FILE,
    is_rating,
    numbered_lines,
    record_problem,
    report_skipped,
)
from .records import CallRecord

if TYPE_CHECKING:
    from .._stores.callquery import CallQuery


def read_calls(
    folder: str | os.PathLike[str], *, rated: bool = False, function: Any = None, model: str | None = None,
    error: str | bool | None = None, parent: str | None = None, id: str | None = None, plugin: str | None = None,
    day: str | None = None, newest: int | None = None, before: str | None = None,
    skipped: list[tuple[str, str]] | None = None,
) -> Iterator[CallRecord]:
    """Yield the records of the call log in ``folder`` (or at a store URL), each with its latest
    ``rating`` (or None): every one in the order written, or those the filters pick.

    Filters (each given must hold): ``rated=True``, only rated calls; ``function`` (an AI function,
    ``"module:name"`` or a name), every version of its calls; ``model``; ``error``, calls that
    failed with that code (``True``: every failed call); ``parent``, the calls made inside that
    call; ``id``, one call; ``plugin``, calls a plugin changed; ``day`` (``"YYYY-MM-DD"``), calls
    started that day. ``newest=N``: only the newest N (by start time), newest first, and with
    ``before=ID`` those that started before call ``ID`` (the next page). A filtered read reads the
    records it yields, through the log's index, however long the log.

    A line that cannot be used is added to ``skipped`` as ``("<file>:<line>", reason)``, else warned about.
    """
    query = _query(rated, function, model, error, parent, id, plugin, day, newest, before)  # checked now, not later
    if query.whole_log:
        return _read_all(folder, query.rated, skipped)
    return iter(find_calls(folder, query, skipped))


def _query(rated: bool, function: Any, model: Any, error: Any, parent: Any, id: Any, plugin: Any, day: Any,
           newest: Any, before: Any) -> CallQuery:
    """The filters as a `CallQuery`, each checked: a wrong one is named, never read as no filter."""
    from .._stores.callquery import CallQuery  # here: a plain import of functai opens no store

    module = None
    given = function
    if function is not None and not isinstance(function, str):
        named = (getattr(function, "module", None), getattr(function, "name", None))
        if not all(isinstance(part, str) for part in named):
            raise FunctAIError(f"read_calls(function=...) takes an AI function or its name, not {function!r}",
                               code="bad-filter")
        function = f"{named[0]}:{named[1]}"
    if function is not None:
        module, _, function = function.rpartition(":")
    texts = {"function": function, "model": model, "parent": parent, "id": id, "plugin": plugin, "day": day,
             "before": before, "error": error if error is not True else None}
    for name, value in texts.items():
        if value is not None and not (isinstance(value, str) and value and "\x00" not in value):
            shown = given if name == "function" else value
            raise FunctAIError(f"read_calls({name}=...) takes a non-empty string without NUL characters"
                               + (" or True" if name == "error" else "") + f", not {shown!r}", code="bad-filter")
    if plugin is not None and any(c.isspace() for c in plugin):  # the index keeps a call's plugins as one spaced text
        raise FunctAIError(f"read_calls(plugin=...) takes one plugin's name, which has no spaces, not {plugin!r}",
                           code="bad-filter")
    if day is not None and not _a_day(day):
        raise FunctAIError(f"read_calls(day=...) takes a date written YYYY-MM-DD, not {day!r}", code="bad-filter")
    if newest is not None and (type(newest) is not int or newest < 1):
        raise FunctAIError(f"read_calls(newest=...) takes a whole number from 1, not {newest!r}", code="bad-filter")
    if before is not None and newest is None:
        raise FunctAIError("read_calls(before=...) continues a page: give newest=N with it", code="bad-filter")
    return CallQuery(id=id, function=function, module=module or None, model=model, error=error, parent=parent,
                     plugin=plugin, day=day, rated=bool(rated), before=before,
                     newest=None if newest is None else min(newest, 2**63 - 1))  # no more rows than a database counts


def _a_day(text: str) -> bool:
    import datetime

    try:
        return len(text) == 10 and datetime.date.fromisoformat(text) is not None
    except ValueError:
        return False


def _read_all(folder: str | os.PathLike[str], rated: bool,
              skipped: list[tuple[str, str]] | None) -> Iterator[CallRecord]:
    """Every record, streamed in the order written (``rated``: only those with a rating)."""
    ratings = latest_ratings(folder, skipped)
    path, lines = _log_lines(folder, "calls", skipped)
    for number, data in lines:
        why = record_problem(data)
        if why is not None:
            report_skipped(path, number, why, skipped)
            continue
        record = CallRecord.from_dict(data)
        mine = ratings.get(record.id)
        if mine:
            record.rating = mine[-1]
        elif rated:
            continue
        yield record


def find_calls(folder: str | os.PathLike[str], query: CallQuery,
               skipped: list[tuple[str, str]] | None = None) -> list[CallRecord]:
    """What ``query`` picks, through the log's index (`read_calls`'s filters; ``functai show`` asks
    for the start of a call id)."""
    from .._stores import calllog, logindex

    if calllog.is_log_url(folder):
        url = os.fspath(folder)
        found = calllog.find_calls(url, query, skipped)
        if found is None:  # a SQL log from before the index: read whole (its next write adds the index)
            calls = [(n, data) for n, data in calllog.numbered_rows(url, "calls", skipped) if not record_problem(data)]
            rated: Iterable[tuple[int, dict[str, Any]]] = (  # read only when they filter
                calllog.numbered_rows(url, "ratings") if query.rated else ())
            found = logindex.answer(query, calls, [(n, data) for n, data in rated if is_rating(data)])
        lines = calllog.find_ratings(url, [data["id"] for data in found])
    else:
        where = os.path.abspath(os.fspath(folder))
        if os.path.exists(where) and not os.path.isdir(where):
            error = NotADirectoryError(errno.ENOTDIR, "not a folder", where)
            raise unwritable(os.path.join(where, LOG_FILE), error, "call log")
        index = logindex.log_index(where)
        found, damaged = index.calls(query)
        for path, number, why in damaged:
            report_skipped(path, number, why, skipped)
        lines = index.ratings(data["id"] for data in found)
    ratings = _latest((data for data in lines if is_rating(data)))
    records = []
    for data in found:
        record = CallRecord.from_dict(data)
        mine = ratings.get(record.id)
        record.rating = mine[-1] if mine else None
        records.append(record)
    return records


def latest_ratings(folder: str | os.PathLike[str], skipped: list[tuple[str, str]] | None = None,
                   ) -> dict[str, list[dict[str, Any]]]:
    """Each call's ratings as data (``call``, ``good``, ``correction``, ``by``, ``at``), one per
    person (the latest wins), oldest first: what `functai._evaluation.ratings.read_ratings` reads."""
    path, lines = _log_lines(folder, "ratings", skipped)

    def ratings() -> Iterator[dict[str, Any]]:
        for number, data in lines:
            if is_rating(data):
                yield data
            else:
                report_skipped(path, number, NOT_A_RATING, skipped)

    return _latest(ratings())


def _latest(lines: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    latest: dict[tuple[str, str | None], dict[str, Any]] = {}
    for data in lines:
        rating = {"call": data["call"], "good": data["good"], "correction": data.get("correction"),
                  "by": data.get("by"), "at": str(data.get("at", ""))}
        latest.pop((rating["call"], rating["by"]), None)  # the latest by each person wins, in its own place
        latest[(rating["call"], rating["by"])] = rating
    by_call: dict[str, list[dict[str, Any]]] = {}
    for rating in latest.values():
        by_call.setdefault(rating["call"], []).append(rating)
    return by_call


def _log_lines(folder: str | os.PathLike[str], table: str, skipped: list[tuple[str, str]] | None = None,
               ) -> tuple[str, Iterator[tuple[int, dict[str, Any]]]]:
    """Where a call log's ``calls`` or ``ratings`` are (as messages name it) and their numbered lines:
    a SQLite or PostgreSQL log's rows, or a folder's file."""
    from .._stores import calllog

    if calllog.is_log_url(folder):
        return calllog.place(os.fspath(folder), table), calllog.numbered_rows(os.fspath(folder), table, skipped)
    path = os.path.join(os.fspath(folder), LOG_FILE if table == "calls" else RATINGS_FILE)
    return path, numbered_lines(path, skipped)
