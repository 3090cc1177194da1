"""Moving data between stores: conversations (`copy_conversations`) and call logs (`copy_calls`).

Ids are kept, and so is every record's JSON text (stores keep the text as
written), so a copy folder → SQLite → PostgreSQL → folder ends with the
same bytes it started with. A copy can be run again: what the target
already holds is checked to be the same, and only what is missing is added.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ..errors import FunctAIError
from .calllog import encode, is_log_url, log_store
from .urls import redact


def _name(where: Any) -> str:
    return redact(where) if isinstance(where, str) else repr(where)


def copy_conversations(source: Any, target: Any, conversations: list[str] | None = None) -> dict[str, int]:
    """Copy every conversation (or those named) from ``source`` to ``target``; records added to each.

    A conversation the target already holds must begin with the source's
    records (an earlier copy, cut short); one that differs is refused and
    left as it is, and nothing more is copied.
    """
    from .opening import open_store
    from .protocol import check_conversation_id

    src, dst = open_store(source), open_store(target)
    if src is dst:
        raise FunctAIError(f"{_name(source)} and {_name(target)} are the same store; copy to another one",
                           code="store-copy")
    names = src.conversations() if conversations is None else [check_conversation_id(c) for c in conversations]
    added: dict[str, int] = {}
    for name in names:
        records = src.read(name)
        have = dst.count(name)
        if have and dst.read(name) != records[:have]:
            raise FunctAIError(
                f"conversation {name!r} in {_name(target)} is not the one in {_name(source)} (its records differ); "
                "nothing of it was copied — copy to an empty store, or leave that conversation out",
                code="store-copy",
            )
        dst.append(name, records[have:], expect=have, sync=True)  # StoreConflict if someone writes meanwhile
        added[name] = len(records) - have
    return added


def _calls_folder_lines(folder: str, name: str) -> Iterator[dict[str, Any]]:
    from ..calls.records import read_lines

    return read_lines(os.path.join(folder, name))


def _read(where: str, table: str) -> list[dict[str, Any]]:
    from ..calls.records import LOG_FILE
    from ..evaluation.ratings import RATINGS_FILE

    if is_log_url(where):
        from .calllog import read_lines

        return list(read_lines(where, table))
    return list(_calls_folder_lines(where, LOG_FILE if table == "calls" else RATINGS_FILE))


def copy_calls(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> tuple[int, int]:
    """Copy a call log and its ratings (a folder or a store URL each); returns (calls, ratings) added.

    Calls the target already has (by id) and ratings it already has (the
    same line) are not added again.
    """
    from ..calls.records import LOG_FILE, append_line
    from ..evaluation.ratings import RATINGS_FILE

    src, dst = os.fspath(source), os.fspath(target)
    if (is_log_url(src) and is_log_url(dst) and log_store(src) is log_store(dst)) or (
        not is_log_url(src) and not is_log_url(dst) and os.path.abspath(src) == os.path.abspath(dst)
    ):
        raise FunctAIError(f"{_name(src)} and {_name(dst)} are the same call log; copy to another one",
                           code="store-copy")
    known_calls = {str(data.get("id")) for data in _read(dst, "calls")}
    known_ratings = {encode(data) for data in _read(dst, "ratings")}
    calls = [data for data in _read(src, "calls") if str(data.get("id")) not in known_calls]
    ratings = [data for data in _read(src, "ratings") if encode(data) not in known_ratings]
    if is_log_url(dst):
        store = log_store(dst)
        store.log_lines("calls", [(str(data.get("id", "")), encode(data)) for data in calls])
        store.log_lines("ratings", [(str(data.get("call", "")), encode(data)) for data in ratings])
    else:
        for data in calls:
            append_line(os.path.join(dst, LOG_FILE), data)
        for data in ratings:
            append_line(os.path.join(dst, RATINGS_FILE), data)
    return len(calls), len(ratings)


__all__ = ["copy_calls", "copy_conversations"]
