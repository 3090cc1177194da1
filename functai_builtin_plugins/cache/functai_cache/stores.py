"""Where a cache keeps its entries, named as functai's stores are.

``memory:`` (this plugin's own dict), a folder path (one file per key),
``sqlite:///path`` (or a path ending ``.db``, ``.sqlite``, ``.sqlite3``) and
``postgresql://…`` — the last two shared by processes. An entry is a JSON
object holding its own key, the time it was kept (``at``, Unix seconds), the
call that paid for it and the reply as data. A store answers ``get(key)``
with the entry or None, and ``put(key, entry, cutoff)`` keeps an entry
unless a fresh one (kept after ``cutoff``) is there already: the first
reply kept is the one answered while it is fresh. An entry stamped later
than now (beyond `SKEW`) is damaged: a miss, and replaced.

``salt()`` is the store's own random secret (made once, kept with the
entries), under which the cache fingerprints who asks: the same key and
headers key alike in one store and cannot be matched across stores.
Files are made 0600 and folders 0700, whatever the umask.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import re
import sqlite3
import tempfile
import threading
import time
from typing import Any, Protocol, TypeVar

import msgspec
from functai import FunctAIError

__all__ = ["CacheStore", "FolderCache", "MemoryCache", "PostgresCache", "SQLiteCache", "open_cache_store"]

Entry = dict[str, Any]

_decode = msgspec.json.Decoder().decode

TABLE = "functai_cache"

#: How long a SQLite writer waits for another process's transaction.
BUSY_SECONDS = 30.0

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class CacheStore(Protocol):
    """What the cache plugin needs of a store."""

    def get(self, key: str) -> Entry | None: ...

    def put(self, key: str, entry: Entry, cutoff: float) -> None: ...

    def salt(self) -> bytes: ...


def refuse(message: str) -> FunctAIError:
    return FunctAIError(message, code="cache-store")


def open_cache_store(store: str | os.PathLike[str]) -> CacheStore:
    """The store ``store`` names; refuses ``cache-store`` for what names none."""
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if not isinstance(store, str) or not store.strip():
        raise refuse(f"cache(store=...) takes 'memory:', a folder path, 'sqlite:///file.db' or "
                     f"'postgresql://...', not {store!r}")
    found = _SCHEME.match(store)
    scheme = found.group(1).lower() if found else None
    rest = store[found.end():] if found else store
    if scheme == "memory":
        if rest.strip("/"):
            raise refuse(f"cache(store={store!r}): the memory store takes no path; write 'memory:'")
        return MemoryCache()
    if scheme == "sqlite":
        if not rest.startswith("///") or len(rest) == 3:
            raise refuse(f"cache(store={store!r}) is not a SQLite URL: write sqlite:///relative/file.db "
                         "or sqlite:////absolute/file.db")
        return SQLiteCache(rest[3:].split("?", 1)[0])
    if scheme in ("postgresql", "postgres"):
        return PostgresCache(store)
    if scheme is not None and rest.startswith("//"):
        raise refuse(f"cache(store={store!r}): no cache store for the scheme {scheme!r}; use 'memory:', "
                     "a folder path, 'sqlite:///file.db' or 'postgresql://...'")
    if store.lower().endswith(_SQLITE_SUFFIXES):
        return SQLiteCache(store)
    return FolderCache(store)


#: Seconds an entry may be stamped ahead of this machine's clock (another machine's, sharing a
#: store); later is a damaged entry, which would otherwise never expire.
SKEW = 60.0

#: Bytes of a store's salt.
SALT_BYTES = 32

#: The meta table (SQLite, PostgreSQL) and file (folder) holding a store's salt.
META = "functai_cache_meta"
SALT_FILE = ".salt"


def _checked(key: str, entry: object) -> Entry | None:
    """The entry when it is one, for this key; else None (a damaged entry is a miss, never a wrong hit)."""
    if type(entry) is not dict or entry.get("key") != key:
        return None
    at, reply = entry.get("at"), entry.get("reply")
    if (type(at) is not int and type(at) is not float) or not 0 <= at <= time.time() + SKEW or type(reply) is not dict:
        return None  # (NaN fails the range too)
    text, finish, usage = reply.get("text"), reply.get("finish_reason"), reply.get("usage")
    if finish not in (None, "stop", "tool_calls") or (text is not None and type(text) is not str):
        return None  # what `keep_reply` never keeps: a cut or filtered reply
    if text is None and not reply.get("tool_calls"):
        return None  # no answer: every call it answered would fail model-empty
    if usage is not None and (type(usage) is not dict or any(type(n) is not int for n in usage.values())):
        return None
    calls = reply.get("tool_calls")
    if calls and (type(calls) is not list or not all(
            type(c) is dict and type(c.get("id")) is str and type(c.get("name")) is str and type(c.get("input")) is dict
            for c in calls)):
        return None
    return entry


def _loads(key: str, text: str | bytes) -> Entry | None:
    try:
        return _checked(key, _decode(text))
    except ValueError:  # cut or garbled JSON, undecodable bytes (msgspec's DecodeError is one)
        return None


def _dumps(entry: Entry) -> str:
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


def _new_salt() -> str:
    return secrets.token_hex(SALT_BYTES)


def _read_small(path: str) -> str:
    """A small file's text, opened without blocking: a FIFO where the file should be would hold every
    call forever. Anything but a file is an error (the call goes on without the cache)."""
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise OSError(f"{path} is not a file")
        return file.read().decode("ascii", errors="replace")


def _salt_of(text: object, where: str) -> bytes:
    """A kept salt as bytes; refuses one that is not what this plugin writes (a damaged store)."""
    if type(text) is not str or len(text) != 2 * SALT_BYTES:
        raise refuse(f"the cache's salt in {where} is damaged (not {2 * SALT_BYTES} hex digits): remove it, "
                     "and the cache starts afresh (every entry is a miss)")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise refuse(f"the cache's salt in {where} is damaged (not hex digits): remove it, and the cache "
                     "starts afresh (every entry is a miss)") from None


def _discard(path: str) -> None:
    """Remove a temporary file a write left behind (gone already is fine)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _make_folder(folder: str) -> None:
    """``folder`` and its parents, each new one 0700 whatever the umask."""
    if os.path.isdir(folder):
        return
    _make_folder(os.path.dirname(folder))
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        return
    os.chmod(folder, 0o700)


