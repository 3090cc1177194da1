"""Stores named by URL: SQLite and PostgreSQL (the Store protocol itself is tested in test_store.py)."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import functai
from functai import FunctAIError
from functai._stores import FolderStore, MemoryStore, StoreConflict, open_store
from functai._stores.opening import store_reference
from functai._evaluation.ratings import read_ratings
from functai._stores.postgres import PostgresStore
from functai._stores.sqlite import SQLiteStore
from functai._stores.opening import forget
from functai._stores.urls import SCHEMA_VERSION, redact, scheme_of
from functai.testing import ScriptedLM
from store_fixtures import raw_sql

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sql_url(request, tmp_path):
    """A SQLite URL and a PostgreSQL URL in turn (see store_fixtures)."""
    if request.param == "sqlite":
        url = "sqlite:///" + str(tmp_path / "s.db")
        yield url
        forget(url)
    else:
        yield request.getfixturevalue("postgres_url")


both = pytest.mark.parametrize("sql_url", ["sqlite", "postgresql"], indirect=True)


# -- URLs ---------------------------------------------------------------------------------


def test_urls_pick_the_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///rel.db")  # as SQLAlchemy reads it: three slashes, a relative path
    assert isinstance(relative, SQLiteStore) and relative.path == str(tmp_path / "rel.db")
    absolute = open_store("sqlite:///" + str(tmp_path / "abs.sqlite3"))  # four slashes: absolute
    assert absolute.path == str(tmp_path / "abs.sqlite3")
    assert open_store("rel.db") is relative and open_store(str(tmp_path / "rel.db")) is relative  # one per file
    assert isinstance(open_store("other.sqlite"), SQLiteStore)
    assert isinstance(open_store("folder"), FolderStore) and isinstance(open_store("a:b"), FolderStore)
    assert open_store("memory:") is open_store(None) and isinstance(open_store("memory:"), MemoryStore)
    assert scheme_of("postgresql://u@h/db") == "postgresql" and scheme_of("POSTGRES://h/db") == "postgres"
    for bad, words in [("nosuch://x", "nosuch"), ("sqlite://x.db", "sqlite:///"), ("memory:/x", "memory:")]:
        with pytest.raises(FunctAIError) as info:
            open_store(bad)
        assert info.value.code == "store-url" and words in info.value.message
    from functai._stores.calllog import log_store

    with pytest.raises(FunctAIError) as info:
        log_store("memory:")  # the memory store keeps conversations, not a call log
    assert info.value.code == "store-url"
    for url in ("sqlite:///rel.db", "other.sqlite"):
        forget(url)


def test_a_password_never_reaches_a_record_or_a_message():
    url = "postgresql://ann:s3cret@127.0.0.1:1/db?sslmode=disable"
    assert redact(url) == "postgresql://ann@127.0.0.1:1/db?sslmode=disable"
    store = PostgresStore(url)
    assert "s3cret" not in repr(store) and store_reference(store) == redact(url)
    with pytest.raises(FunctAIError) as info:
        store.count("c")  # nothing listens on port 1
    assert info.value.code == "store-io" and "s3cret" not in str(info.value)
    for url, shown in [("postgresql://ann@127.0.0.1:1/db?sslmode=disable&password=s3cret",
                        "postgresql://ann@127.0.0.1:1/db?sslmode=disable"),
                       ("postgresql:///db?PASSWORD=s3cret", "postgresql:///db"),
                       ("postgresql://ann:pw@h/db?password=s3cret&x=1", "postgresql://ann@h/db?x=1"),
                       ("postgresql://ann@h/db?sslpassword=s3cret&pass%77ord=s3cret&x=1",
                        "postgresql://ann@h/db?x=1")]:  # sslpassword, and a name libpq reads decoded
        assert redact(url) == shown  # libpq takes a password from the query too
        assert "s3cret" not in repr(PostgresStore(url))


def test_a_schema_version_a_database_gives_as_bytes_is_read():
    """PostgreSQL in SQL_ASCII gives text columns as bytes: b"3" is schema 3, not a newer one."""
    from functai._stores.sql import version_of

    assert version_of(b"3") == version_of("3") == 3 and version_of(b"x") > SCHEMA_VERSION


def test_the_commands_hints_name_a_postgresql_store_without_its_password(postgres_url):
    import io

    from functai._cli import main

    url = postgres_url + "&password=s3cret-hint"  # the test server trusts its users: the password is unused
    functai.ai(lm="test")(_tutor).conversation("c", store=url)("q")
    out, err = io.StringIO(), io.StringIO()
    assert main(["approve", url, "c"], out, err) == 1
    assert "[nothing-waiting]" in err.getvalue() and "functai conversation postgresql://" in err.getvalue()
    assert "s3cret" not in err.getvalue() + out.getvalue()


def _tutor(question: str) -> str:
    """Tutor the student."""


@both
def test_a_row_removed_by_hand_is_damage_in_its_place_and_nothing_is_read_twice(sql_url):
    """The count is the next position: a removed row keeps its place as damage, so a later read
    starts after what was read, and an entry is never applied twice (a budget would pay twice)."""
    import functai

    @functai.ai(lm="test")
    def tutor(question: str) -> str:
        """Answer."""

    chat = tutor.conversation("c", store=sql_url)
    chat("one")
    chat("two")
    chat.remember("notes", "spent", 1.0)
    raw_sql(sql_url)("DELETE FROM functai_records WHERE conversation = 'c' AND position = 2")
    view = tutor.conversation("c", store=sql_url)
    assert [e["data"] for e in view.entries("notes", "spent")] == [1.0]
    assert [e["data"] for e in view.entries("notes", "spent")] == [1.0]  # read again: not twice
    assert any("removed" in why for _, why in view._history.damage)
    view.remember("notes", "spent", 2.0)
    again = tutor.conversation("c", store=sql_url)
    assert [e["data"] for e in again.entries("notes", "spent")] == [1.0, 2.0]


def test_a_sqlite_url_refused_is_shown_without_its_password():
    with pytest.raises(FunctAIError) as info:
        open_store("sqlite://ann:s3cret@/x.db")
    assert info.value.code == "store-url" and "s3cret" not in str(info.value)


def test_postgresql_without_psycopg_names_the_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails, as when it is not installed
    with pytest.raises(FunctAIError) as info:
        open_store("postgresql://127.0.0.1/nowhere")
    assert info.value.code == "store-driver-missing"
    assert 'pip install "psycopg[binary]>=3.1"' in info.value.message



@both
def test_close_lets_the_connection_go_and_the_next_use_opens_one(sql_url):
    store = open_store(sql_url)
    store.append("c", [{"n": 0}])
    first = store._conn
    store.close()
    store.close()  # closing a closed store is nothing
    assert store._conn is None
    if isinstance(first, sqlite3.Connection):
        with pytest.raises(sqlite3.ProgrammingError):  # it was closed
            first.execute("SELECT 1")
    else:
        assert first.closed
    assert store.read("c") == [{"n": 0}]
    assert store._conn is not None and store._conn is not first
    store.close()


@both
def test_an_open_reads_text_beyond_ascii_as_it_was_written(sql_url):
    """The joined read fetches UTF-8 bytes: a record's non-ASCII text, and the header, come back whole."""
    import functai

    @functai.ai
    def echo(text: str) -> str:
        """Echo."""
        raise NotImplementedError

    said = "héllo ✓ 日本語 🙂"
    chat = echo.conversation("u", store=sql_url, client=ScriptedLM(reply=lambda request: said))
    chat(text=said)
    again = echo.conversation("u", store=open_store(sql_url))
    store = open_store(sql_url)
    rows, whole = store.read_rows("u")
    assert [whole(n) for n in range(len(rows))] == store.read("u")
    assert whole(0)["kind"] == "conversation"
    assert [(dict(t.inputs), dict(t.outputs)) for t in again.turns] == [({"text": said}, {"output": said})]


