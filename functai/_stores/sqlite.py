"""Conversations (and a call log) in one SQLite file: the embedded store.

WAL mode, so readers never block the writer; appends commit with
``synchronous=NORMAL`` (safe against a process crash), or ``FULL`` when
``sync=True`` (the connection keeps the level of its last write, switched only when
a write needs the other). Each append is one ``BEGIN IMMEDIATE`` transaction, so
``expect=`` is the same compare-and-set as the folder store's. The file is 0600.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from typing import Any
from urllib.parse import quote

from .._errors import FunctAIError
from .._files import fsync_file, make_folder, read_only, unwritable
from . import schema
from .callquery import COLUMNS, INDEXES
from .protocol import check_conversation_id
from .sql import READ_VERSION, SQLStore, prepare
from .urls import sqlite_path

__all__ = ["SQLiteStore", "open_sqlite"]

#: How long a writer waits for another process's transaction before giving up.
BUSY_SECONDS = 60.0

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS functai_records (conversation TEXT NOT NULL, position INTEGER NOT NULL, "
    "data TEXT NOT NULL, kind TEXT, turn TEXT, parent TEXT, PRIMARY KEY (conversation, position)) WITHOUT ROWID",
    schema.INDEX,
    "CREATE TABLE IF NOT EXISTS functai_calls (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, "
    "line TEXT NOT NULL, " + ", ".join(f"{name} TEXT" for name in COLUMNS) + ")",
    "CREATE TABLE IF NOT EXISTS functai_ratings (seq INTEGER PRIMARY KEY AUTOINCREMENT, call TEXT NOT NULL, "
    "line TEXT NOT NULL)",
    *INDEXES,
)
#: What brings a schema-2 call log up to schema 3.
ADD_CALL_COLUMNS = tuple(f"ALTER TABLE functai_calls ADD COLUMN {name} TEXT" for name in COLUMNS)


#: SQLite's result codes (the low byte) that mean the database cannot be written: READONLY, FULL, PERM.
_UNWRITABLE = frozenset({8, 13, 3})


def open_sqlite(url: str) -> "SQLiteStore":
    """The ``functai.stores`` factory for ``sqlite:`` URLs and ``.db``/``.sqlite``/``.sqlite3`` paths."""
    return SQLiteStore(sqlite_path(url))


class SQLiteStore(SQLStore):
    """Conversations in a SQLite file, safe across threads and processes (one connection per process)."""

    errors = sqlite3.Error
    branch_names = {"tip": ":tip", "conversation": ":c", "indexed": "INDEXED BY functai_records_turn"}

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.url = "sqlite:///" + self.path  # an absolute path: sqlite:////abs/file.db
        self._frozen: tuple[int, int, int, bool] | None = None
        #: Whether this process's connection commits with ``synchronous=FULL`` (else ``NORMAL``).
        self._full = False
        self._start()

    def _name(self) -> str:
        return f"the SQLite store {self.path}"

    def _open(self, write: bool) -> sqlite3.Connection | None:
        """A new connection; None when a read finds no file (only a write creates it)."""
        try:
            os.stat(self.path)
        except FileNotFoundError:
            if not write:
                return None
            self._create_file()
        except OSError as error:  # no permission to look, a file where a folder should be: not an empty store
            if write:
                raise unwritable(self.path, error, "SQLite store") from None
            raise FunctAIError(f"SQLite store {self.path}: could not read: {error.strerror}",
                               code="store-io") from None
        uri = self._uri()
        self._frozen = self._looks() if "immutable=1" in uri else None
        try:
            return sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as error:
            raise self._error("open", error) from error

    def _stale(self, conn: sqlite3.Connection) -> bool:
        """Whether a connection opened immutable no longer matches the file (its owner wrote since)."""
        if self._frozen is None or self._looks() == self._frozen:
            return False
        conn.close()
        return True

    def _looks(self) -> tuple[int, int, int, bool] | None:
        """The file's inode, size and modification time, and whether a ``-wal`` is beside it."""
        try:
            found = os.stat(self.path)
        except OSError:
            return None
        return found.st_ino, found.st_size, found.st_mtime_ns, os.path.exists(self.path + "-wal")

    def _uri(self) -> str:
        """The file as a URI that never creates it; ``immutable`` in a folder this process cannot write
        (which cannot hold the ``-shm`` a WAL read needs), unless a ``-wal`` may hold commits."""
        path = quote(self.path)
        folder = os.path.dirname(self.path)
        if not os.access(folder, os.W_OK) or read_only(folder):
            if not os.path.exists(self.path + "-wal"):
                return f"file:{path}?immutable=1"
        return f"file:{path}?mode=rw"

    def _schema(self, conn: sqlite3.Connection, write: bool) -> int:
        """`SQLStore._schema`, retried while other processes open the same new file: switching
        to WAL can answer "database is locked" without waiting on the busy timeout."""
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._full = False
                return super()._schema(conn, write)
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                if conn.in_transaction:
                    conn.rollback()
                time.sleep(random.uniform(0.005, 0.05))

    def _create_file(self) -> None:
        """Create the file as 0600 (and its folder as 0700) before SQLite does, whatever the umask."""
        try:
            make_folder(os.path.dirname(self.path))
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            return
        except OSError as error:  # a read-only disk, no permission, a file where the folder should be
            raise unwritable(self.path, error, "SQLite store") from None
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def _read_version(self, conn: sqlite3.Connection) -> Any:
        try:
            return conn.execute(READ_VERSION).fetchone()
        except sqlite3.OperationalError as error:
            if "no such table" not in str(error):
                raise
            return None  # a new file

    def _prepare(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
            raise FunctAIError(f"SQLite store {self.path}: WAL mode could not be set", code="store-io")
        with self._transaction(conn):  # the write lock: one process prepares, the others wait
            prepare(conn, SCHEMA, "?", ADD_CALL_COLUMNS)

    def _failed(self, error: BaseException, write: bool) -> FunctAIError:
        return self._error("create its tables" if write else "open", error)

    def _error(self, doing: str, error: Any, conn: Any = None) -> FunctAIError:
        """``store-unwritable`` when writing failed or cannot succeed; ``store-io`` otherwise."""
        code = getattr(error, "sqlite_errorcode", 0) & 0xFF
        text = str(error).lower()
        if code in _UNWRITABLE or doing == "append" or "readonly" in text or "is full" in text:
            return FunctAIError(
                f"cannot write the SQLite store at {self.path}: {error} (while trying to {doing}); free space, "
                "fix the permissions, or point it at another file",
                code="store-unwritable", path=self.path,
            )
        return FunctAIError(f"SQLite store {self.path}: could not {doing}: {error}", code="store-io")

    def _commit_level(self, conn: sqlite3.Connection, sync: bool) -> None:
        """``synchronous=FULL`` for a commit that must be on disk when it returns, ``NORMAL`` for
        any other write; a PRAGMA only when the connection's level is not already that one."""
        if sync != self._full:
            conn.execute("PRAGMA synchronous = FULL" if sync else "PRAGMA synchronous = NORMAL")
            self._full = bool(sync)

    def _transaction(self, conn: sqlite3.Connection, sync: bool = False) -> Any:
        """``BEGIN IMMEDIATE`` takes the write lock at once: the count an append reads is still
        the count when it writes."""
        self._commit_level(conn, sync)
        return Transaction(conn, "BEGIN IMMEDIATE")

    def _snapshot(self, conn: sqlite3.Connection) -> Any:
        return Transaction(conn, "BEGIN")

    def sync(self, conversation: str) -> None:
        """fsync the write-ahead log: every commit so far is then on disk."""
        check_conversation_id(conversation)
        fsync_file(self.path + "-wal")
        fsync_file(self.path)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"


class Transaction:
    """``begin`` … ``COMMIT`` on ``conn``, rolled back on any error (a class rather than a generator:
    every append runs through it). The folder call log's index (`functai._stores.logindex`) writes
    through it too."""

    __slots__ = ("conn", "begin")

    def __init__(self, conn: sqlite3.Connection, begin: str) -> None:
        self.conn, self.begin = conn, begin

    def __enter__(self) -> None:
        self.conn.execute(self.begin)

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is None:
            try:
                self.conn.execute("COMMIT")
                return
            except BaseException:
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        if self.conn.in_transaction:  # a full disk ends the transaction itself
            self.conn.execute("ROLLBACK")