#: Entries a memory cache holds before it first lets those past the ttl go (then twice what is left).
SWEEP_AT = 1024


V = TypeVar("V")


class Stamped(dict[str, tuple[float, V]]):
    """Values by key, each with when it was kept (``(at, value)``); `keep` lets those before a cutoff
    go once they reach `SWEEP_AT`, then twice what was left: what a memory cache holds stays bounded
    by its ttl. The caller holds its lock."""

    def __init__(self) -> None:
        super().__init__()
        self._next_sweep = SWEEP_AT

    def keep(self, key: str, at: float, value: V, cutoff: float | None) -> None:
        self[key] = (at, value)
        if cutoff is not None and len(self) >= self._next_sweep:  # past the ttl they answer nothing
            for old in [k for k, (when, _) in self.items() if when < cutoff]:
                del self[old]
            self._next_sweep = max(SWEEP_AT, 2 * len(self))


class MemoryCache:
    """Entries in a dict of this plugin instance, for this process only; kept as JSON text, like
    every store's, so a hit never shares objects with the reply it was kept from."""

    def __init__(self) -> None:
        self._entries: Stamped[str] = Stamped()
        self._lock = threading.Lock()
        self._salt = secrets.token_bytes(SALT_BYTES)

    def salt(self) -> bytes:
        return self._salt

    def get(self, key: str) -> Entry | None:
        with self._lock:
            found = self._entries.get(key)
        return None if found is None else _loads(key, found[1])

    def put(self, key: str, entry: Entry, cutoff: float) -> None:
        text = _dumps(entry)
        with self._lock:
            there = self._entries.get(key)
            if there is None or there[0] < cutoff or there[0] > time.time() + SKEW:
                self._entries.keep(key, entry["at"], text, cutoff)

    def __repr__(self) -> str:
        return "MemoryCache()"


