"""What the SQLite and PostgreSQL stores share: the `Store` methods and the call log, written once.

Their SQL differs only in the parameter marker (``?`` or ``%s``). A read
creates and changes nothing (an older schema is read as it is); the first
write creates the tables or migrates them; a newer schema is refused.
"""

from __future__ import annotations

import os
import threading
from operator import itemgetter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, closing
from typing import Any, Callable

from .._errors import FunctAIError
from .._logfiles import record_problem
from . import schema
from .callquery import COLUMNS, INDEXES, CallQuery, columns
from .protocol import StoreConflict, check_conversation_id, check_start, forkable, no_record, rows_in, to_line
from .urls import SCHEMA_VERSION

META = "CREATE TABLE IF NOT EXISTS functai_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
READ_VERSION = "SELECT value FROM functai_meta WHERE key = 'schema'"
COUNT = "SELECT MAX(position) FROM functai_records WHERE conversation = ?"
INSERT = "INSERT INTO functai_records (conversation, position, data, kind, turn, parent) VALUES (?, ?, ?, ?, ?, ?)"
READ = "SELECT data, position FROM functai_records WHERE conversation = ? AND position >= ? ORDER BY position"
#: `READ` as one value (what an open decodes in one go): fetching one value instead of a row per
#: record halves a long conversation's read, and fetching it as bytes (which the decoder reads as
#: they are) rather than text saves making a str of it. SQLite promises no order inside an aggregate
#: (before 3.44 none can be asked for), so the positions come along, joined in the same pass, and
#: are checked.
READ_JOINED = ("SELECT CAST(group_concat(data, char(10)) AS BLOB), count(*), group_concat(position) "
               "FROM functai_records WHERE conversation = ? AND position >= ?")


