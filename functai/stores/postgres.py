"""Conversations (and a call log) in PostgreSQL, shared by every machine that can reach it.

Needs psycopg 3: ``pip install "psycopg[binary]>=3.1"`` (the ``postgres`` extra). Each record is a row
keyed by ``(conversation, position)``; an append reads the count and
inserts the next positions in one transaction, so two writers that saw the
same count cannot both insert — the second meets the primary key and gets
`StoreConflict` (with ``expect=``) or takes the next free places (without).
That is the folder store's compare-and-set, row by row, across machines.

An append with ``sync=True`` (a turn's end, a wait, a tool starting)
commits synchronously: it is on the server's disk when it returns, and so
is everything committed before it. Other appends (and call-log rows)
commit with ``synchronous_commit = off``, the session's setting: visible
to every reader at once and safe against any client crash, but a crash of
the server itself may lose the last fraction of a second of them (never
half of one). Records are kept as their JSON text, never re-encoded, so a
copy between stores keeps them byte for byte.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from .protocol import StoreConflict, _line, check_conversation_id, check_start
from ..errors import FunctAIError
from ..models.keys import hide_url, reveal
from . import schema
from .sql import READ_VERSION, SQLStore, log_column, prepare
from .urls import redact, split_url

__all__ = ["PostgresStore", "open_postgres"]

#: Taken while creating the tables, so two processes opening a new database do not race.
_SCHEMA_LOCK = 0x66756E6374

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS functai_records (conversation text NOT NULL, position bigint NOT NULL, "
    "data text NOT NULL, kind text, turn text, parent text, PRIMARY KEY (conversation, position))",
    schema.INDEX,
    "CREATE TABLE IF NOT EXISTS functai_calls (seq bigserial PRIMARY KEY, id text NOT NULL, line text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS functai_ratings (seq bigserial PRIMARY KEY, call text NOT NULL, line text NOT NULL)",
)

DRIVER_HINT = 'the PostgreSQL store needs psycopg 3: pip install "psycopg[binary]>=3.1"'


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as error:
        raise FunctAIError(f"{DRIVER_HINT} ({error})", code="store-driver-missing") from error
    return psycopg


def open_postgres(url: str) -> "PostgresStore":
    """The ``functai.stores`` factory for ``postgresql://`` (and ``postgres://``) URLs."""
    check_url(url)
    _psycopg()  # fail on use, with the extra to install, not on the first append
    return PostgresStore(url)


def check_url(url: str) -> None:
    """Refuse a URL whose host or port cannot be read, before anything connects.

    The message never repeats the URL: a password may be in it, and where the
    URL cannot be taken apart it cannot be left out either.
    """
    scheme, _, rest = url.partition(":")
    if split_url(url) is None or not rest.startswith("//"):
        raise FunctAIError(
            f"this {scheme}: URL cannot be read: write {scheme}://user@host:5432/dbname (an IPv6 host in "
            "brackets, as [::1]; the port a number)",
            code="store-url",
        )


