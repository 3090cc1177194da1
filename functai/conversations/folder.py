"""The folder store: one JSON-lines file per conversation, ``<folder>/<id>.jsonl``.

* each append is one ``os.write`` of whole lines under an exclusive
  ``flock``, so concurrent writers (threads or processes) never interleave;
* ``expect=`` makes an append a compare-and-set on the record count, so two
  processes sending to one conversation never lose a record;
* a line that is not a complete JSON object (a crash mid-write, garbage) is
  skipped by readers and never counted, and the next append terminates it
  rather than gluing a record onto it; each skipped line is reported once
  (a `RuntimeWarning` naming the file, the line and why), and
  `FolderStore.skipped` lists them;
* a per-conversation index (bytes parsed so far, the valid lines) makes an
  append or a read cost what is new, not the whole file.

Every line is checked when it is first read, and its record handed out once
from there: as a dict (`FolderStore.read`) or as a row (`FolderStore.read_rows`,
what a conversation opens with: `functai.conversations.rows`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import threading
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import codec
from ..errors import FunctAIError
from ..files import unwritable, write_all
from ..log import warn
from .bulk import BULK_BYTES, paused_gc
from .store import (
    CONVERSATION_ID,
    StoreConflict,
    _forkable,
    _line,
    _record,
    _records,
    check_conversation_id,
    check_start,
    rows_of,
)

__all__ = ["FolderStore"]

SUFFIX = ".jsonl"

#: Written after a torn last line before appending. A NUL is never valid
#: JSON (not outside a string, not raw inside one), so whatever the torn
#: bytes were (even a whole object missing only its newline) the terminated
#: line stays invalid: it is never counted, before or after the repair.
_TORN_END = b"\x00\n"

#: The most read at once (a conversation is read whole if it is smaller: the index keeps it all anyway).
_CHUNK = 1 << 24


class _Lines:
    """The text of every valid record of a file, in order.

    A chunk of sound lines (one object each, decoded in one go) is kept as it was read and
    split into its lines only when one is asked for: an open never splits them.
    """

    __slots__ = ("_firsts", "_parts", "_count")

    def __init__(self) -> None:
        self._firsts: list[int] = []  # the index of each part's first line
        self._parts: list[tuple[bytes, int] | list[str | bytes]] = []  # (data, end): the lines of data[:end]
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add_chunk(self, data: bytes, end: int, count: int) -> None:
        """``count`` lines, newline-separated in ``data[:end]``."""
        self._firsts.append(self._count)
        self._parts.append((data, end))
        self._count += count

    def extend(self, lines: Sequence[str | bytes]) -> None:
        if not lines:
            return
        if not self._parts or type(self._parts[-1]) is not list:
            self._firsts.append(self._count)
            self._parts.append([])
        self._parts[-1].extend(lines)  # type: ignore[union-attr]
        self._count += len(lines)

    def append(self, line: str | bytes) -> None:
        self.extend((line,))

    def _split(self, at: int) -> list[str | bytes]:
        part = self._parts[at]
        if type(part) is tuple:
            data, end = part
            part = self._parts[at] = data[:end].split(b"\n")
        return part  # type: ignore[return-value]

    def line(self, index: int) -> str | bytes:
        """The text of record ``index``."""
        at = bisect_right(self._firsts, index) - 1
        if index < 0 or at < 0 or index >= self._count:
            raise IndexError(index)
        part, offset = self._parts[at], index - self._firsts[at]
        if offset == 0 and type(part) is tuple:  # a file's header: no need to split the chunk for it
            data, end = part
            found = data.find(b"\n", 0, end)
            return data[: end if found < 0 else found]
        return self._split(at)[offset]

    def since(self, start: int) -> list[str | bytes]:
        """The text of every record from index ``start`` on."""
        out: list[str | bytes] = []
        for at, first in enumerate(self._firsts):
            size = (self._firsts[at + 1] if at + 1 < len(self._firsts) else self._count) - first
            if first + size <= start:
                continue
            out.extend(self._split(at)[max(0, start - first):])
        return out


class _Numbers:
    """The file line (1-based) of each record, as runs of consecutive lines (a file of sound
    lines is one run, however long)."""

    __slots__ = ("_firsts", "_lines", "_count")

    def __init__(self) -> None:
        self._firsts: list[int] = []  # the record index each run starts at
        self._lines: list[int] = []  # and its line
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, line: int, count: int = 1) -> None:
        """Records on ``count`` lines from ``line`` on."""
        if count <= 0:
            return
        if not self._firsts or self._lines[-1] + (self._count - self._firsts[-1]) != line:
            self._firsts.append(self._count)
            self._lines.append(line)
        self._count += count

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self._count:
            raise IndexError(index)
        at = bisect_right(self._firsts, index) - 1
        return self._lines[at] + index - self._firsts[at]


@dataclass
class _Index:
    """What one process knows of one conversation file.

    ``offset`` is how many bytes were parsed: always just after a newline,
    so a torn last line is re-read once it is terminated. ``lines`` holds
    the text of the valid records, in order; the count is their number.
    """

    dev: int
    ino: int
    offset: int = 0
    lines: _Lines = field(default_factory=_Lines)
    #: The file line (1-based) of each valid record, and how many complete lines were parsed.
    numbers: _Numbers = field(default_factory=_Numbers)
    parsed_lines: int = 0
    #: Complete lines that are not records: ``(line, reason)``.
    skipped: list[tuple[int, str]] = field(default_factory=list)
    #: The records parsed by the last refresh (lines[fresh_from:]), handed out
    #: once by `read` (or, as rows, `read_rows`) so an open parses each line once, not twice.
    fresh: list[Any] = field(default_factory=list)
    fresh_from: int = 0
    #: Whether ``fresh`` holds rows (`functai.conversations.rows`) rather than dicts.
    fresh_rows: bool = False


_BOM = "\ufeff"


_scan = json.JSONDecoder().scan_once


def _parse_lines(data: bytes, end: int, index: _Index, parsed: list[Any], rows: bool = False) -> list[tuple[int, str]]:
    """Add the lines of ``data[:end]`` (complete lines, newline-separated) that are JSON objects
    (to ``parsed``: as rows when ``rows``, else dicts); the others are returned as
    ``(line number, reason)``."""
    skipped: list[tuple[int, str]] = []
    if _parse_sound(data, end, index, parsed, rows):
        return skipped
    number = index.parsed_lines
    for raw in data[:end].split(b"\n"):
        number += 1
        try:
            text = raw.decode("utf-8")
            if text.startswith(_BOM):  # an editor's byte-order mark hides nothing
                text = text[1:]
            try:
                record, end = _scan(text, 0)  # the parser of json.loads, without its checks around
            except StopIteration:
                raise ValueError("no JSON value") from None
            if end != len(text) and text[end:].strip():
                raise ValueError("more after the JSON value")
        except ValueError:  # not UTF-8, not JSON: a torn or foreign line
            skipped.append((number, _why_not_json(raw)))
            continue
        if isinstance(record, dict):
            index.lines.append(text)
            index.numbers.add(number)
            parsed.append(record)
        else:
            skipped.append((number, f"JSON {_JSON_NAMES.get(type(record), 'value')}, not an object"))
    index.parsed_lines = number
    return skipped


_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "true/false",
               type(None): "null"}


def _parse_sound(data: bytes, end: int, index: _Index, parsed: list[Any], rows: bool = False) -> bool:
    """Decode lines (``data[:end]``) that are all JSON objects in one go (`codec.loads_lines`, or as rows,
    `rows.decode_lines`); False (and nothing added) when any is not, for the line-by-line
    path to say which and why.

    One decode of the lot may read two values from one line or skip a blank one, so it is
    only taken when the counts say one object a line: every line starts with ``{`` and ends
    with ``}`` (each newline is in ``}\\n{``: then no value spans two lines, as JSON has no raw
    newline in a string, and none is blank) and there are as many values as lines.
    """
    lines = data.count(b"\n", 0, end) + 1
    if (not data.startswith(b"{") or data[end - 1 : end] != b"}"
            or data.count(b"}\n{", 0, end) != lines - 1):
        return False
    view = data if end == len(data) else memoryview(data)[:end]  # no copy of the lot
    records: list[Any] | None = None
    if rows:
        from . import rows as row_codec

        try:
            records = row_codec.decode_lines(view)  # each an object of a known kind, or it raises
        except ValueError:  # another kind, say: as dicts, which the fold takes too
            pass
    if records is None:
        try:
            records = codec.loads_lines(view)  # type: ignore[arg-type]
        except ValueError:
            return False
        if not all(map(dict.__instancecheck__, records)):
            return False
    if len(records) != lines:
        return False
    first = index.parsed_lines + 1
    index.lines.add_chunk(data, end, lines)
    index.numbers.add(first, lines)
    index.parsed_lines += lines
    parsed.extend(records)
    return True


def _why_not_json(raw: bytes) -> str:
    if raw.endswith(_TORN_END[:1]):
        return "a write cut short (a crash while writing); the next writer ended it"
    if not raw.strip():
        return "an empty line"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    return "not JSON"


class FolderStore:
    """Conversations as JSON-lines files in one folder, safe across threads and processes.

    The folder is created (mode 0700) on the first append; files are 0600.
    Each file is opened per operation, so a store survives ``fork`` and a
    file deleted or replaced underneath is noticed (its index is rebuilt).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(os.fspath(folder))
        self._indexes: dict[str, _Index] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        _forkable.add(self)

    def _reset_locks(self) -> None:
        self._locks = {}
        self._locks_lock = threading.Lock()

    def _lock(self, conversation: str) -> threading.Lock:
        with self._locks_lock:
            lock = self._locks.get(conversation)
            if lock is None:
                lock = self._locks[conversation] = threading.Lock()
            return lock

    def path_for(self, conversation: str) -> Path:
        """The file that holds ``conversation``: ``<folder>/<id>.jsonl``."""
        return self.folder / (check_conversation_id(conversation) + SUFFIX)

    # -- the index ---------------------------------------------------------

    def _refresh(self, conversation: str, fd: int, st: os.stat_result, rows: bool = True) -> _Index:
        """Bring the index up to date with the file; the caller holds a flock on ``fd``."""
        index = self._indexes.get(conversation)
        if (
            index is None
            or (index.dev, index.ino) != (st.st_dev, st.st_ino)
            or st.st_size < index.offset
            or (index.offset > 0 and os.pread(fd, 1, index.offset - 1) != b"\n")
        ):  # first sight, replaced, shrunk or rewritten: start again
            index = self._indexes[conversation] = _Index(st.st_dev, st.st_ino)
        position = index.offset
        pending = b""
        index.fresh, index.fresh_from, index.fresh_rows = [], len(index.lines), rows
        while position < st.st_size:
            chunk = os.pread(fd, min(_CHUNK, st.st_size - position), position)
            if not chunk:
                break
            position += len(chunk)
            data = pending + chunk if pending else chunk
            end = data.rfind(b"\n")
            if end < 0:
                pending = data
                continue
            with paused_gc(end, BULK_BYTES):
                skipped = _parse_lines(data, end, index, index.fresh, rows)
            index.offset += end + 1
            pending = data[end + 1 :]
            if skipped:
                index.skipped.extend(skipped)
                path = self.path_for(conversation)
                for number, reason in skipped:
                    warn("conversation line skipped", at=f"{path}:{number}", reason=reason)
        return index

    def _read_index(self, conversation: str, rows: bool = True) -> _Index | None:
        """The up-to-date index, or None when the conversation has no file."""
        path = self.path_for(conversation)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._indexes.pop(conversation, None)
            return None
        except NotADirectoryError as error:  # a file where the store's folder should be
            raise unwritable(self.folder, error, "conversation store") from None
        try:
            st = os.fstat(fd)
            index = self._indexes.get(conversation)
            if (
                index is not None
                and (index.dev, index.ino) == (st.st_dev, st.st_ino)
                and st.st_size == index.offset
            ):
                return index  # nothing new: no lock needed, parsed bytes never change
            fcntl.flock(fd, fcntl.LOCK_SH)  # writers hold LOCK_EX while writing: no half appends
            try:
                return self._refresh(conversation, fd, os.fstat(fd), rows)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # -- the Store protocol --------------------------------------------------

    def read(self, conversation: str, start: int = 0) -> list[dict[str, Any]]:
        check_start(start)
        with self._lock(conversation):
            index = self._read_index(conversation, rows=False)
            if index is None:
                return []
            first, fresh = index.fresh_from, index.fresh
            index.fresh = []
            if index.fresh_rows or start < first or len(fresh) != len(index.lines) - first:
                return _records(index.lines.since(start))
        return fresh[start - first :]

    def read_rows(self, conversation: str, start: int = 0) -> tuple[list[Any], Callable[[int], dict[str, Any]]]:
        """The records from ``start``, as `read` gives them but decoded only as far as an open
        needs (`functai.conversations.rows`: a row, or a dict); and the whole record at a
        position of that list, from the line it was read from."""
        check_start(start)
        with self._lock(conversation):
            index = self._read_index(conversation)
            if index is None:
                return [], _nothing
            lines, first, fresh = index.lines, index.fresh_from, index.fresh
            index.fresh = []
            if not index.fresh_rows or start < first or len(fresh) != len(lines) - first:
                fresh, first = rows_of(lines.since(start)), start
        return fresh[start - first :], lambda position: _record(lines.line(start + position))

    def count(self, conversation: str) -> int:
        with self._lock(conversation):
            index = self._read_index(conversation)
            return len(index.lines) if index is not None else 0

    def append(
        self,
        conversation: str,
        records: Sequence[dict[str, Any]],
        *,
        expect: int | None = None,
        sync: bool = False,
    ) -> int:
        path = self.path_for(conversation)
        lines = [_line(record) for record in records]  # a bad record appends nothing
        try:
            return self._append(conversation, path, lines, expect, sync)
        except FunctAIError:
            raise
        except OSError as error:  # a full disk, a read-only folder, a file where the folder should be
            raise unwritable(path, error, "conversation store") from None

    def _append(self, conversation: str, path: Path, lines: list[str], expect: int | None, sync: bool) -> int:
        with self._lock(conversation):
            if not lines:  # nothing to write: check, but create no file
                index = self._read_index(conversation)
                current = len(index.lines) if index is not None else 0
                if expect is not None and current != expect:
                    raise StoreConflict(count=current, conversation=conversation)
                if sync and index is not None:
                    self.sync(conversation)
                return current
            if expect is not None and expect != 0 and not os.path.exists(path):
                raise StoreConflict(count=0, conversation=conversation)  # and create no file
            for _ in range(100):
                fd, created = self._open_for_append(path)
                try:
                    if created:
                        os.fchmod(fd, 0o600)  # exactly 0600, whatever the umask
                        _fsync_folder(self.folder)  # the file's existence is durable too
                    count = self._append_locked(conversation, fd, path, lines, expect, sync)
                finally:
                    os.close(fd)
                if count is not None:
                    return count
            raise FunctAIError(f"could not append to {path}: it keeps being replaced", code="store-io")

    def _append_locked(
        self, conversation: str, fd: int, path: Path, lines: list[str], expect: int | None, sync: bool
    ) -> int | None:
        """Append under LOCK_EX; None when ``fd`` is no longer the file at ``path`` (retry)."""
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            st = os.fstat(fd)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                return None  # deleted while we waited for the lock
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                return None  # replaced while we waited for the lock
            index = self._refresh(conversation, fd, st)
            current = len(index.lines)
            if expect is not None and current != expect:
                raise StoreConflict(count=current, conversation=conversation)
            torn = st.st_size > index.offset  # bytes after the last newline
            data = (_TORN_END if torn else b"") + "".join(line + "\n" for line in lines).encode("utf-8")
            write_all(fd, data, st.st_size)
            if sync:
                try:
                    os.fsync(fd)
                except OSError:  # not known to be on disk: not appended, so nobody counts on it
                    _cut(fd, st.st_size)
                    raise
            index.offset = st.st_size + len(data)
            if torn:
                index.parsed_lines += 1
                index.skipped.append((index.parsed_lines, _why_not_json(_TORN_END[:1])))
                warn("conversation line skipped", at=f"{path}:{index.parsed_lines}",
                     reason=_why_not_json(_TORN_END[:1]))
            index.numbers.add(index.parsed_lines + 1, len(lines))
            index.parsed_lines += len(lines)
            index.lines.extend(lines)
            index.fresh = []
            return len(index.lines)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _open_for_append(self, path: Path) -> tuple[int, bool]:
        """An fd on the conversation file, creating it (and the folder); True if created here."""
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
        for _ in range(100):
            try:
                return os.open(path, flags), False
            except FileNotFoundError:
                pass
            self._make_folder()
            try:
                return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600), True
            except FileExistsError:
                continue  # another writer created it just now: open theirs
        raise FunctAIError(f"could not open {path}: it keeps appearing and disappearing", code="store-io")

    def _make_folder(self) -> None:
        try:
            os.makedirs(self.folder, mode=0o700)
        except FileExistsError:
            if not os.path.isdir(self.folder):
                raise NotADirectoryError(errno.ENOTDIR, "a file is where the store's folder should be",
                                         str(self.folder)) from None
            return
        os.chmod(self.folder, 0o700)  # the umask may have narrowed it; only ours are touched

    def sync(self, conversation: str) -> None:
        path = self.path_for(conversation)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def where(self, conversation: str, index: int) -> str:
        """Where record ``index`` (0-based, as `read` counts) is: ``<file>:<line>``."""
        path = self.path_for(conversation)
        with self._lock(conversation):
            known = self._indexes.get(conversation)
            if known is not None and 0 <= index < len(known.numbers):
                return f"{path}:{known.numbers[index]}"
        return f"{path} (record {index + 1})"

    def skipped(self, conversation: str) -> list[tuple[str, str]]:
        """The lines of the conversation's file that are not records: ``(<file>:<line>, reason)``."""
        path = self.path_for(conversation)
        with self._lock(conversation):
            index = self._read_index(conversation)
            found = list(index.skipped) if index is not None else []
        return [(f"{path}:{number}", reason) for number, reason in found]

    def conversations(self) -> list[str]:
        try:
            names = os.listdir(self.folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        ids = (name[: -len(SUFFIX)] for name in names if name.endswith(SUFFIX))
        return sorted(i for i in ids if CONVERSATION_ID.fullmatch(i))

    def __repr__(self) -> str:
        return f"FolderStore({str(self.folder)!r})"


def _nothing(position: int) -> dict[str, Any]:
    raise IndexError(position)


def _cut(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a folder
        pass
    finally:
        os.close(fd)


