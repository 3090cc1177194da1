"""What a call log holds, in a folder (``calls.jsonl`` and ``ratings.jsonl``) or a SQL store's
tables: the files' names, what makes a line a call record or a rating, and how a line that is
neither is reported. The records themselves are `functai._calls.records`; this is what the stores
need of them too, below the calls (a folder store shared with a call log leaves its files out; a
call log kept by URL reports its rows as a folder's lines), so it is part of the core."""

from __future__ import annotations

import errno
import os
from typing import Any, Iterator

from ._files import unreadable, unwritable
from ._log import warn

LOG_FILE = "calls.jsonl"
#: Beside it in a call log folder: the ratings made of its calls (`functai._evaluation.ratings`).
RATINGS_FILE = "ratings.jsonl"
#: Beside them: the index of both (`functai._stores.logindex`), made again from them whenever it is missing or stale.
INDEX_FILE = "calls.index.sqlite"

#: The fields every call record has: the log's format, which `functai._calls.records.CallRecord`
#: writes (its fields without a default; a test checks it writes them).
REQUIRED = frozenset({"id", "function", "version", "inputs", "started"})

#: What each field of a logged call record must be (None is fine where the field may be absent).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,), "function": (str,), "version": (str,), "inputs": (dict,), "started": (str,),
    "parent": (str, type(None)), "path": (str,), "module": (str,), "error": (dict, type(None)),
    "instruction": (str, dict, type(None)), "model": (str, type(None)), "settings": (dict,), "usage": (dict,),
    "seconds": (int, float, type(None)), "tool_calls": (list,), "conversation": (dict, type(None)),
    "changes": (list,), "sections": (list,), "replayable": (bool,), "attempts": (int,), "heard": (list,),
}


def record_problem(data: dict[str, Any]) -> str | None:
    """Why a call log line is not a call record, or None."""
    missing = sorted(REQUIRED - data.keys())
    if missing:
        return f"not a call record: it has no {', '.join(map(repr, missing))}"
    for name, types in _FIELD_TYPES.items():
        if name in data and not isinstance(data[name], types):
            return f"{name!r} is a JSON {type(data[name]).__name__}, which a call record never holds there"
    for name in ("tool_calls", "changes", "heard"):
        if name in data and not all(isinstance(item, dict) for item in data[name]):
            return f"{name!r} holds something other than objects"
    return _nested_problem(data)


def _timed(entry: dict[str, Any]) -> bool:
    """Whether a change or a heard entry's time, where it has one, is a number (what timing sums)."""
    spent = entry.get("µs", 0)
    return type(spent) in (int, float)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _nested_problem(data: dict[str, Any]) -> str | None:
    """What a reader asking the call again (replay, evaluation) would trip on, deeper in the record."""
    for change in data.get("changes") or ():
        if not (isinstance(change.get("plugin"), str) and change["plugin"].strip()
                and isinstance(change.get("hook"), str) and isinstance(change.get("change", {}), dict)):
            return "'changes' holds an entry without its plugin, hook or change as a record writes them"
    if not all(_timed(entry) for entry in (*(data.get("changes") or ()), *(data.get("heard") or ()))):
        return "'changes' or 'heard' holds a time ('µs') that is not a number"
    if not all(isinstance(call.get("name"), str) for call in data.get("tool_calls") or ()):
        return "'tool_calls' holds a call without its name"
    if not all(isinstance(section, (str, dict)) for section in data.get("sections") or ()):
        return "'sections' holds something other than text"
    conversation = data.get("conversation")
    if conversation is None:
        return None
    if not (isinstance(conversation.get("id"), str) and "turn" in conversation
            and isinstance(conversation["turn"], (str, type(None)))
            and isinstance(conversation.get("parent"), (str, type(None)))):
        return "'conversation' has no id and turn as a record writes them"
    shown = conversation.get("shown", [])
    last = shown.get("last") if isinstance(shown, dict) else None
    if not (_texts(shown) or (type(last) is int and last >= 0 and _texts(shown.get("drop", [])))):
        return "'conversation' has a 'shown' that is neither turn ids nor {'last': n}"
    without = conversation.get("without", {})
    if not (isinstance(without, dict) and all(_texts(names) for names in without.values())):
        return "'conversation' has a 'without' that is not lists of input names"
    waited = conversation.get("waited", [])
    if not (isinstance(waited, list) and all(_a_wait(wait) for wait in waited)):
        return "'conversation' has a 'waited' that is not its waits as a record writes them"
    return None


