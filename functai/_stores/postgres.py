"""Conversations (and a call log) in PostgreSQL, shared by every machine that can reach it.

Needs psycopg 3 (the ``postgres`` extra). Two writers that read the same count
meet the primary key ``(conversation, position)``: the second gets `StoreConflict`
(with ``expect=``) or takes the next free places. Appends commit with
``synchronous_commit = off`` (safe against a client crash; a server crash may lose
the last fraction of a second), except ``sync=True`` ones, on disk when they return.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._errors import FunctAIError
from .._models.keys import hide_url, reveal
from . import schema
from .callquery import COLUMNS, INDEXES
from .protocol import StoreConflict, check_conversation_id
from .sql import READ_VERSION, SQLStore, prepare
from .urls import redact, split_url

__all__ = ["PostgresStore", "open_postgres"]

#: Taken while creating the tables, so two processes opening a new database do not race.
_SCHEMA_LOCK = 0x66756E6374

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS functai_records (conversation text NOT NULL, position bigint NOT NULL, "
    "data text NOT NULL, kind text, turn text, parent text, PRIMARY KEY (conversation, position))",
    schema.INDEX,
    # COLLATE "C": ids and times compare byte by byte, as in SQLite (a page's order, an id's prefix)
    'CREATE TABLE IF NOT EXISTS functai_calls (seq bigserial PRIMARY KEY, id text COLLATE "C" NOT NULL, '
    "line text NOT NULL, " + ", ".join(f'{name} text COLLATE "C"' for name in COLUMNS) + ")",
    "CREATE TABLE IF NOT EXISTS functai_ratings (seq bigserial PRIMARY KEY, call text NOT NULL, line text NOT NULL)",
    *INDEXES,
)
#: What brings a schema-2 call log up to schema 3.
ADD_CALL_COLUMNS = ('ALTER TABLE functai_calls ALTER COLUMN id TYPE text COLLATE "C"',
                    *(f'ALTER TABLE functai_calls ADD COLUMN {name} text COLLATE "C"' for name in COLUMNS))


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as error:
        raise FunctAIError(f'the PostgreSQL store needs psycopg 3: pip install "psycopg[binary]>=3.1" ({error})',
                           code="store-driver-missing") from error
    return psycopg


def open_postgres(url: str) -> "PostgresStore":
    """The ``functai.stores`` factory for ``postgresql://`` (and ``postgres://``) URLs."""
    check_url(url)
    _psycopg()  # fail here, with the extra to install, not on the first append
    return PostgresStore(url)


def check_url(url: str) -> None:
    """Refuse a URL whose host or port cannot be read, before anything connects (without
    repeating it: where the URL cannot be taken apart, its password cannot be left out)."""
    scheme, _, rest = url.partition(":")
    if split_url(url) is None or not rest.startswith("//"):
        raise FunctAIError(
            f"this {scheme}: URL cannot be read: write {scheme}://user@host:5432/dbname (an IPv6 host in "
            "brackets, as [::1]; the port a number)",
            code="store-url",
        )


class PostgresStore(SQLStore):
    """Conversations in a PostgreSQL database: one connection per process, shared by its threads."""

    marker = "%s"
    branch_names = {"tip": "%(tip)s::text", "conversation": "%(c)s", "indexed": ""}
    read_joined = ("SELECT convert_to(string_agg(data, E'\\n' ORDER BY position), 'UTF8'), count(*), max(position) "
                   "FROM functai_records WHERE conversation = ? AND position >= ?")

    def __init__(self, url: str) -> None:
        self._url = hide_url(url)  # the password in no frame or attribute repr (tracebacks with locals)
        #: The URL without its password: what records, messages and ``repr`` show.
        self.url = redact(url)
        self._start()

    def _name(self) -> str:
        return f"the PostgreSQL store {self.url}"

    def _open(self, write: bool) -> Any:
        psycopg = _psycopg()
        try:
            conn = psycopg.connect(reveal(self._url), autocommit=True)
            conn.execute("SET synchronous_commit = off")  # once here: no extra round trip per append
        except psycopg.Error as error:
            # from None: the driver's frames hold the connection string, password and all
            raise FunctAIError(f"cannot connect to the PostgreSQL store {self.url}: {_first_line(error)}",
                               code="store-io") from None
        return conn

    def _stale(self, conn: Any) -> bool:
        """Whether the server ended the session while it was idle. Between statements it sends
        nothing, so a readable socket (its goodbye) is replaced before a write is lost on it."""
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
            prepare(conn, SCHEMA, "%s", ADD_CALL_COLUMNS)

    def _failed(self, error: BaseException, write: bool) -> FunctAIError:
        return FunctAIError(f"PostgreSQL store {self.url}: could not prepare its tables: {_first_line(error)}",
                            code=_code(error, write))

    def _leave(self, conn: Any) -> None:
        """Its socket is the parent's: the descriptor is pointed at /dev/null, so nothing is sent on it."""
        try:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, conn.fileno())
            os.close(null)
        except Exception:  # already closed or broken: nothing of the parent's to protect
            pass

    @property
    def errors(self) -> Any:
        return _psycopg().Error

    def _error(self, doing: str, error: Any, conn: Any) -> FunctAIError:
        """A connection lost while used is ``store-io`` (reopened next time), never a store refusing writes."""
        lost = conn.closed or conn.broken
        if lost:
            self._conn = None
        return FunctAIError(f"PostgreSQL store {self.url}: could not {doing}: {_first_line(error)}"
                            + (" (the connection to the server was lost)" if lost else ""),
                            code="store-io" if lost else _code(error, doing == "append"))

    @contextmanager
    def _transaction(self, conn: Any, sync: bool = False) -> Iterator[None]:
        with conn.transaction():
            if sync:
                conn.execute("SET LOCAL synchronous_commit = on")
            yield

    @contextmanager
    def _snapshot(self, conn: Any) -> Iterator[None]:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    def _append(self, conn: Any, conversation: str, rows: list[tuple[Any, ...]], expect: int | None,
                sync: bool) -> int:
        """As `SQLStore._append`; of two writers meeting the primary key, the second takes the next places."""
        while True:
            try:
                return super()._append(conn, conversation, rows, expect, sync)
            except _psycopg().errors.UniqueViolation:
                if expect is not None:
                    raise StoreConflict(count=self._count(conn, conversation), conversation=conversation) from None

    def sync(self, conversation: str) -> None:
        """Wait until every commit so far is on the server's disk (a synchronous commit of a
        transaction with an id flushes the write-ahead log up to itself)."""
        check_conversation_id(conversation)

        def work(conn: Any) -> None:
            with self._transaction(conn, sync=True):
                conn.execute("SELECT txid_current()")

        self._run("sync", work)

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"


#: SQLSTATEs (or their class) that mean the database cannot be written: a read-only transaction
#: or server, missing rights, a full disk or quota (class 53: insufficient resources).
_UNWRITABLE = ("25006", "42501", "53")


def _code(error: Any, writing: bool) -> str:
    """``store-unwritable`` for a failed write or a database that cannot be written, else ``store-io``."""
    state = getattr(error, "sqlstate", None) or ""
    return "store-unwritable" if writing or state.startswith(_UNWRITABLE) else "store-io"


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


