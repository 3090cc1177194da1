"""Ratings: a person's verdict on a call, kept beside the call log (``ratings.jsonl``, or the
``functai_ratings`` table of a SQL call log). The latest rating by the same person wins.

Their lines are read by `functai._calls.reading.latest_ratings`, where ``read_calls(rated=True)``
joins each record to its ratings; `Rating`, reading them as such and rating a call are here."""

from __future__ import annotations

import os
import time
from typing import Any

import attrs

from .._calls.outputs import to_jsonable
from .._calls.reading import latest_ratings, read_calls
from .._calls.records import CallRecord, append_line
from .._errors import FunctAIError
from .._layers import current_values
from .._logfiles import LOG_FILE, RATINGS_FILE
from .._models.keys import reveal
from .._stores import calllog
from .._stores.calllog import is_log_url
from .._stores.urls import redact

__all__ = ["Rating", "log_folder", "rate", "read_ratings"]


@attrs.frozen
class Rating:
    """One person's verdict on one call (`functai.rate`), kept beside the call log."""

    call: str
    good: bool
    correction: Any = None
    by: str | None = None
    at: str = ""


def read_ratings(folder: str | os.PathLike[str]) -> dict[str, list[Rating]]:
    """Each call's ratings, one per person (the latest wins), oldest first."""
    return {call: [Rating(**rating) for rating in ratings] for call, ratings in latest_ratings(folder).items()}


def log_folder(log: str | os.PathLike[str] | None) -> str:
    folder = log if log is not None else current_values().get("log_calls")
    if not folder:
        raise FunctAIError("ratings are kept beside the call log, and no call log is configured: "
                           "set functai.configure(log_calls='calls/') or pass log=...", code="no-call-log")
    revealed: str | os.PathLike[str] = reveal(folder)  # a log_calls URL with a password is kept behind a handle
    return os.fspath(revealed)


def rate(record_or_id: CallRecord | str, good: bool = True, correction: Any = None, by: str | None = None, *,
         log: str | os.PathLike[str] | None = None) -> Rating:
    """Rate a logged call: good or bad, optionally with the answer it should have given."""
    if not isinstance(good, bool):
        raise TypeError(f"good must be True or False, not {good!r}")
    call_id = record_or_id.id if isinstance(record_or_id, CallRecord) else record_or_id
    if not isinstance(call_id, str) or not call_id:
        raise TypeError(f"rate() takes a call record or a call id, not {record_or_id!r}")
    folder = log_folder(log)
    if not any(read_calls(folder, id=call_id)):
        where = redact(folder) if is_log_url(folder) else os.path.join(folder, LOG_FILE)
        raise FunctAIError(f"no call {call_id!r} in the call log {where}; rate a logged call "
                           "(log_calls must be set when it runs)", code="unknown-call")
    at = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    rating = Rating(call=call_id, good=good, correction=to_jsonable(correction), by=by, at=at)
    if is_log_url(folder):
        calllog.append_rating(folder, attrs.asdict(rating))
    else:
        append_line(os.path.join(folder, RATINGS_FILE), attrs.asdict(rating))
    return rating