def _a_wait(wait: Any) -> bool:
    """Whether a wait kept in a turn's call record is one: its approvals and answers, objects."""
    if not isinstance(wait, dict):
        return False
    approvals, answers = wait.get("approvals", []), wait.get("answers", {})
    return (isinstance(approvals, list) and all(isinstance(approval, dict) for approval in approvals)
            and isinstance(answers, dict) and all(isinstance(answer, dict) for answer in answers.values()))


def is_log_line(data: Any) -> bool:
    """Whether a decoded line is one a call log folder holds: a call record, or a rating of one."""
    if not isinstance(data, dict):
        return False
    return is_rating(data) or record_problem(data) is None


#: Why a line of ``ratings.jsonl`` that is an object is not used.
NOT_A_RATING = "not a rating (it needs a call id, good true or false, and by)"


def is_rating(data: dict[str, Any]) -> bool:
    """Whether a decoded line is a rating: a call id, ``good`` true or false, and who rated (or null)."""
    call, by = data.get("call"), data.get("by")
    return isinstance(call, str) and call != "" and isinstance(data.get("good"), bool) and (
        by is None or isinstance(by, str))


def parse_line(raw: bytes) -> tuple[dict[str, Any], str] | tuple[None, str]:
    """A whole line's object and ``""``, or None and why the line is not one."""
    from . import _codec as codec  # here, not at import: a plain call reads no JSON lines

    try:
        data = codec.loads(raw)  # bytes: a UTF-8 byte-order mark is read, not refused
    except ValueError:
        return None, _not_json(raw)
    if isinstance(data, dict):
        return data, ""
    return None, f"a JSON {type(data).__name__}, not an object"


def _not_json(raw: bytes) -> str:
    if raw.rstrip(b"\n").endswith(b"\x00"):
        return "a write cut short (a crash while writing); the next writer ended it"
    if not raw.strip():
        return "an empty line"
    if _caught_line(raw):
        return "a write cut short (a crash while writing), with the next line caught on it; that line was written again"
    return "not JSON"


def _caught_line(raw: bytes) -> bool:
    """Whether a damaged line is a torn piece with a whole object line after it (see `functai._appendlog`).

    ``{"`` never occurs inside a JSON string, and a nested object follows ``:``, ``,`` or ``[``:
    an object start after anything else is where a new line began."""
    from . import _codec as codec

    start = 0
    for _ in range(3):
        start = raw.find(b'{"', start + 1)
        if start < 0:
            return False
        if raw[start - 1] not in b":,[ ":
            try:
                return isinstance(codec.loads(raw[start:]), dict)
            except ValueError:
                pass
    return False


def report_skipped(path: str, number: int, reason: str, skipped: list[tuple[str, str]] | None) -> None:
    """Add a skipped line to ``skipped``, or warn about it when no list is given."""
    if skipped is not None:
        skipped.append((f"{path}:{number}", reason))
    else:
        warn("log line skipped", at=f"{path}:{number}", reason=reason)


def read_lines(path: str | os.PathLike[str], skipped: list[tuple[str, str]] | None = None) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file; other lines are skipped and reported (see `read_calls`)."""
    for _, data in numbered_lines(path, skipped):
        yield data


def numbered_lines(
    path: str | os.PathLike[str], skipped: list[tuple[str, str]] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each JSON object line of a JSON-lines file; other complete
    lines are reported as skipped, a last line without its newline (being written) is left alone."""
    where = os.fspath(path)
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return
    except OSError as error:
        what = "call log" if os.path.basename(where) == LOG_FILE else "log file"
        if error.errno == errno.ENOTDIR:  # a file where the log folder should be
            raise unwritable(path, error, what) from None
        raise unreadable(path, error, what) from None
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.endswith(b"\n"):
                break
            data, why = parse_line(raw)
            if data is not None:
                yield number, data
            else:
                report_skipped(where, number, why, skipped)