class PostgresStore(SQLStore):
    """Conversations in a PostgreSQL database: one connection per process, shared by its threads."""

    def __init__(self, url: str) -> None:
        self._url = hide_url(url)  # the password in no frame or attribute repr (tracebacks with locals)
        #: The URL without its password: what records, messages and ``repr`` show.
        self.url = redact(url)
        self._start()

    def _reset_locks(self) -> None:
        self._lock = threading.Lock()
        if self._conn is not None:
            _detach(self._conn)
            self._conn = None

    # -- the connection --------------------------------------------------------------

    def _name(self) -> str:
        return f"the PostgreSQL store {self.url}"

    def _open(self, write: bool) -> Any:
        psycopg = _psycopg()
        try:
            conn = psycopg.connect(reveal(self._url), autocommit=True)
            # Commits do not wait for the server's disk unless a transaction asks (sync=True):
            # set once here, so an append or a call-log row costs no extra round trip.
            conn.execute("SET synchronous_commit = off")
        except psycopg.Error as error:
            # from None: the driver's frames hold the connection string, password and all
            raise FunctAIError(f"cannot connect to the PostgreSQL store {self.url}: {_first_line(error)}",
                               code="store-io") from None
        return conn

    def _stale(self, conn: Any) -> bool:
        """Whether the server ended the session while it was idle (a restart, ``pg_terminate_backend``,
        an idle timeout). Between statements the server sends nothing, so a socket with something to
        read (its goodbye, or the end of the stream) is a session that is over: it is replaced before
        anything is sent on it, so no write is lost or made twice."""
        if conn.closed or conn.broken:
            return True
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except Exception:  # no socket left to look at
            return True
        if readable:
            conn.close()
        return bool(readable)

    def _read_version(self, conn: Any) -> Any:
        try:
            return conn.execute(READ_VERSION).fetchone()
        except _psycopg().errors.UndefinedTable:
            return None

    def _prepare(self, conn: Any) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            prepare(conn, SCHEMA, "%s")

    def _failed(self, error: BaseException, write: bool) -> BaseException:
        if isinstance(error, _psycopg().Error):  # no right to create the tables, say
            return FunctAIError(f"PostgreSQL store {self.url}: could not prepare its tables: "
                                f"{_first_line(error)}", code=_code(error, write))
        return error

    def _run(self, doing: str, work: Any, empty: Any = None) -> Any:
        """Run ``work(conn)`` under the lock (``empty`` when a read finds no tables).

        A connection lost while it is used is reopened next time and reported
        as ``store-io`` (the server could not be reached; whether a write
        reached it is unknown), never as a store that refuses writes.
        """
        psycopg = _psycopg()
        with self._lock:
            conn = self._connection(doing == "append")
            if conn is None:
                return empty
            try:
                return work(conn)
            except psycopg.Error as error:  # a lost connection, a full disk, missing rights, …
                lost = conn.closed or conn.broken
                if lost:
                    self._conn = None
                raise FunctAIError(f"PostgreSQL store {self.url}: could not {doing}: {_first_line(error)}"
                                   + (" (the connection to the server was lost)" if lost else ""),
                                   code="store-io" if lost else _code(error, doing == "append")) from error

    # -- the Store protocol ---------------------------------------------------------------

    def read(self, conversation: str, start: int = 0) -> list[dict[str, Any]]:
        check_conversation_id(conversation)
        check_start(start)
        rows = self._run("read", lambda conn: conn.execute(
            "SELECT data FROM functai_records WHERE conversation = %s AND position >= %s ORDER BY position",
            (conversation, start)).fetchall(), [])
        return [schema.record_of(data) for (data,) in rows]

    def count(self, conversation: str) -> int:
        check_conversation_id(conversation)
        return self._run("read", lambda conn: _count(conn, conversation), 0)  # type: ignore[no-any-return]

    def append(
        self,
        conversation: str,
        records: Sequence[dict[str, Any]],
        *,
        expect: int | None = None,
        sync: bool = False,
    ) -> int:
        check_conversation_id(conversation)
        lines = [_line(record) for record in records]  # a bad record appends nothing
        unique = _psycopg().errors.UniqueViolation

        def work(conn: Any) -> int:
            while True:
                try:
                    with conn.transaction():
                        if sync:
                            conn.execute("SET LOCAL synchronous_commit = on")
                        current = _count(conn, conversation)
                        if expect is not None and current != expect:
                            raise StoreConflict(count=current, conversation=conversation)
                        if len(lines) == 1:
                            conn.execute("INSERT INTO functai_records (conversation, position, data, kind, turn, "
                                         "parent) VALUES (%s, %s, %s, %s, %s, %s)",
                                         (conversation, current, lines[0], *schema.columns(records[0])))
                        elif lines:
                            with conn.cursor() as cursor:
                                cursor.executemany(
                                    "INSERT INTO functai_records (conversation, position, data, kind, turn, parent) "
                                    "VALUES (%s, %s, %s, %s, %s, %s)",
                                    [(conversation, current + i, line, *schema.columns(record))
                                     for i, (line, record) in enumerate(zip(lines, records))],
                                )
                    return current + len(lines)
                except unique:  # another writer took these positions first
                    if expect is not None:
                        raise StoreConflict(count=_count(conn, conversation), conversation=conversation) from None

        return self._run("append", work)  # type: ignore[no-any-return]

    def sync(self, conversation: str) -> None:
        """Wait until every commit so far is on the server's disk.

        A synchronous commit of a transaction that has an id flushes the
        write-ahead log up to itself, which is after every earlier commit.
        """
        check_conversation_id(conversation)

        def work(conn: Any) -> None:
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = on")
                conn.execute("SELECT txid_current()")

        self._run("sync", work)

    def read_branch(self, conversation: str, tip: str) -> tuple[list[tuple[int, dict[str, Any]]], int]:
        """The records of the branch ending at turn ``tip`` with their positions, and the
        record count they were read at: what a view pinned to that turn needs, and no more."""
        check_conversation_id(conversation)

        def work(conn: Any) -> tuple[list[Any], int]:
            sql = schema.branch_sql(self.old_schema, tip="%(tip)s::text", conversation="%(c)s", indexed="")
            with conn.transaction():  # one snapshot for the records and the count
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                rows = conn.execute(sql, {"c": conversation, "tip": tip}).fetchall()
                return rows, _count(conn, conversation)

        rows, count = self._run("read", work, ([], 0))
        return [(int(position), schema.record_of(data)) for position, data in rows], count

    def conversations(self) -> list[str]:
        rows = self._run("read", lambda conn: conn.execute(
            "SELECT DISTINCT conversation FROM functai_records").fetchall(), [])
        return sorted(name for (name,) in rows)

    # -- the call log (see functai.stores.calllog) ----------------------------------------

    def log_lines(self, table: str, items: Sequence[tuple[str, str]]) -> None:
        """Append (key, JSON line) pairs to ``calls`` or ``ratings``, in one transaction."""
        column = log_column(table)

        def work(conn: Any) -> None:
            # As the folder's call log (written, not fsynced): the session's commits do not wait for the disk.
            if len(items) == 1:  # one statement, its own transaction: one round trip per call
                conn.execute(f"INSERT INTO functai_{table} ({column}, line) VALUES (%s, %s)", items[0])
                return
            with conn.transaction(), conn.cursor() as cursor:
                cursor.executemany(f"INSERT INTO functai_{table} ({column}, line) VALUES (%s, %s)", list(items))

        self._run("append", work)

    def read_log(self, table: str) -> Iterator[str]:
        """The JSON lines of ``calls`` or ``ratings``, oldest first."""
        log_column(table)
        rows = self._run("read", lambda conn: conn.execute(f"SELECT line FROM functai_{table} ORDER BY seq").fetchall(),
                         [])
        return (line for (line,) in rows)

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"


def _count(conn: Any, conversation: str) -> int:
    (found,) = conn.execute("SELECT MAX(position) FROM functai_records WHERE conversation = %s",
                            (conversation,)).fetchone()
    return 0 if found is None else int(found) + 1


#: SQLSTATEs (or their class) that mean the database cannot be written: a read-only transaction
#: or server, missing rights, a full disk or quota (class 53: insufficient resources).
_UNWRITABLE = ("25006", "42501", "53")


def _code(error: Any, writing: bool) -> str:
    """``store-unwritable`` for a failed write or a database that cannot be written, else ``store-io``."""
    state = getattr(error, "sqlstate", None) or ""
    return "store-unwritable" if writing or state.startswith(_UNWRITABLE) else "store-io"


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _detach(conn: Any) -> None:
    """Make an inherited connection harmless in a forked child.

    Its socket is the parent's: closing it here would end the parent's
    session, so the descriptor is pointed at /dev/null and the object kept.
    """
    try:
        fd = conn.fileno()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, fd)
        os.close(null)
    except Exception:  # already closed or broken: nothing of the parent's to protect
        pass
    _orphans.append(conn)


_orphans: list[Any] = []