def test_the_postgresql_store_does_not_load_the_sqlite_one():
    code = "import sys, functai._stores.postgres; print('functai._stores.sqlite' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "False", done.stderr


# -- schema versions --------------------------------------------------------------------------


@both
def test_the_schema_is_created_versioned_and_a_newer_one_refused(sql_url):
    store = open_store(sql_url)
    store.append("c", [{"n": 0}])
    forget(sql_url)
    raw = raw_sql(sql_url)
    assert raw("SELECT value FROM functai_meta WHERE key = 'schema'") == [(str(SCHEMA_VERSION),)]
    raw(f"UPDATE functai_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema'")
    with pytest.raises(FunctAIError) as info:
        open_store(sql_url).read("c")
    assert info.value.code == "store-version" and "newer functai" in info.value.message
    raw(f"UPDATE functai_meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema'")
    assert open_store(sql_url).read("c") == [{"n": 0}]  # refused, not changed


@both
def test_a_schema_1_store_is_read_as_it_is_and_migrated_by_the_first_write(sql_url):
    raw = raw_sql(sql_url)
    for statement in (  # what functai wrote as schema 1
        "CREATE TABLE functai_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE functai_records (conversation TEXT NOT NULL, position INTEGER NOT NULL, "
        "data TEXT NOT NULL, PRIMARY KEY (conversation, position))",
        "CREATE TABLE functai_calls (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, line TEXT NOT NULL)",
        "CREATE TABLE functai_ratings (seq INTEGER PRIMARY KEY, call TEXT NOT NULL, line TEXT NOT NULL)",
        "INSERT INTO functai_meta VALUES ('schema', '1')",
        """INSERT INTO functai_records VALUES ('c', 0, '{"kind":"conversation"}'),
           ('c', 1, '{"kind":"turn","turn":"t1","parent":null}'), ('c', 2, '{"kind":"end","turn":"t1"}'),
           ('c', 3, '{"kind":"turn","turn":"t2","parent":"t1"}'), ('c', 4, '{"kind":"turn","turn":"t3","parent":"t1"}'),
           ('c', 5, 'not json')""",
    ):
        raw(statement)
    store = open_store(sql_url)
    assert store.count("c") == 6 and store.conversations() == ["c"]
    records, count = store.read_branch("c", "t3")  # no columns to walk: every record, as a view at none reads
    assert count == 6 and [position for position, _ in records] == [0, 1, 2, 3, 4, 5]
    assert records[-1][1]["functai_unusable"] == "not JSON"  # keeps its place: damage
    assert raw("SELECT value FROM functai_meta WHERE key = 'schema'") == [("1",)]  # a read changed nothing
    assert store.append("c", [{"kind": "end", "turn": "t3"}], expect=6) == 7
    assert raw("SELECT value FROM functai_meta WHERE key = 'schema'") == [(str(SCHEMA_VERSION),)]
    records, count = store.read_branch("c", "t3")
    assert count == 7 and [position for position, _ in records] == [0, 1, 2, 4, 5, 6]  # t2's branch left out