class SQLStore:
    """The `Store` protocol and the call log over one connection per process, made on first use
    (shared by its threads, left to the parent across a fork, replaced when stale)."""

    _conn: Any
    #: How records and messages name the store (never with a password).
    url: str
    marker = "?"
    errors: Any = ()
    #: How `schema.branch_sql` names the parameters of a branch read in this driver.
    branch_names: dict[str, str] = {}
    #: The driver's `READ_JOINED`: (UTF-8 bytes, count, the positions as joined, or where the order is promised
    #: the last position).
    read_joined = READ_JOINED

    def _start(self) -> None:
        self._count_sql, self._insert_sql = self._sql(COUNT), self._sql(INSERT)
        self._lock = threading.Lock()
        self._conn = None
        self._pid = 0
        #: The schema version of the tables on this process's connection (None: not looked at, 0: no tables).
        self._tables: int | None = None
        forkable.add(self)

    def _reset_locks(self) -> None:
        """In a forked child: a new lock, and the parent's connection kept unused, never closed here
        (closing it could end the parent's session, or touch its SQLite WAL)."""
        self._lock = threading.Lock()
        if self._conn is not None:
            self._leave(self._conn)
            _orphans.append(self._conn)
            self._conn = None

    def _leave(self, conn: Any) -> None:
        """Make an inherited connection harmless in a forked child."""

    def _sql(self, text: str) -> str:
        return text.replace("?", self.marker)

    def _connection(self, write: bool = False) -> Any:
        """This process's connection, its tables ready for ``write``; None when a read finds none."""
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
                if isinstance(error, self.errors):
                    raise self._failed(error, write) from error
                raise
        return conn if self._tables else None

    def _schema(self, conn: Any, write: bool) -> int:
        """The schema version ready on ``conn`` (0: no tables; a write creates or migrates them)."""
        row = self._read_version(conn)
        found = 0 if row is None else version_of(row[0])
        if found > SCHEMA_VERSION:  # its tables may hold what this version would get wrong
            raise FunctAIError(
                f"{self._name()} was written by a newer functai (store schema {row[0]}; this version reads up to "
                f"{SCHEMA_VERSION}); upgrade functai to use it, or copy it with the newer version",
                code="store-version",
            )
        if found == SCHEMA_VERSION or not write:
            return found
        self._prepare(conn)
        return SCHEMA_VERSION

    # -- what each driver says ------------------------------------------------------

    def _name(self) -> str:
        return f"the SQL store {self.url}"

    def _open(self, write: bool) -> Any:
        raise NotImplementedError

    def _stale(self, conn: Any) -> bool:
        return False

    def _read_version(self, conn: Any) -> Any:
        raise NotImplementedError

    def _prepare(self, conn: Any) -> None:
        raise NotImplementedError

    def _failed(self, error: BaseException, write: bool) -> FunctAIError:
        """The error for a driver's ``error`` while its tables were looked at or prepared."""
        raise NotImplementedError

    def _error(self, doing: str, error: Any, conn: Any) -> FunctAIError:
        raise NotImplementedError

    def _transaction(self, conn: Any, sync: bool = False) -> AbstractContextManager[Any]:
        """One transaction; with ``sync``, its commit is on disk when it returns."""
        raise NotImplementedError

    def _commit_level(self, conn: Any, sync: bool) -> None:
        """Make the next commit outside `_transaction` durable as ``sync`` says (where the driver needs it)."""

    def _snapshot(self, conn: Any) -> AbstractContextManager[Any]:
        """A read-only transaction: its reads see one state of the store."""
        return self._transaction(conn)

    def _run(self, doing: str, work: Callable[[Any], Any], empty: Any = None) -> Any:
        """``work(conn)`` under the lock; ``empty`` when a read finds no tables."""
        with self._lock:
            conn = self._connection(doing == "append")
            if conn is None:
                return empty
            try:
                return work(conn)
            except self.errors as error:
                raise self._error(doing, error, conn) from error

    def _count(self, conn: Any, conversation: str) -> int:
        (found,) = conn.execute(self._count_sql, (conversation,)).fetchone()
        if found is not None and type(found) is not int:
            raise self._misplaced(conversation, found)
        return 0 if found is None else found + 1

    def _misplaced(self, conversation: str, position: Any) -> FunctAIError:
        """A row's position edited by hand into something that is no place (text, a fraction, one
        far past the rest): no record can be read in order, so none is guessed at."""
        return FunctAIError(f"conversation {conversation!r} in {self._name()} has a record at position {position!r}, "
                            "which no writer gives (edited by hand?); give it back its position, counting from 0",
                            code="store-unreadable")

    # -- the Store protocol --------------------------------------------------------

    def _data(self, conversation: str, start: int) -> list[tuple[str | None]]:
        """The JSON of each record from ``start``, in order (one query); None for a position whose row
        was removed (by hand), so every record keeps its place and the count (`COUNT`) its meaning."""
        check_conversation_id(conversation)
        check_start(start)
        rows = self._run("read", lambda conn: conn.execute(self._sql(READ), (conversation, start)).fetchall(), [])
        found: list[tuple[str | None]] = []
        for data, position in rows:
            if type(position) is not int or position - start - len(found) > len(rows):
                raise self._misplaced(conversation, position)
            found += [(None,)] * (position - start - len(found))
            found.append((data,))
        return found

    def read(self, conversation: str, start: int = 0) -> list[dict[str, Any]]:
        return [schema.record_of(data) for (data,) in self._data(conversation, start)]

    def read_rows(self, conversation: str, start: int = 0) -> tuple[list[Any], Callable[[int], dict[str, Any]]]:
        """As `read`, decoded in one go only as far as an open needs (`protocol.rows_in`); and the
        whole record at a position of that list."""
        check_conversation_id(conversation)
        check_start(start)
        joined = self._run("read", lambda conn: conn.execute(self._sql(self.read_joined), (conversation, start))
                           .fetchone(), None)
        if joined is None or not joined[1]:
            return [], no_record
        text, count, positions = joined
        if (positions == start + count - 1 if isinstance(positions, int)  # in order: then no position is missing
                else positions == ",".join(map(str, range(start, start + count)))):
            found = rows_in(text, count)
            if found is not None:
                lines: list[str | None] = []

                def whole(position: int) -> dict[str, Any]:
                    if position == 0 and not lines:  # the header, which every open reads: its first line, if whole
                        head = schema.record_of((text[: text.find(b"\n")] if count > 1 else text).decode())
                        if schema.UNUSABLE not in head:
                            return head
                    if not lines:
                        one_per_line = text.count(b"\n") == count - 1  # else a record spans lines (written by hand)
                        lines.extend(text.decode().split("\n") if one_per_line else
                                     [data for (data,) in self._data(conversation, start)])
                    return schema.record_of(lines[position])

                return found, whole
        rows = self._data(conversation, start)  # out of order, or a record rows do not read: one row each
        complete = all(type(data) is str for (data,) in rows)  # else a row was removed, or is not text:
        # each read as `read` does
        found = (rows_in("\n".join(map(itemgetter(0), rows)), len(rows)) if rows else []) if complete else None
        if found is None:  # a row rows do not read (not JSON, say): each read as `read` reads it
            found = [schema.record_of(data) for (data,) in rows]
        return found, lambda position: schema.record_of(rows[position][0])

    def count(self, conversation: str) -> int:
        check_conversation_id(conversation)
        return self._run("read", lambda conn: self._count(conn, conversation), 0)  # type: ignore[no-any-return]

    def append(self, conversation: str, records: Sequence[dict[str, Any]], *, expect: int | None = None,
               sync: bool = False) -> int:
        check_conversation_id(conversation)
        rows = [(to_line(record), *schema.columns(record)) for record in records]  # a bad record appends nothing
        return self._run("append", lambda conn: self._append(conn, conversation, rows, expect, sync))  # type: ignore[no-any-return]

    def _append(self, conn: Any, conversation: str, rows: list[tuple[Any, ...]], expect: int | None,
                sync: bool) -> int:
        """Read the count and insert the next positions in one transaction (a compare-and-set with ``expect``)."""
        with self._transaction(conn, sync):
            current = self._count(conn, conversation)
            if expect is not None and current != expect:
                raise StoreConflict(count=current, conversation=conversation)
            values = [(conversation, current + i, *row) for i, row in enumerate(rows)]
            execute_many(conn, self._insert_sql, values)
        return current + len(rows)

    def read_branch(self, conversation: str, tip: str) -> tuple[list[tuple[int, dict[str, Any]]], int]:
        """The records of the branch ending at turn ``tip`` with their positions, and the count they were read at."""
        check_conversation_id(conversation)

        def work(conn: Any) -> tuple[list[Any], int]:
            sql = schema.branch_sql(self._tables != SCHEMA_VERSION, **self.branch_names)  # an older schema
            with self._snapshot(conn):  # one snapshot for the records and the count
                rows = conn.execute(sql, {"c": conversation, "tip": tip}).fetchall()
                return rows, self._count(conn, conversation)

        rows, count = self._run("read", work, ([], 0))
        return [(int(position), schema.record_of(data)) for position, data in rows], count

    def conversations(self) -> list[str]:
        rows = self._run("read", lambda conn: conn.execute(
            "SELECT DISTINCT conversation FROM functai_records").fetchall(), [])
        return sorted(name for (name,) in rows)

    # -- the call log (see functai._stores.calllog) -----------------------------------------

    def log_lines(self, table: str, items: Sequence[tuple[Any, ...]]) -> None:
        """Append rows to ``calls`` (id, line, then its `COLUMNS`) or ``ratings`` (call, line), in one transaction."""
        names = LOG_COLUMNS[table]
        insert = self._sql(f"INSERT INTO functai_{table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})")

        def work(conn: Any) -> None:
            if len(items) == 1:  # its own transaction: one round trip per logged call
                self._commit_level(conn, False)
                conn.execute(insert, items[0])
                return
            with self._transaction(conn):
                execute_many(conn, insert, list(items))

        self._run("append", work)

    def read_log(self, table: str) -> Iterator[str]:
        """The JSON lines of ``calls`` or ``ratings``, oldest first."""
        LOG_COLUMNS[table]  # noqa: B018  (a table of the call log, or KeyError: never other SQL)
        rows = self._run("read", lambda conn: conn.execute(f"SELECT line FROM functai_{table} ORDER BY seq").fetchall(),
                         [])
        return (line for (line,) in rows)

    def find_calls(self, query: CallQuery) -> list[tuple[int, str]] | None:
        """``(seq, line)`` of the calls ``query`` picks, from the indexed columns; None when the
        tables predate them (then the log is read whole; its next write adds them)."""
        text, params = query.sql("seq, line", self.marker)

        def work(conn: Any) -> Any:
            if self._tables != SCHEMA_VERSION:
                return None
            unfilled = conn.execute("SELECT seq, line FROM functai_calls WHERE started IS NULL").fetchall()
            if unfilled:  # written by an older version since the columns were added (a rolling upgrade)
                try:
                    with self._transaction(conn):
                        fill_columns(conn, self.marker, unfilled)
                except self.errors:  # not to be written here (a user who may only read): read whole
                    return None
            return [(seq, line) for seq, line in conn.execute(text, params).fetchall()]

        return self._run("read", work, [])  # type: ignore[no-any-return]

    def find_ratings(self, ids: Sequence[str]) -> list[tuple[int, str]]:
        """``(seq, line)`` of the ratings of the calls ``ids``, in the order they were written."""
        if not ids:
            return []
        marks = ", ".join([self.marker] * len(ids))
        return self._run("read", lambda conn: conn.execute(  # type: ignore[no-any-return]
            f"SELECT seq, line FROM functai_ratings WHERE call IN ({marks}) ORDER BY seq", list(ids)).fetchall(), [])

    def where(self, conversation: str, index: int) -> str:
        """Where record ``index`` is, as damage is reported."""
        return f"{self.url} conversation {conversation!r} position {index}"

    def close(self) -> None:
        """Close this process's connection (the next use opens a new one)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()


def prepare(conn: Any, tables: tuple[str, ...], marker: str, add_call_columns: tuple[str, ...]) -> None:
    """Create the tables, or bring an older schema up to date, inside the caller's transaction.

    The version is read again under the caller's lock: another process may have done it meanwhile.
    """
    conn.execute(META)
    row = conn.execute(READ_VERSION).fetchone()
    if row is None:
        for statement in tables:
            conn.execute(statement)
        conn.execute(f"INSERT INTO functai_meta VALUES ('schema', {marker})", (str(SCHEMA_VERSION),))
        return
    found = version_of(row[0])
    if found == 1:
        for statement in schema.ADD_COLUMNS:
            conn.execute(statement)
        rows = conn.execute("SELECT conversation, position, data FROM functai_records").fetchall()
        update = "UPDATE functai_records SET kind = ?, turn = ?, parent = ? WHERE conversation = ? AND position = ?"
        execute_many(conn, update.replace("?", marker), schema.backfill(rows))
        conn.execute(schema.INDEX)
    if found <= 2:  # schema 3: the call log's columns, filled from its lines, and their indexes
        for statement in add_call_columns:
            conn.execute(statement)
        fill_columns(conn, marker, conn.execute("SELECT seq, line FROM functai_calls").fetchall())
        for statement in INDEXES:
            conn.execute(statement)
    conn.execute(f"UPDATE functai_meta SET value = {marker} WHERE key = 'schema'", (str(SCHEMA_VERSION),))


def fill_columns(conn: Any, marker: str, rows: list[tuple[int, str]]) -> None:
    """Fill the indexed columns of the call log's rows ``(seq, line)`` from their lines."""
    update = f"UPDATE functai_calls SET {', '.join(f'{name} = ?' for name in COLUMNS)} WHERE seq = ?"
    execute_many(conn, update.replace("?", marker), [(*log_columns(line), seq) for seq, line in rows])


def log_columns(line: str) -> tuple[str | None, ...]:
    """The indexed columns of a logged call's line; for a line that is not a record, none but an
    empty ``started``, which says it was looked at (a row without one is filled on the next read)."""
    record = schema.record_of(line)
    return columns(record) if record_problem(record) is None else ("", *(None,) * (len(COLUMNS) - 1))


def execute_many(conn: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """Run ``sql`` for each row: one row as one statement (one round trip)."""
    if len(rows) == 1:
        conn.execute(sql, rows[0])
    elif rows:
        with closing(conn.cursor()) as cursor:
            cursor.executemany(sql, rows)


def version_of(value: object) -> int:
    if isinstance(value, bytes):  # a PostgreSQL database in SQL_ASCII gives text columns as bytes
        value = value.decode("ascii", errors="replace")
    try:
        return int(str(value))
    except ValueError:
        return SCHEMA_VERSION + 1  # not a number this version knows: treat as newer


#: Connections inherited through fork (see `SQLStore._reset_locks`).
_orphans: list[Any] = []

#: The columns of the call log's tables that an append fills.
LOG_COLUMNS = {"calls": ("id", "line", *COLUMNS), "ratings": ("call", "line")}