class FolderCache:
    """One file per key, ``<folder>/<2 hex>/<key>.json``, written whole or not at all."""

    def __init__(self, folder: str) -> None:
        self.folder = os.path.abspath(folder)
        if os.path.exists(self.folder) and not os.path.isdir(self.folder):
            raise refuse(f"cache(store={folder!r}): {self.folder} is a file, not a folder; name a folder "
                         "(or 'sqlite:///file.db' for a SQLite file)")
        self._salt: bytes | None = None

    def salt(self) -> bytes:
        """The folder's salt, from its ``.salt`` file: the first process to need one writes it whole."""
        if self._salt is None:
            path = os.path.join(self.folder, SALT_FILE)
            try:
                text = _read_small(path)
            except FileNotFoundError:
                _make_folder(self.folder)
                temporary = self._write_temporary(self.folder, _new_salt().encode())
                try:
                    os.link(temporary, path)  # fails if another process wrote one first: theirs is kept
                except FileExistsError:
                    pass
                finally:
                    os.unlink(temporary)
                text = _read_small(path)
            self._salt = _salt_of(text.strip(), path)
        return self._salt

    @staticmethod
    def _write_temporary(folder: str, data: bytes) -> str:
        """A new file (0600) in ``folder`` holding ``data``, durable; its path."""
        handle, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
        except BaseException:
            _discard(temporary)
            raise
        return temporary

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key[:2], key + ".json")

    def get(self, key: str) -> Entry | None:
        try:  # not blocking: a FIFO put where an entry should be would hold the call forever
            handle = os.open(self._path(key), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        with os.fdopen(handle, "rb") as file:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                return None  # a folder, a FIFO, a device: no entry
            return _loads(key, file.read())

    def put(self, key: str, entry: Entry, cutoff: float) -> None:
        there = self.get(key)
        if there is not None and there["at"] >= cutoff:
            return
        folder = os.path.dirname(self._path(key))
        _make_folder(folder)
        temporary = self._write_temporary(folder, _dumps(entry).encode())
        try:
            os.replace(temporary, self._path(key))
        except BaseException:
            _discard(temporary)
            raise

    def __repr__(self) -> str:
        return f"FolderCache({self.folder!r})"


class SQLiteCache:
    """A table keyed by digest in a SQLite file (WAL), one connection per thread, safe across processes."""

    def __init__(self, path: str) -> None:
        if "\x00" in path:
            raise refuse(f"cache(store=...): the SQLite path {path!r} holds a NUL byte; name a real file")
        self.path = os.path.abspath(path)
        if os.path.isdir(self.path):
            raise refuse(f"cache(store=...): {self.path} is a folder, not a SQLite file")
        self._local = threading.local()
        self._salt: bytes | None = None

    def salt(self) -> bytes:
        if self._salt is None:
            conn = self._conn()
            conn.execute(f"INSERT OR IGNORE INTO {META} (name, value) VALUES ('salt', ?)", (_new_salt(),))
            row = conn.execute(f"SELECT value FROM {META} WHERE name = 'salt'").fetchone()
            self._salt = _salt_of(row[0], f"{self.path} (table {META})")
        return self._salt

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        _make_folder(os.path.dirname(self.path))
        try:  # made 0600 before SQLite makes it (its -wal and -shm files take the file's mode)
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            pass
        conn = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:  # switching to WAL may answer "locked" at once while another process opens the new file
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (key TEXT PRIMARY KEY, at REAL NOT NULL, "
                             "entry TEXT NOT NULL) WITHOUT ROWID")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {META} (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
                return conn
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(0.01)

    def get(self, key: str) -> Entry | None:
        row = self._conn().execute(f"SELECT entry FROM {TABLE} WHERE key = ?", (key,)).fetchone()
        return None if row is None else _loads(key, row[0])

    def put(self, key: str, entry: Entry, cutoff: float) -> None:
        self._conn().execute(
            f"INSERT INTO {TABLE} (key, at, entry) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            f"at = excluded.at, entry = excluded.entry WHERE {TABLE}.at < ? OR {TABLE}.at > ?",
            (key, entry["at"], _dumps(entry), cutoff, time.time() + SKEW))

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __repr__(self) -> str:
        return f"SQLiteCache({self.path!r})"


class PostgresCache:
    """A table keyed by digest in PostgreSQL: one connection, used under a lock, opened on first use."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError as error:
            raise refuse(f"cache(store='postgresql://...') needs psycopg: pip install 'psycopg[binary]' "
                         f"({error})") from None
        self._psycopg = psycopg
        self._url = url
        self._conn: Any = None
        self._lock = threading.Lock()
        self._salt: bytes | None = None

    def salt(self) -> bytes:
        if self._salt is None:
            self._run(f"INSERT INTO {META} (name, value) VALUES ('salt', %s) ON CONFLICT (name) DO NOTHING "
                      "RETURNING name", (_new_salt(),))
            row = self._run(f"SELECT value FROM {META} WHERE name = 'salt'", ())
            self._salt = _salt_of(row[0], f"the PostgreSQL table {META}")
        return self._salt

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            conn = self._psycopg.connect(self._url, autocommit=True)
            for table in (f"{TABLE} (key TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL, entry TEXT NOT NULL)",
                          f"{META} (name TEXT PRIMARY KEY, value TEXT NOT NULL)"):
                try:
                    conn.execute(f"CREATE TABLE IF NOT EXISTS {table}")
                except (self._psycopg.errors.UniqueViolation, self._psycopg.errors.DuplicateObject):
                    pass  # another process created it at the same moment (its row type, or its catalog row)
            self._conn = conn
        return self._conn

    def _run(self, sql: str, values: tuple[Any, ...]) -> Any:
        with self._lock:
            try:
                return self._connection().execute(sql, values).fetchone()
            except self._psycopg.OperationalError:
                self._drop()  # a lost connection: the next use connects again
                raise

    def get(self, key: str) -> Entry | None:
        row = self._run(f"SELECT entry FROM {TABLE} WHERE key = %s", (key,))
        return None if row is None else _loads(key, row[0])

    def put(self, key: str, entry: Entry, cutoff: float) -> None:
        self._run(f"INSERT INTO {TABLE} (key, at, entry) VALUES (%s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
                  f"at = EXCLUDED.at, entry = EXCLUDED.entry WHERE {TABLE}.at < %s OR {TABLE}.at > %s RETURNING key",
                  (key, entry["at"], _dumps(entry), cutoff, time.time() + SKEW))

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __repr__(self) -> str:
        return "PostgresCache(...)"