# -- SQLite --------------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_sqlite_files_are_0600_and_in_wal_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        store = SQLiteStore(tmp_path / "new" / "convs.db")
        store.append("c", [{"n": 0}])
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700
    for name in ("convs.db", "convs.db-wal", "convs.db-shm"):
        assert stat.S_IMODE(os.stat(tmp_path / "new" / name).st_mode) == 0o600, name
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    store.close()


def test_sqlite_commits_with_synchronous_full_only_when_asked(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    store.append("c", [{"n": 0}])
    seen: list[str] = []
    store._connection().set_trace_callback(seen.append)
    store.append("c", [{"n": 1}])
    assert not any("synchronous" in s for s in seen) and "COMMIT" in seen  # NORMAL since the connection opened
    seen.clear()
    store.append("c", [{"n": 2}], sync=True)  # a tool's start: FULL for this commit
    assert seen.index("PRAGMA synchronous = FULL") < seen.index("COMMIT")
    seen.clear()
    store.append("c", [{"n": 3}], sync=True)  # the level is kept: no PRAGMA between two durable commits
    assert not any("synchronous" in s for s in seen) and "COMMIT" in seen
    seen.clear()
    store.append("c", [{"n": 4}])  # a normal append switches back before its commit
    assert seen.index("PRAGMA synchronous = NORMAL") < seen.index("COMMIT")
    assert store._connection().execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    store.append("c", [{"n": 5}], sync=True)
    seen.clear()
    store.log_lines("calls", [("id1", '{"id": "id1"}', *[None] * 7)])  # the call log's single insert commits by itself
    assert seen.index("PRAGMA synchronous = NORMAL") < next(i for i, s in enumerate(seen) if s.startswith("INSERT"))
    store.append("c", [{"n": 6}], sync=True)
    store.close()  # a new connection starts at NORMAL, and the store knows it
    seen.clear()
    store._connection().set_trace_callback(seen.append)
    store.append("c", [{"n": 7}], sync=True)
    assert seen.index("PRAGMA synchronous = FULL") < seen.index("COMMIT")
    assert store._connection().execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert store.count("c") == 8
    store.close()


def test_sqlite_waits_for_another_processs_write_lock(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    store.append("c", [{"n": 0}])
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sqlite3, sys, time
            conn = sqlite3.connect({str(path)!r}, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            time.sleep(0.5)
            conn.execute("COMMIT")
        """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    started = time.monotonic()
    assert store.append("c", [{"n": 1}], expect=1) == 2  # waits (busy timeout), then goes through
    assert time.monotonic() - started > 0.2
    assert holder.wait(timeout=30) == 0
    holder.stdout.close()
    store.close()


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("just some notes, not SQLite\n" * 100)
    with pytest.raises(FunctAIError) as info:
        SQLiteStore(path).read("c")
    assert info.value.code == "store-io" and str(path) in info.value.message
    assert path.read_text() == "just some notes, not SQLite\n" * 100  # untouched


# -- crashes and concurrency at the store level ------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from functai._stores import open_store, StoreConflict
    store = open_store(sys.argv[1])
    name, n = sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(n):
        count = store.count("c")
        while True:
            try:
                store.append("c", [{"w": name, "i": i}, {"w": name, "i": i, "second": True}], expect=count)
                break
            except StoreConflict as conflict:
                count = conflict.count
        if n > 1000 and i == 20:
            print("going", flush=True)
""")


def _writers(url, names, n):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, name, str(n)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for name in names]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


@both
def test_four_processes_compare_and_set_lose_nothing(sql_url):
    procs = _writers(sql_url, "abcd", 50)
    for proc in procs:
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0
        proc.stdout.close()
    records = open_store(sql_url).read("c")
    assert len(records) == 400
    for name in "abcd":
        mine = [r for r in records if r["w"] == name]
        assert [r["i"] for r in mine] == [i for i in range(50) for _ in (0, 1)]
    for first, second in zip(records[::2], records[1::2]):  # each append's two records stay together
        assert (first["w"], first["i"], second.get("second")) == (second["w"], second["i"], True)


@both
def test_a_writer_killed_mid_append_leaves_whole_appends(sql_url):
    (proc,) = _writers(sql_url, "k", 100_000)
    assert proc.stdout.readline().strip() == "going"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdin.close()
    proc.stdout.close()
    forget(sql_url)
    store = open_store(sql_url)
    records = store.read("c")
    assert len(records) >= 42 and len(records) % 2 == 0  # only whole appends
    assert [r["i"] for r in records[::2]] == list(range(len(records) // 2))
    assert store.count("c") == len(records)
    assert store.append("c", [{"after": True}], expect=len(records)) == len(records) + 1
    with pytest.raises(StoreConflict):
        store.append("c", [{"late": True}], expect=len(records))


# -- the call log in SQL ----------------------------------------------------------------------------------


@both
def test_ratings_from_two_machines_on_one_log_are_both_seen(sql_url, tmp_path):
    @functai.ai
    def capital(country: str) -> str:
        """The capital city."""

    with functai.settings(client=ScriptedLM(["Lima", "Paris"]), log_calls=sql_url):
        lima = capital.run("Peru").record
        paris = capital.run("France").record
    rater = textwrap.dedent(f"""
        import functai, sys
        functai.rate(sys.argv[1], good=sys.argv[2] == "good", by=sys.argv[3], log={sql_url!r})
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for call, verdict, who in ((lima.id, "good", "ann"), (paris.id, "bad", "bo")):  # two other processes
        subprocess.run([sys.executable, "-c", rater, call, verdict, who], check=True, env=env)
    rated = {r.id: r.rating for r in functai.read_calls(sql_url, rated=True)}
    assert {k: (v["good"], v["by"]) for k, v in rated.items()} == {lima.id: (True, "ann"), paris.id: (False, "bo")}
    assert [r.id for r in functai.read_calls(sql_url)] == [lima.id, paris.id]
    assert not list(tmp_path.glob("*.jsonl"))  # nothing went to files


# -- opening at a turn reads its branch -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["folder", "sqlite", "postgresql"])
def test_a_view_opened_at_a_turn_reads_only_its_branch(kind, tmp_path, request, recwarn):
    from store_fixtures import store_url

    @functai.ai
    def tutor(question: str) -> str:
        """Tutor the student."""

    url = store_url(kind, tmp_path, request)
    lm = ScriptedLM(reply=lambda r: "A:" + r.messages[-1]["content"])
    functai.configure(client=lm)
    chat = tutor.conversation("big", store=url, context=functai.last_turns(2))
    for i in range(30):
        chat(f"main {i}")
    branch = chat.continue_from(chat.turns[2])
    for i in range(3):
        branch(f"side {i}")
    tip = branch.head.id
    store = open_store(url)
    total = store.count("big")
    read: list[int] = []
    for name in ("read", "read_rows", "read_branch"):
        real = getattr(store, name, None)
        if real is not None:
            def counting(*args, _real=real, **kwargs):
                found = _real(*args, **kwargs)
                read.append(len(found[0] if isinstance(found, tuple) else found))
                return found

            setattr(store, name, counting)
    try:
        view = tutor.conversation("big", store=store, context=functai.last_turns(2), at=tip)
        assert view.head.id == tip and [t.inputs["question"] for t in view.turns][-4:] == [
            "main 2", "side 0", "side 1", "side 2"]
        assert view("one more") == "A:question: one more"
        if kind == "folder":
            assert sum(read) >= total  # a folder store has no index: it reads everything
        else:
            assert sum(read) < 40  # the 6 turns of the branch (4 records each, or fewer) and the header
        assert [m["content"] for m in lm.requests[-1].messages[1:]] == [
            "question: side 1", "A:question: side 1", "question: side 2", "A:question: side 2", "question: one more"]
        chat("main 30")  # another branch grows meanwhile: nothing to report, nothing mixed in
        assert view.head.inputs["question"] == "one more" and view.head.parent == tip
        assert not [w for w in recwarn.list if "skipped" in str(w.message)]
        assert len(view.all_turns()) == 35  # asking about everything reads everything
        assert view.turn(chat.turns[0].id).inputs["question"] == "main 0"
    finally:
        for name in ("read", "read_rows", "read_branch"):
            store.__dict__.pop(name, None)
    with pytest.raises(FunctAIError) as info:
        tutor.conversation("big", store=url, at="nosuchturn")
    assert info.value.code == "conversation-parent"


def test_sqlite_reads_a_branch_through_the_turn_index(tmp_path):
    """Without statistics SQLite's planner would walk the whole conversation per step: the
    branch query names the (conversation, turn) index, so each step is one lookup."""
    from functai._stores import schema

    store = SQLiteStore(tmp_path / "s.db")
    store.append("c", [{"kind": "turn", "turn": "t0", "parent": None}])
    sql = schema.BRANCH.format(tip="?2", conversation="?1", indexed="INDEXED BY functai_records_turn")
    plan = [row[-1] for row in store._connection().execute("EXPLAIN QUERY PLAN " + sql, ("c", "t0"))]
    lookups = [step for step in plan if step.startswith("SEARCH")]
    assert lookups and all("functai_records_turn" in step for step in lookups), plan
    store.close()


def test_postgresql_waits_for_the_disk_only_when_asked(postgres_url):
    store = open_store(postgres_url)
    store.append("c", [{"n": 0}])
    conn = store._connection()
    assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)  # the session's default
    seen: list[str] = []
    real = conn.execute

    def recording(query, *args, **kwargs):
        seen.append(str(query))
        return real(query, *args, **kwargs)

    conn.execute = recording
    try:
        store.append("c", [{"n": 1}])
        assert not any("synchronous_commit = on" in q for q in seen)
        seen.clear()
        store.append("c", [{"n": 2}], sync=True)  # a turn's end: this commit waits for the disk
        assert seen[0] == "SET LOCAL synchronous_commit = on" and any("INSERT" in q for q in seen)
    finally:
        del conn.execute
    assert store.read("c") == [{"n": 0}, {"n": 1}, {"n": 2}]


# -- reading creates nothing; locations that name no store ----------------------------------------


def _tables(url) -> set[str]:
    raw = raw_sql(url)
    if url.startswith("sqlite:"):
        return {name for (name,) in raw("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {name for (name,) in raw("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                    "current_schema()")}


def test_reading_a_sqlite_store_that_is_not_there_creates_nothing(tmp_path):
    url = "sqlite:///" + str(tmp_path / "not" / "yet" / "x.db")
    store = open_store(url)
    assert (store.read("c"), store.count("c"), store.conversations()) == ([], 0, [])
    assert store.read_branch("c", "t1") == ([], 0)
    assert list(functai.read_calls(url)) == [] and read_ratings(url) == {}
    assert not (tmp_path / "not").exists()  # no file, no folder
    assert store.append("c", [{"n": 1}]) == 1  # a write makes them
    assert store.read("c") == [{"n": 1}] and (tmp_path / "not" / "yet" / "x.db").is_file()
    forget(url)


@both
def test_reading_a_store_without_tables_creates_none(sql_url, tmp_path):
    if sql_url.startswith("sqlite:"):
        sqlite3.connect(sql_url[len("sqlite:///"):]).close()  # an empty database file, as another program left it
    store = open_store(sql_url)
    assert (store.read("c"), store.count("c"), store.conversations(), store.read_branch("c", "t")) == \
        ([], 0, [], ([], 0))
    assert list(functai.read_calls(sql_url)) == []
    assert _tables(sql_url) == set()
    store.append("c", [{"n": 1}])
    assert {"functai_meta", "functai_records", "functai_calls", "functai_ratings"} <= _tables(sql_url)


@both
def test_a_reader_that_found_no_tables_sees_them_once_another_writer_made_them(sql_url):
    from functai._stores.postgres import PostgresStore

    reader = open_store(sql_url)
    assert reader.read("c") == []  # nothing there yet: nothing made
    writer = SQLiteStore(sql_url[len("sqlite:///"):]) if sql_url.startswith("sqlite:") else PostgresStore(sql_url)
    writer.append("c", [{"n": 1}])  # another process, as far as the reader knows
    writer.close()
    assert reader.read("c") == [{"n": 1}] and reader.conversations() == ["c"]


@pytest.mark.parametrize("bad", ["", " ", "\t", "sqlite:", "SQLite:", "sqlite:/x.db", "sqlite:///a\x00b.db",
                                 "a\x00b", "postgresql:db", "postgresql://[::zz]/db", "postgresql://h:port/db",
                                 "postgres://u:s3cret@[::1/db"])
def test_a_location_that_names_no_store_is_refused_with_store_url(bad):
    for use in (open_store, lambda where: functai.configure(log_calls=where) if where else None):
        if bad == "" and use is not open_store:
            continue  # log_calls="" is no call log, as FUNCTAI_LOG_CALLS= is
        with pytest.raises(FunctAIError) as info:
            use(bad)
        assert info.value.code == "store-url", info.value
        assert "s3cret" not in str(info.value)
