"""What the SQLite and PostgreSQL stores share, whatever their driver.

Both keep one connection per process, shared by its threads and left to the
parent across a fork; both gate on the schema version written in
``functai_meta`` (refusing a newer one, creating or migrating an older one);
both keep a call log in the same two tables. The SQL they run differs only in
the parameter marker (``?`` or ``%s``), so the schema work is written once.
"""

from __future__ import annotations

import os
import threading
from contextlib import closing
from typing import Any

from ..conversations.store import _forkable
from ..errors import FunctAIError
from . import schema
from .urls import SCHEMA_VERSION

#: The schema version is a row of this table.
META = "CREATE TABLE IF NOT EXISTS functai_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
READ_VERSION = "SELECT value FROM functai_meta WHERE key = 'schema'"


class SQLStore:
    """One connection per process: made on first use, closed by `close`."""

    _conn: Any
    #: How records and messages name the store (never with a password).
    url: str

    def _start(self) -> None:
        self._lock = threading.Lock()
        self._conn = None
        self._pid = 0
        self._ready = False  # the tables are known to be there (on this process's connection)
        _forkable.add(self)  # its `_reset_locks` runs in a forked child

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
