"""The index beside a folder call log: ``calls.index.sqlite``, so reading one call, a page of the
newest, or one function's calls reads those records and not the whole log.

It is made from ``calls.jsonl`` and ``ratings.jsonl`` and never trusted over them. Writers only
append, and a read first indexes what was appended since (so logging a call costs nothing more).
A file that was replaced, cut shorter, written at the same size, or changed at its start or where
the index stopped is indexed again from the start; every record read is checked against what the
index said of it, and a difference has the index made again before the answer. (So an edit in
the middle of the log followed by an append before the next read is found when a read reaches
the edited record, not before.) A missing, damaged or unwritable index file is no loss: it is made
again, or kept in memory for the process, as it is for a log too small to need one."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable
from typing import Any, Callable, TypeVar

from .._errors import FunctAIError
from .._files import unreadable
from .._logfiles import INDEX_FILE, LOG_FILE, NOT_A_RATING, RATINGS_FILE, is_rating, parse_line, record_problem
from .callquery import COLUMNS, INDEXES, ROW, CallQuery, call_row, indexable, rating_row
from .sqlite import Transaction

#: Changed when what the index keeps changes: an index of another version is made again.
VERSION = 1

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY, inode INTEGER NOT NULL, size INTEGER NOT NULL, "
    "modified INTEGER NOT NULL, "
    "lines INTEGER NOT NULL, head BLOB NOT NULL, tail BLOB NOT NULL)",
    # seq: where the line starts in its file (the log's order), length: its bytes with the newline
    "CREATE TABLE IF NOT EXISTS functai_calls (seq INTEGER PRIMARY KEY, length INTEGER NOT NULL, id TEXT NOT NULL, "
    + ", ".join(f"{name} TEXT" for name in COLUMNS) + ")",
    "CREATE TABLE IF NOT EXISTS functai_ratings (seq INTEGER PRIMARY KEY, length INTEGER NOT NULL, call TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS skipped (name TEXT NOT NULL, line INTEGER NOT NULL, reason TEXT NOT NULL)",
    *INDEXES,
)

#: A log this small (a few hundred calls) is indexed in memory when read: no file beside it.
SMALL = 256 * 1024
#: How many bytes at the start of a file, and before where the index stopped, must be as they were
#: for what is indexed to still hold.
_MARK = 4096
_CHUNK = 1 << 20
T = TypeVar("T")
_TABLES = {LOG_FILE: "functai_calls", RATINGS_FILE: "functai_ratings"}


class Stale(Exception):
    """A record is not what the index says of it: the file changed under the index."""


class LogIndex:
    """The index of one call log folder, for this process (one connection, shared by its threads)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        #: Whether ``_conn`` is the index file (else an index in memory), and whether making it failed.
        self._file = self._stuck = False

    # -- answering ---------------------------------------------------------------------------

    def calls(self, query: CallQuery) -> tuple[list[dict[str, Any]], list[tuple[str, int, str]]]:
        """The records ``query`` asks for, and the log's skipped lines (file, line number, why)."""
        text, params = query.sql(f"seq, length, {ROW}", "?")

        def work(conn: sqlite3.Connection) -> tuple[list[dict[str, Any]], list[tuple[str, int, str]]]:
            found = self._records(LOG_FILE, conn.execute(text, params).fetchall(), query)
            return found, self._skipped(conn, LOG_FILE)

        return self._answer([LOG_FILE, RATINGS_FILE] if query.rated else [LOG_FILE], work)

    def ratings(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """The rating lines of the calls ``ids``, in the order they were written."""
        wanted = list(dict.fromkeys(indexable(call) for call in ids))

        def work(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows: list[Any] = []
            for start in range(0, len(wanted), 500):  # well under SQLite's limit on parameters
                part = wanted[start:start + 500]
                rows += conn.execute(f"SELECT seq, length, call FROM functai_ratings WHERE call IN "
                                     f"({', '.join('?' * len(part))})", part).fetchall()
            return self._records(RATINGS_FILE, sorted(rows), None)

        return self._answer([RATINGS_FILE], work) if wanted else []

    def _answer(self, names: list[str], work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on the index, brought up to date with ``names``; made again when it proves stale,
        kept in memory when its file cannot be used (damaged, a full disk, a folder it cannot write)."""
        with self._lock:
            for _ in range(3):
                try:
                    conn = self._connection()
                    for name in names:
                        self._catch_up(conn, name)
                    return work(conn)
                except Stale:
                    try:
                        self._forget(conn)
                    except sqlite3.DatabaseError:
                        self._conn, self._stuck = self._memory(), True
                except sqlite3.DatabaseError:
                    self._conn, self._stuck = self._memory(), True
        raise FunctAIError(f"the call log in {self.folder} kept changing while it was read; try again",
                           code="store-io")

    def _records(self, name: str, rows: list[Any], query: CallQuery | None) -> list[dict[str, Any]]:
        """The lines at ``(seq, length, *what the index keeps of them)``, each checked against the index
        (`Stale` where a line is not what the index says: changed in place since it was indexed), then
        against ``query``."""
        if not rows:
            return []
        found = []
        try:
            with open(os.path.join(self.folder, name), "rb") as handle:
                for seq, length, *kept in rows:
                    handle.seek(seq)
                    data, _ = parse_line(handle.read(length))
                    if data is None or (call_row(data) if name == LOG_FILE else rating_row(data)) != tuple(kept):
                        raise Stale(f"{name} at byte {seq}")
                    if query is None or query.matches(data):
                        found.append(data)
        except FileNotFoundError:
            raise Stale(name) from None
        except OSError as error:  # no permission to read it, a folder in its place
            raise unreadable(os.path.join(self.folder, name), error) from None
        return found

    def _skipped(self, conn: sqlite3.Connection, name: str) -> list[tuple[str, int, str]]:
        where = os.path.join(self.folder, name)
        return [(where, line, reason) for line, reason in
                conn.execute("SELECT line, reason FROM skipped WHERE name = ? ORDER BY line", (name,))]

    # -- keeping it up to date -----------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """The index file; in memory while the log is small (read whole, it costs little), and
        where the file cannot be used (the folder cannot be written, or was not writable before)."""
        path = os.path.join(self.folder, INDEX_FILE)
        if self._conn is not None and self._pid == os.getpid() and (
                self._file or self._stuck or not _worth_a_file(self.folder, path)):
            return self._conn
        self._conn, self._pid, self._file = None, os.getpid(), False
        if _worth_a_file(self.folder, path):
            for _ in range(2):
                try:
                    self._conn, self._file = _open(path), True
                    break
                except sqlite3.DatabaseError:  # not a database (damaged, or some other file): made again
                    _remove(path)
                except OSError:  # a folder this process cannot write
                    break
            self._stuck = not self._file
        self._conn = self._conn or self._memory()
        return self._conn

    def _memory(self) -> sqlite3.Connection:
        self._file = False
        return memory_index()

    def _forget(self, conn: sqlite3.Connection) -> None:
        """Have the next read index the files from their start. What the index holds is dropped only
        then, in the same transaction: a reader in another process that found it current meanwhile
        reads the old rows (each record checked against its line), never an empty index."""
        with _write(conn):
            conn.execute("DELETE FROM files")

    def _catch_up(self, conn: sqlite3.Connection, name: str) -> None:
        try:
            handle = open(os.path.join(self.folder, name), "rb")
        except FileNotFoundError:  # gone: so is what the index held of it
            if conn.execute("SELECT 1 FROM files WHERE name = ?", (name,)).fetchone():
                with _write(conn):
                    _clear(conn, name)
            return
        except OSError as error:  # no permission to read it, a folder in its place
            raise unreadable(os.path.join(self.folder, name), error) from None
        with handle:
            size = os.fstat(handle.fileno()).st_size
            if _start(conn, name, handle)[0] == size:  # nothing new: no write lock taken
                return
            with _write(conn):  # another process may have indexed it meanwhile: looked at again
                start, lines = _start(conn, name, handle)
                if start == 0:
                    _clear(conn, name)
                _index(conn, name, handle, start, lines)


def memory_index() -> sqlite3.Connection:
    """An empty index in memory."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    for statement in SCHEMA:
        conn.execute(statement)
    return conn


def answer(query: CallQuery, calls: list[tuple[int, dict[str, Any]]],
           ratings: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """What ``query`` picks from records read whole (a SQL log from before its index), by the same query."""
    conn = memory_index()
    try:
        _insert(conn, [(seq, 0, *call_row(data)) for seq, data in calls],
                [(seq, 0, *rating_row(data)) for seq, data in ratings], [])
        by_seq = dict(calls)
        text, params = query.sql("seq", "?")
        return [by_seq[seq] for (seq,) in conn.execute(text, params)]
    finally:
        conn.close()


def _worth_a_file(folder: str, path: str) -> bool:
    """Whether the index is kept in a file: once made, or once the log is larger than `SMALL`."""
    try:
        return os.path.exists(path) or os.stat(os.path.join(folder, LOG_FILE)).st_size > SMALL
    except OSError:
        return False


def _start(conn: sqlite3.Connection, name: str, handle: Any) -> tuple[int, int]:
    """Where indexing ``name`` goes on from (byte, lines so far): 0 when the file is not the one indexed."""
    row = conn.execute("SELECT inode, size, modified, lines, head, tail FROM files WHERE name = ?", (name,)).fetchone()
    if row is None:
        return 0, 0
    inode, size, modified, lines, head, tail = row
    status = os.fstat(handle.fileno())
    if inode != status.st_ino or size > status.st_size or _marks(handle, size) != (head, tail) or (
            size == status.st_size and modified != status.st_mtime_ns):  # the same size, written since: edited
        return 0, 0
    return size, lines


def _marks(handle: Any, size: int) -> tuple[bytes, bytes]:
    """The bytes at the start of the file and just before ``size``."""
    handle.seek(0)
    head = handle.read(min(size, _MARK))
    handle.seek(max(0, size - _MARK))
    return head, handle.read(size - max(0, size - _MARK))


def _index(conn: sqlite3.Connection, name: str, handle: Any, start: int, lines: int) -> None:
    """Index the whole lines from byte ``start`` on (a last line still being written waits)."""
    handle.seek(start)
    position, rest = start, b""
    calls, ratings, skipped = [], [], []
    while True:
        chunk = handle.read(_CHUNK)
        if not chunk:
            break
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        for raw in parts:
            lines += 1
            length = len(raw) + 1
            data, why = parse_line(raw)
            if data is not None and name == LOG_FILE:
                why = record_problem(data) or ""
                if not why:
                    calls.append((position, length, *call_row(data)))
            elif data is not None:
                if is_rating(data):
                    ratings.append((position, length, *rating_row(data)))
                else:
                    why = NOT_A_RATING
            if why:
                skipped.append((name, lines, why))
            position += length
        if len(calls) + len(ratings) > 5000:
            _insert(conn, calls, ratings, skipped)
            calls, ratings, skipped = [], [], []
    _insert(conn, calls, ratings, skipped)
    status = os.fstat(handle.fileno())
    conn.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (name, status.st_ino, position, status.st_mtime_ns if status.st_size == position else -1, lines,
                  *_marks(handle, position)))


def _insert(conn: sqlite3.Connection, calls: list[Any], ratings: list[Any], skipped: list[Any]) -> None:
    conn.executemany(f"INSERT INTO functai_calls VALUES ({', '.join('?' * (3 + len(COLUMNS)))})", calls)
    conn.executemany("INSERT INTO functai_ratings VALUES (?, ?, ?)", ratings)
    conn.executemany("INSERT INTO skipped VALUES (?, ?, ?)", skipped)


def _clear(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(f"DELETE FROM {_TABLES[name]}")
    conn.execute("DELETE FROM skipped WHERE name = ?", (name,))
    conn.execute("DELETE FROM files WHERE name = ?", (name,))


def _open(path: str) -> sqlite3.Connection:
    """The index file, made (0600) when missing; one of another version is emptied first."""
    if not os.path.exists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != VERSION:
            with _write(conn):
                for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                    conn.execute(f'DROP TABLE "{table}"')
                for statement in SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {VERSION}")
        conn.execute("PRAGMA synchronous = OFF")  # made again from the log whenever it is lost
    except BaseException:
        conn.close()
        raise
    return conn


def _remove(path: str) -> None:
    for suffix in ("", "-journal"):
        try:
            os.remove(path + suffix)
        except OSError:  # gone already, or not this process's to remove: then kept in memory
            pass


def _write(conn: sqlite3.Connection) -> Transaction:
    """A write transaction, taken at once (``BEGIN IMMEDIATE``): one process indexes at a time."""
    return Transaction(conn, "BEGIN IMMEDIATE")


_indexes: dict[str, LogIndex] = {}
_indexes_lock = threading.Lock()


def log_index(folder: str) -> LogIndex:
    """The index of the call log in ``folder`` (an absolute path), kept for the process."""
    with _indexes_lock:
        found = _indexes.get(folder)
        if found is None:
            found = _indexes[folder] = LogIndex(folder)
        return found


def close_index(folder: str) -> None:
    """Close the index kept for ``folder`` (a test's folder: one per test would pile up)."""
    with _indexes_lock:
        found = _indexes.pop(folder, None)
    if found is not None and found._conn is not None and found._pid == os.getpid():
        found._conn.close()
