"""Moving data between stores: conversations (`copy_conversations`) and call logs (`copy_calls`).

Ids and every record's JSON text are kept, so a copy folder → SQLite → PostgreSQL → folder
ends with the bytes it started with. A copy run again adds only what the target is missing.
"""

from __future__ import annotations

import os
from typing import Any

from .._logfiles import read_lines
from .._calls.records import append_line
from .._errors import FunctAIError
from .._logfiles import LOG_FILE, RATINGS_FILE
from . import calllog
from .calllog import is_log_url, log_store
from .opening import open_store
from .protocol import check_conversation_id, to_line
from .urls import redact

__all__ = ["copy_calls", "copy_conversations"]

FILES = {"calls": LOG_FILE, "ratings": RATINGS_FILE}


def _name(where: Any) -> str:
    return redact(where) if isinstance(where, str) else repr(where)


def copy_conversations(source: Any, target: Any, conversations: list[str] | None = None) -> dict[str, int]:
    """Copy every conversation (or those named) from ``source`` to ``target``; records added to each.

    One the target holds must begin with the source's records (a copy cut short), else nothing more is copied.
    """
    src, dst = open_store(source), open_store(target)
    if src is dst:
        raise FunctAIError(f"{_name(source)} and {_name(target)} are the same store; copy to another one",
                           code="store-copy")
    names = src.conversations() if conversations is None else [check_conversation_id(c) for c in conversations]
    missing = [name for name in names if not src.count(name)] if conversations is not None else []
    if missing:  # a name mistyped: nothing is copied, and the copy says why rather than that it was done
        raise FunctAIError(f"{_name(source)} has no conversation {', '.join(map(repr, missing))}; nothing was copied",
                           code="store-copy")
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


def _read(where: str, table: str) -> list[dict[str, Any]]:
    if is_log_url(where):
        return [data for _, data in calllog.numbered_rows(where, table)]
    return list(read_lines(os.path.join(where, FILES[table])))


def copy_calls(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> tuple[int, int]:
    """Copy a call log and its ratings (a folder or a store URL each); returns (calls, ratings) added,
    leaving out calls the target has (by id) and ratings it has (the same line)."""
    src, dst = os.fspath(source), os.fspath(target)
    if (is_log_url(src) and is_log_url(dst) and log_store(src) is log_store(dst)) or (
        not is_log_url(src) and not is_log_url(dst) and os.path.abspath(src) == os.path.abspath(dst)
    ):
        raise FunctAIError(f"{_name(src)} and {_name(dst)} are the same call log; copy to another one",
                           code="store-copy")
    known_calls = {str(data.get("id")) for data in _read(dst, "calls")}
    known_ratings = {to_line(data) for data in _read(dst, "ratings")}
    new = {
        "calls": [data for data in _read(src, "calls") if str(data.get("id")) not in known_calls],
        "ratings": [data for data in _read(src, "ratings") if to_line(data) not in known_ratings],
    }
    for table in ("calls", "ratings"):
        if is_log_url(dst):
            calllog.append(dst, table, new[table])
        else:
            for data in new[table]:
                append_line(os.path.join(dst, FILES[table]), data)
    return len(new["calls"]), len(new["ratings"])
