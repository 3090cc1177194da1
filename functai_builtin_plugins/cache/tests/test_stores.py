"""The stores: each keeps and finds entries, refuses what names none, and never answers a damaged entry."""

from __future__ import annotations

import json
import math
import os
import threading

import pytest
from functai import FunctAIError
from functai_cache.stores import FolderCache, MemoryCache, PostgresCache, SQLiteCache, open_cache_store

pytestmark = pytest.mark.usefixtures("functai_isolated")

NEVER = -math.inf


def entry(key: str, text: str, at: float = 1000.0) -> dict:
    return {"key": key, "at": at, "call": "c1", "reply": {"text": text, "tool_calls": [], "finish_reason": "stop",
                                                          "usage": {"input_tokens": 3}}}


K1, K2 = "a" * 64, "b" * 64


def test_each_store_keeps_finds_and_keeps_the_first_fresh_entry(store_name):
    store = open_cache_store(store_name)
    assert store.get(K1) is None
    store.put(K1, entry(K1, "first ✓"), NEVER)
    assert store.get(K1) == entry(K1, "first ✓")
    assert store.get(K2) is None
    store.put(K1, entry(K1, "second", at=2000.0), NEVER)  # still fresh: the first reply stays
    assert store.get(K1)["reply"]["text"] == "first ✓"
    store.put(K1, entry(K1, "third", at=3000.0), 1500.0)  # the first is older than the cutoff: replaced
    assert store.get(K1) == entry(K1, "third", at=3000.0)


def test_a_second_opening_of_a_durable_store_sees_the_entries(store_name):
    first = open_cache_store(store_name)
    first.put(K2, entry(K2, "kept"), NEVER)
    again = open_cache_store(store_name)
    if store_name == "memory:":
        assert again.get(K2) is None  # each cache(...) has its own memory
    else:
        assert again.get(K2)["reply"]["text"] == "kept"


def test_store_names_as_functai_names_stores(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_cache_store("memory:"), MemoryCache)
    assert isinstance(open_cache_store("MEMORY:"), MemoryCache)
    assert open_cache_store("sqlite:///rel/c.db").path == str(tmp_path / "rel" / "c.db")
    assert open_cache_store("sqlite:////abs/x.db").path == "/abs/x.db"
    assert open_cache_store("here.sqlite3").path == str(tmp_path / "here.sqlite3")
    assert isinstance(open_cache_store("postgresql://u@127.0.0.1:1/db"), PostgresCache)  # connects on first use
    assert isinstance(open_cache_store("postgres://u@127.0.0.1:1/db"), PostgresCache)
    assert open_cache_store("cache-folder").folder == str(tmp_path / "cache-folder")
    assert open_cache_store(tmp_path / "p").folder == str(tmp_path / "p")
    assert isinstance(open_cache_store("notes:today"), FolderCache)  # not a scheme functai knows: a folder


@pytest.mark.parametrize("bad", ["", "   ", "memory:/x", "sqlite:relative.db", "sqlite:///", "redis://host/0",
                                 "s3://bucket/cache", 42, None])
def test_a_store_name_that_names_no_store_is_refused(bad):
    with pytest.raises(FunctAIError) as raised:
        open_cache_store(bad)
    assert raised.value.code == "cache-store"
    assert "memory:" in raised.value.message or "sqlite:///" in raised.value.message


def test_a_file_where_the_folder_should_be_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(FunctAIError) as raised:
        open_cache_store(str(tmp_path / "f"))
    assert raised.value.code == "cache-store" and "is a file" in raised.value.message


