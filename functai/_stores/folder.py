"""The folder store: one JSON-lines file per conversation, ``<folder>/<id>.jsonl``.

Each append is one ``os.write`` of whole lines under an exclusive ``flock``
(a compare-and-set on the record count with ``expect=``). A line that is not a
JSON object (a crash mid-write) is skipped, reported once and never counted,
and the next append ends it rather than gluing a record onto it. A
per-conversation index makes an append or a read cost what is new, not the file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from .._errors import FunctAIError
from .._files import check_folder_name, cut, fsync_file, make_folder, unreadable, unwritable, write_all
from .._log import warn
from .._logfiles import LOG_FILE, RATINGS_FILE, is_log_line
from .folder_index import TORN_END, Index, parse_lines, why_not_json
from .protocol import (
    CONVERSATION_ID,
    StoreConflict,
    check_conversation_id,
    check_start,
    forkable,
    from_line,
    from_lines,
    no_record,
    rows_of,
    to_line,
)

__all__ = ["FolderStore"]

SUFFIX = ".jsonl"


class FolderStore:
    """Conversations as JSON-lines files in one folder (0700, files 0600), safe across threads and
    processes. Each file is opened per operation, so a file replaced underneath is noticed."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(os.fspath(folder))
        self._paths: dict[str, str] = {}  # each conversation's file, checked and joined once
        self._indexes: dict[str, Index] = {}
        self._locks: dict[str, threading.Lock] = {}
        forkable.add(self)

    def _reset_locks(self) -> None:
        self._locks = {}

    def _lock(self, conversation: str) -> threading.Lock:
        lock = self._locks.get(conversation)
        if lock is None:  # two threads here at once: setdefault keeps the first one made
            lock = self._locks.setdefault(conversation, threading.Lock())
        return lock

    def path_for(self, conversation: str) -> Path:
        """The file that holds ``conversation``: ``<folder>/<id>.jsonl``."""
        return Path(self._path(conversation))

    def _path(self, conversation: str) -> str:
        path = self._paths.get(conversation)
        if path is None:
            path = self._paths[conversation] = os.path.join(self.folder, check_conversation_id(conversation) + SUFFIX)
        return path

    # -- the index ---------------------------------------------------------

    def _refresh(self, conversation: str, fd: int, st: os.stat_result, rows: bool = True) -> Index:
        """Bring the index up to date with the file; the caller holds a flock on ``fd``."""
        index = self._indexes.get(conversation)
        if (
            index is None
            or (index.dev, index.ino) != (st.st_dev, st.st_ino)
            or st.st_size < index.offset
            or (index.offset > 0 and os.pread(fd, 1, index.offset - 1) != b"\n")
        ):  # first sight, replaced, shrunk or rewritten: start again
            index = self._indexes[conversation] = Index(st.st_dev, st.st_ino)
        index.fresh, index.fresh_from, index.fresh_rows = [], len(index.lines), rows
        while index.offset < st.st_size:  # what is new, whole (the index keeps it all); a read stops at 2 GiB
            data = os.pread(fd, st.st_size - index.offset, index.offset)
            end = data.rfind(b"\n")
            if end < 0:  # no whole line yet (or the file shrank under us)
                break
            skipped = parse_lines(data, end, index, index.fresh, rows)
            index.offset += end + 1
            index.skipped.extend(skipped)
            for number, reason in skipped:
                warn("conversation line skipped", at=f"{self._path(conversation)}:{number}", reason=reason)
        return index

    def _read_index(self, conversation: str, rows: bool = True) -> Index | None:
        """The up-to-date index, or None when the conversation has no file."""
        path = self._path(conversation)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._indexes.pop(conversation, None)
            return None
        except NotADirectoryError as error:  # a file where the store's folder should be
            raise unwritable(self.folder, error, "conversation store") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):  # opened, but it holds no lines
                raise unreadable(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)), "conversation store")
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
                return from_lines(index.lines.since(start))
        return fresh[start - first :]

    def read_rows(self, conversation: str, start: int = 0) -> tuple[list[Any], Callable[[int], dict[str, Any]]]:
        """The records from ``start``, as `read` gives them but decoded only as far as an open
        needs (`functai._conversations.rows`: a row, or a dict); and the whole record at a
        position of that list, from the line it was read from."""
        check_start(start)
        with self._lock(conversation):
            index = self._read_index(conversation)
            if index is None:
                return [], no_record
            lines, first, fresh = index.lines, index.fresh_from, index.fresh
            index.fresh = []
            if not index.fresh_rows or start < first or len(fresh) != len(lines) - first:
                fresh, first = rows_of(lines.since(start)), start
        return fresh[start - first :], lambda position: from_line(lines.line(start + position))

    def count(self, conversation: str) -> int:
        with self._lock(conversation):
            index = self._read_index(conversation)
            return len(index.lines) if index is not None else 0

    def append(self, conversation: str, records: Sequence[dict[str, Any]], *, expect: int | None = None,
               sync: bool = False) -> int:
        path = self._path(conversation)
        lines = [to_line(record) for record in records]  # a bad record appends nothing
        try:
            return self._append(conversation, path, lines, expect, sync)
        except OSError as error:  # a full disk, a read-only folder, a file where the folder should be
            raise unwritable(path, error, "conversation store") from None

    def _append(self, conversation: str, path: str, lines: list[str], expect: int | None, sync: bool) -> int:
        with self._lock(conversation):
            if not lines:  # nothing to write: check, but create no file
                index = self._read_index(conversation)
                current = len(index.lines) if index is not None else 0
                if expect is not None and current != expect:
                    raise StoreConflict(count=current, conversation=conversation)
                if sync and index is not None:
                    self.sync(conversation)
                return current
            for _ in range(100):
                fd, created = self._open_for_append(path, conversation, create=not expect)
                try:
                    if created:
                        os.fchmod(fd, 0o600)  # exactly 0600, whatever the umask
                        with contextlib.suppress(OSError):  # some file systems refuse fsync on a folder
                            fsync_file(self.folder)  # the file's existence is durable too
                    count = self._append_locked(conversation, fd, path, lines, expect, sync)
                finally:
                    os.close(fd)
                if count is not None:
                    return count
            raise FunctAIError(f"could not append to {path}: it keeps being replaced", code="store-io")

    def _append_locked(
        self, conversation: str, fd: int, path: str, lines: list[str], expect: int | None, sync: bool
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
            data = (TORN_END if torn else b"") + "".join(line + "\n" for line in lines).encode("utf-8")
            write_all(fd, data, st.st_size)
            if sync:
                try:
                    os.fsync(fd)
                except OSError:  # not known to be on disk: not appended, so nobody counts on it
                    cut(fd, st.st_size)
                    raise
            index.offset = st.st_size + len(data)
            if torn:
                index.parsed_lines += 1
                why = why_not_json(TORN_END[:1])
                index.skipped.append((index.parsed_lines, why))
                warn("conversation line skipped", at=f"{path}:{index.parsed_lines}", reason=why)
            index.numbers.add(index.parsed_lines + 1, len(lines))
            index.parsed_lines += len(lines)
            index.lines.extend(lines)
            index.fresh = []
            return len(index.lines)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _open_for_append(self, path: str, conversation: str, create: bool) -> tuple[int, bool]:
        """An fd on the conversation file, creating it (and the folder) if ``create``, else
        `StoreConflict` when it is missing; True if created here."""
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
        for _ in range(100):  # another process may create or remove the file between two of these
            try:
                return os.open(path, flags), False
            except FileNotFoundError:
                if not create:  # records are expected there: none are, and no file is made
                    raise StoreConflict(count=0, conversation=conversation) from None
                make_folder(self.folder)
            try:
                return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600), True
            except FileExistsError:  # another writer created it just now: open theirs
                continue
        return os.open(path, flags), False

    def sync(self, conversation: str) -> None:
        fsync_file(self.path_for(conversation))

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
        ids = (name[: -len(SUFFIX)] for name in names if name.endswith(SUFFIX) and not self._call_log(name))
        return sorted(i for i in ids if CONVERSATION_ID.fullmatch(i))

    def _call_log(self, name: str) -> bool:
        """Whether file ``name`` is a call log's ``calls.jsonl`` or ``ratings.jsonl`` kept in this folder too."""
        if name not in (LOG_FILE, RATINGS_FILE):
            return False
        try:
            with open(self.folder / name, "rb") as file:
                first = file.readline(1 << 24)  # bounded: a call record is never that long
            return is_log_line(from_line(first))
        except (OSError, ValueError):  # unreadable, or not JSON: not the call log's
            return False

    def __repr__(self) -> str:
        return f"FolderStore({str(self.folder)!r})"


_folder_stores: dict[str, FolderStore] = {}


def open_folder(path: str | os.PathLike[str]) -> FolderStore:
    """The `FolderStore` for ``path``, one per absolute path in a process (so its index is shared)."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    check_folder_name(path)
    key = os.path.abspath(path)
    found = _folder_stores.get(key)
    if found is None:  # two threads here at once: setdefault keeps the first one made
        found = _folder_stores.setdefault(key, FolderStore(key))
    return found
