"""What the SQLite and PostgreSQL stores share, whatever their driver.

Both keep one connection per process, shared by its threads and left to the
parent across a fork, replaced when it has gone stale; both gate on the
schema version written in ``functai_meta`` (refusing a newer one; creating
the tables or migrating an older schema on the first write, while a read
changes nothing and reads an older schema as it is); both keep a call log
in the same two tables. The SQL they run differs only in
the parameter marker (``?`` or ``%s``), so the schema work is written once.
"""

from __future__ import annotations

import os
import threading
from contextlib import closing
from typing import Any

from .protocol import _forkable
from ..errors import FunctAIError
from . import schema
from .urls import SCHEMA_VERSION

#: The schema version is a row of this table.
META = "CREATE TABLE IF NOT EXISTS functai_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
READ_VERSION = "SELECT value FROM functai_meta WHERE key = 'schema'"


class SQLStore:
    """One connection per process: made on first use, closed by `close`.

    A store says how to open a connection (`_open`), when one has gone stale
    (`_stale`), how to read the schema version and prepare the tables
    (`_read_version`, `_prepare`), and what a driver's error means (`_failed`).
    """

    _conn: Any
    #: How records and messages name the store (never with a password).
    url: str

    def _start(self) -> None:
        self._lock = threading.Lock()
        self._conn = None
        self._pid = 0
        #: The schema of the tables on this process's connection: None not yet looked at, 0 no tables,
        #: else its version (an older one is read as it is, and brought up to date by the first write).
        self._tables: int | None = None
        _forkable.add(self)  # its `_reset_locks` runs in a forked child

    def _connection(self, write: bool = False) -> Any:
        """This process's connection, its tables ready for ``write`` or a read; None when a read
        finds nothing stored yet (a read creates nothing and changes nothing)."""
        conn = self._conn
        if conn is None or self._pid != os.getpid() or self._stale(conn):
            conn = self._open(write)
            if conn is None:
                return None
            self._conn, self._pid, self._tables = conn, os.getpid(), None
        if not self._tables or (write and self._tables != SCHEMA_VERSION):  # no tables yet: looked for again
            try:
                self._tables = self._schema(conn, write)
            except BaseException as error:
                self._conn = None
                conn.close()
                failed = self._failed(error, write)
                if failed is error:
                    raise
                raise failed from error
        return conn if self._tables else None

    def _schema(self, conn: Any, write: bool) -> int:
        """The schema version ready on ``conn``: a write creates the tables or brings an older
        schema up to date; a read takes what is there (0: no tables). A newer one is refused."""
        row = self._read_version(conn)
        if schema_is_current(row, self._name()):
            return SCHEMA_VERSION
        if not write:
            return 0 if row is None else version_of(row[0])
        self._prepare(conn)
        return SCHEMA_VERSION

    @property
    def old_schema(self) -> bool:
        """Whether the tables read are an older schema's (without the indexed columns a branch needs)."""
        return self._tables is not None and 0 < self._tables < SCHEMA_VERSION

    def _name(self) -> str:
        """The store as a message names it, e.g. ``the SQLite store /path/x.db``."""
        return f"the SQL store {self.url}"

    def _open(self, write: bool) -> Any:
        raise NotImplementedError

    def _stale(self, conn: Any) -> bool:
        return False

    def _read_version(self, conn: Any) -> Any:
        raise NotImplementedError

    def _prepare(self, conn: Any) -> None:
        raise NotImplementedError

    def _failed(self, error: BaseException, write: bool) -> BaseException:
        return error

    def where(self, conversation: str, index: int) -> str:
        """Where record ``index`` is, as a SQL query finds it (damage is reported with this)."""
        return f"{self.url} conversation {conversation!r} position {index}"

    def close(self) -> None:
        """Close this process's connection (the next use opens a new one)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()


def schema_is_current(row: Any, where: str) -> bool:
    """Whether the version ``row`` read from ``functai_meta`` (None: no table yet) needs no work.

    A newer version is refused: its tables may hold what this version would get wrong.
    """
    if row is not None and version_of(row[0]) > SCHEMA_VERSION:
        raise version_error(where, row[0])
    return row is not None and version_of(row[0]) == SCHEMA_VERSION


def prepare(conn: Any, tables: tuple[str, ...], marker: str) -> None:
    """Create the tables, or bring schema 1 up to date, inside the caller's transaction.

    The version is read again here, under the caller's lock: another process
    may have done the work while this one waited.
    """
    conn.execute(META)
    row = conn.execute(READ_VERSION).fetchone()
    if row is None:
        for statement in tables:
            conn.execute(statement)
        conn.execute(f"INSERT INTO functai_meta VALUES ('schema', {marker})", (str(SCHEMA_VERSION),))
    elif version_of(row[0]) == 1:
        for statement in schema.ADD_COLUMNS:
            conn.execute(statement)
        rows = conn.execute("SELECT conversation, position, data FROM functai_records").fetchall()
        update = "UPDATE functai_records SET kind = ?, turn = ?, parent = ? WHERE conversation = ? AND position = ?"
        with closing(conn.cursor()) as cursor:
            cursor.executemany(update.replace("?", marker), schema.backfill(rows))
        conn.execute(schema.INDEX)
        conn.execute(f"UPDATE functai_meta SET value = {marker} WHERE key = 'schema'", (str(SCHEMA_VERSION),))


def version_of(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return SCHEMA_VERSION + 1  # not a number this version knows: treat as newer


def version_error(where: str, found: object) -> FunctAIError:
    return FunctAIError(
        f"{where} was written by a newer functai (store schema {found}; this version reads up to "
        f"{SCHEMA_VERSION}); upgrade functai to use it, or copy it with the newer version",
        code="store-version",
    )


def log_column(table: str) -> str:
    """The key column of call-log table ``calls`` or ``ratings``."""
    if table == "calls":
        return "id"
    if table == "ratings":
        return "call"
    raise ValueError(f"no log table {table!r}")