def test_a_damaged_folder_entry_is_a_miss_never_a_crash_nor_a_wrong_hit(tmp_path):
    store = FolderCache(str(tmp_path / "c"))
    store.put(K1, entry(K1, "good"), NEVER)
    path = tmp_path / "c" / K1[:2] / f"{K1}.json"
    good = path.read_bytes()
    assert json.loads(good)["key"] == K1 and not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    for damage in (good[: len(good) // 2], b"", b"\xff\xfe\x00garbage", b"[1, 2]", b"null",
                   json.dumps({**entry(K1, "x"), "at": "yesterday"}).encode(),
                   json.dumps({**entry(K1, "x"), "at": 1e20}).encode(),  # no clock reads it
                   json.dumps({**entry(K1, "x"), "at": -5}).encode(),
                   json.dumps({**entry(K1, "x"), "reply": "text"}).encode(),
                   json.dumps({**entry(K1, "x"), "reply": {"text": 5}}).encode(),
                   json.dumps({**entry(K1, "x"), "reply": {"text": "t", "usage": {"input_tokens": "many"}}}).encode(),
                   json.dumps({**entry(K1, "x"), "reply": {"text": "t", "tool_calls": [{"id": "1", "name": "f"}]}}
                              ).encode(),
                   json.dumps({**entry(K1, "x"), "reply": {"text": None, "finish_reason": "stop"}}).encode(),
                   json.dumps({**entry(K1, "x"), "reply": {"text": "t", "finish_reason": "content_filter"}}).encode(),
                   json.dumps(entry(K2, "another key's reply")).encode()):  # a file copied under the wrong name
        path.write_bytes(damage)
        assert store.get(K1) is None, damage
    store.put(K1, entry(K1, "written again"), NEVER)  # a damaged entry is replaced by the next reply
    assert store.get(K1)["reply"]["text"] == "written again"


def test_a_damaged_sqlite_row_is_a_miss(tmp_path):
    import sqlite3

    store = SQLiteCache(str(tmp_path / "c.db"))
    store.put(K1, entry(K1, "good"), NEVER)
    with sqlite3.connect(tmp_path / "c.db") as conn:
        conn.execute("UPDATE functai_cache SET entry = ? WHERE key = ?", ('{"key": "' + K1 + '", "at": 1, "rep', K1))
    assert store.get(K1) is None


def test_sqlite_is_in_wal_mode_and_one_connection_per_thread(tmp_path):
    import sqlite3

    store = SQLiteCache(str(tmp_path / "c.db"))
    store.put(K1, entry(K1, "main"), NEVER)
    with sqlite3.connect(tmp_path / "c.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    found, errors = [], []

    def other(i: int) -> None:
        try:
            key = f"{i:064x}"
            store.put(key, entry(key, f"t{i}"), NEVER)
            found.append((store.get(key)["reply"]["text"], store.get(K1)["reply"]["text"]))
        except Exception as error:  # pragma: no cover - shown by the assertion
            errors.append(error)

    threads = [threading.Thread(target=other, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and sorted(found) == sorted((f"t{i}", "main") for i in range(8))
    store.close()


def test_the_memory_store_is_safe_across_threads():
    store = MemoryCache()
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        barrier.wait()
        for j in range(200):
            key = f"{i:032x}{j:032x}"
            store.put(key, entry(key, f"{i}/{j}"), NEVER)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(store.get(f"{i:032x}{j:032x}")["reply"]["text"] == f"{i}/{j}" for i in range(8) for j in range(200))


def test_postgres_reconnects_after_losing_its_connection(postgres_url):
    store = PostgresCache(postgres_url)
    store.put(K1, entry(K1, "kept"), NEVER)
    store._conn.close()  # as a server restart would leave it
    assert store.get(K1)["reply"]["text"] == "kept"
    store.close()


WRITER = """
import sys
from functai_cache.stores import open_cache_store
store = open_cache_store(sys.argv[1])
me, other = sys.argv[2], sys.argv[3]
for i in range(200):
    key = f"{me}{i:063x}"
    store.put(key, {"key": key, "at": 1.0, "reply": {"text": me + str(i)}}, float("-inf"))
    store.put("c" * 64, {"key": "c" * 64, "at": 1.0, "reply": {"text": me}}, float("-inf"))  # both write one key
seen = sum(store.get(f"{other}{i:063x}") is not None for i in range(200))
print(seen)
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "folder"])
def test_two_processes_writing_at_once_to_a_new_store(kind, tmp_path, request):
    import subprocess
    import sys

    name = {"sqlite": "sqlite:///" + str(tmp_path / "new" / "c.db"), "folder": str(tmp_path / "c")}.get(kind)
    name = name or request.getfixturevalue("postgres_url")
    both = [subprocess.Popen([sys.executable, "-c", WRITER, name, me, other], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for me, other in (("a", "b"), ("b", "a"))]
    for process in both:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    store = open_cache_store(name)
    assert all(store.get(f"{me}{i:063x}")["reply"]["text"] == f"{me}{i}" for me in "ab" for i in range(200))
    assert store.get("c" * 64)["reply"]["text"] in ("a", "b")  # the first writer's, whole


def test_a_fifo_where_a_folder_entry_should_be_is_a_miss_not_a_hang(tmp_path):
    store = FolderCache(str(tmp_path / "c"))
    store.put(K1, entry(K1, "good"), NEVER)
    path = tmp_path / "c" / K1[:2] / f"{K1}.json"
    path.unlink()
    os.mkfifo(path)  # nobody writes to it: an open that waits for a writer waits forever
    assert store.get(K1) is None


def test_a_fifo_where_the_salt_should_be_is_an_error_not_a_hang(tmp_path):
    (tmp_path / "c").mkdir()
    os.mkfifo(tmp_path / "c" / ".salt")  # an open that waits for a writer waits forever
    with pytest.raises(OSError, match="not a file"):
        FolderCache(str(tmp_path / "c")).salt()  # the call goes on without the cache, with a warning


def test_a_memory_cache_lets_entries_past_the_ttl_go():
    store = MemoryCache()
    for i in range(20_000):
        key = f"{i:064x}"
        store.put(key, entry(key, "x", at=float(i)), cutoff=i - 10.0)  # a ttl of 10 "seconds"
    assert len(store._entries) < 3_000 and store.get(f"{19_999:064x}") is not None
