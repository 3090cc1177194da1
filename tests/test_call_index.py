"""Reading calls through the call log's index: every filter answers what a whole read of the log
finds, on every kind of log, and the index beside a folder log is never trusted over the log
(damaged, edited, cut short, unwritable, indexed by two processes at once)."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tmpfs import fill, tmpfs

import functai
from functai import ai
from functai._cli import main
from functai._stores import logindex
from functai.testing import ScriptedLM, tool_call

DATA = Path(__file__).parent / "data"


class Brief:
    """Adds a rule to every call."""

    name, version = "brief", "1.0.0"

    @functai.hookimpl
    def before_call(self, call):
        return functai.Change(sections=("Be brief.",))


@ai
def inner(text: str) -> str:
    """Shorten the text."""
    raise NotImplementedError


@functai.tool
def shorten(text: str) -> str:
    """Shorten a text."""
    return inner(text)


@ai(tools=[shorten])
def outer(text: str) -> str:
    """Answer, using shorten."""
    raise NotImplementedError


def reply(request):
    text = request.messages[-1]["content"]
    if "fail" in text:
        raise functai.ModelError("refused", code="model-refused")
    return "ok " + text[-12:]


def write_log(log, n=12):
    """Varied calls: plain, changed by a plugin, failed, on another model, nested, rated."""
    with functai.settings(client=ScriptedLM(reply=reply), log_calls=log):
        for i in range(n):
            inner(f"plain {i}")
        with functai.settings(plugins=[Brief()]):
            for i in range(4):
                inner(f"briefed {i}")
        for i in range(2):
            with pytest.raises(functai.FunctAIError):
                inner(f"fail {i}")
        with functai.settings(lm="other-model"):
            inner("on another model")
        with functai.settings(client=ScriptedLM([tool_call("shorten", {"text": "a long text"}), "short", "done"])):
            outer("nested")
    calls = list(functai.read_calls(log))
    functai.rate(calls[0], good=True, by="ann", log=log)
    functai.rate(calls[3], good=False, correction="better", by="bo", log=log)
    functai.rate(calls[0], good=False, by="ann", log=log)  # the latest by each person wins
    return calls


def reference(every, *, function=None, model=None, error=None, parent=None, id=None, plugin=None, day=None,
              rated=False, newest=None, before=None):
    """What a filter must answer, worked out here from a whole read of the log."""
    keyed = [((r.started, n), r) for n, r in enumerate(every)]
    cursor = next((key for key, r in keyed if r.id == before), None)
    kept = [(key, r) for key, r in keyed if
            (function is None or f"{r.module}:{r.function}".endswith(function if ":" in function else ":" + function))
            and (model is None or r.model == model)
            and (error is None or (r.error is not None if error is True else (r.error or {}).get("code") == error))
            and (parent is None or r.parent == parent) and (id is None or r.id == id)
            and (plugin is None or any(c.get("plugin") == plugin for c in r.changes))
            and (day is None or r.started.startswith(day)) and (not rated or r.rating is not None)
            and (before is None or (cursor is not None and key < cursor))]
    if newest is not None:
        kept = sorted(kept, key=lambda pair: pair[0], reverse=True)[:newest]
    return [r.id for _, r in kept]


def queries(every):
    nested = next((r for r in every if r.parent), every[0])
    day = every[0].started[:10]
    return [
        {}, {"function": "inner"}, {"function": "tests:inner"}, {"function": "outer"}, {"function": "nobody"},
        {"model": "other-model"}, {"model": "scripted"}, {"error": "model-refused"}, {"error": True},
        {"error": "no-such-code"}, {"parent": nested.parent}, {"id": every[len(every) // 2].id}, {"id": "no-such-id"},
        {"plugin": "brief"}, {"plugin": "bri"}, {"day": day}, {"day": "1999-01-01"}, {"rated": True},
        {"newest": 3}, {"newest": 100}, {"newest": 4, "before": every[-min(3, len(every))].id},
        {"newest": 5, "before": "nope"},
        {"newest": 2, "function": "inner", "error": True}, {"newest": 3, "plugin": "brief", "rated": False},
        {"newest": 1, "rated": True},
    ]


def check_every_filter(log):
    every = list(functai.read_calls(log))
    for query in queries(every):
        if "function" in query and ":" in query["function"]:
            module = next(r.module for r in every if r.function == "inner")
            query = {**query, "function": f"{module}:inner"}
        found = list(functai.read_calls(log, **query))
        expected = reference(every, **query)
        assert [r.id for r in found] == expected, query
        for record in found:
            assert record.rating == next(r.rating for r in every if r.id == record.id)
    return every


@pytest.fixture(params=["folder", "folder-small", "sqlite", "postgresql"])
def log(request, tmp_path, monkeypatch):
    if request.param.startswith("folder"):
        if request.param == "folder":
            monkeypatch.setattr(logindex, "SMALL", 0)  # an index file from the first read
        return str(tmp_path / "calls")
    if request.param == "sqlite":
        return "sqlite:///" + str(tmp_path / "calls.db")
    return request.getfixturevalue("postgres_url")


def test_every_filter_answers_what_a_whole_read_finds(log):
    write_log(log)
    every = check_every_filter(log)
    assert every[0].rating["good"] is False and every[3].rating["correction"] == "better"
    write_log(log, n=3)  # more appended after the index was made: read as well
    assert len(check_every_filter(log)) == len(every) + 12
    if not log.startswith(("sqlite", "postgresql")):
        assert os.path.exists(os.path.join(log, "calls.index.sqlite")) == (logindex.SMALL == 0)


def test_a_wrong_filter_is_named_not_read_as_no_filter(tmp_path):
    for wrong, named in [({"newest": 0}, "newest"), ({"newest": True}, "newest"), ({"model": ""}, "model"),
                         ({"error": 3}, "error"), ({"id": 5}, "id"), ({"before": "x"}, "before"),
                         ({"function": print}, "function"), ({"function": 123}, "function"),
                         ({"function": ""}, "function"), ({"function": "module:"}, "function"),
                         ({"model": "a\x00b"}, "model"), ({"id": "\x00"}, "id"), ({"day": "2026-12"}, "day"),
                         ({"day": "2026-12-7"}, "day"), ({"day": "2026-13-01"}, "day"), ({"day": "garbage"}, "day"),
                         ({"plugin": "cache fallback"}, "plugin"), ({"plugin": " brief"}, "plugin")]:
        with pytest.raises(functai.FunctAIError) as info:
            functai.read_calls(tmp_path, **wrong)  # at once, not when first read
        assert info.value.code == "bad-filter" and f"{named}=" in info.value.message


def test_filters_no_database_could_hold_still_read(log):
    """A count past any database's, and text with a lone surrogate (which UTF-8 cannot hold)."""
    write_log(log, n=2)
    assert len(list(functai.read_calls(log, newest=2**63))) == len(list(functai.read_calls(log)))
    assert list(functai.read_calls(log, model="scripted\udce9")) == []
    assert list(functai.read_calls(log, newest=3, before="nope\ud800")) == []


def test_a_plugin_filter_matches_the_name_as_written_only(log):
    """SQLite's LIKE ignores case: the index is searched for the name itself, so a name in another
    case finds nothing, reports nothing and leaves the index as it was."""
    write_log(log)
    skipped: list[tuple[str, str]] = []
    assert list(functai.read_calls(log, plugin="BRIEF", skipped=skipped)) == [] and skipped == []
    assert len(list(functai.read_calls(log, plugin="brief", skipped=skipped))) == 4 and skipped == []


def test_a_lone_surrogate_in_a_records_field_is_kept_and_found(log):
    """A code no database can hold as it is (a lone surrogate): the record is kept, indexed as its
    escape, and found by the code as it was given."""
    code = "refus\udce9"

    def refusing(request):
        raise functai.ModelError("refused", code=code)

    write_log(log, n=1)
    with functai.settings(client=ScriptedLM(reply=refusing), log_calls=log):
        with pytest.raises(functai.FunctAIError):
            inner("refused")
    (newest,) = functai.read_calls(log, newest=1)
    assert newest.error["code"] == code
    assert [r.id for r in functai.read_calls(log, error=code)] == [newest.id]
    assert [r.id for r in functai.read_calls(log)][-1] == newest.id
    assert newest.id in [r.id for r in functai.read_calls(log, error=True)]


# -- a call log written by an older functai ---------------------------------------------------------


def old_log(tmp_path, kind):
    if kind == "folder":
        shutil.copytree(DATA / "calllog_16777cc", tmp_path / "old")
        return str(tmp_path / "old")
    shutil.copy(DATA / "calllog_16777cc.db", tmp_path / "old.db")
    return "sqlite:///" + str(tmp_path / "old.db")


@pytest.mark.parametrize("kind", ["folder", "sqlite"])
def test_a_log_written_by_16777cc_is_read_by_every_filter_and_indexed_without_loss(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(logindex, "SMALL", 0)
    log = old_log(tmp_path, kind)
    before = [r.to_dict() for r in functai.read_calls(log)]
    assert len(before) == 23 and sum(1 for r in before if r.get("rating")) == 2
    check_every_filter(log)  # an old SQLite log: read whole (a read changes nothing), by the same query
    if kind == "sqlite":
        db = sqlite3.connect(str(tmp_path / "old.db"))
        assert db.execute("SELECT value FROM functai_meta").fetchone() == ("2",)
        with functai.settings(client=ScriptedLM(reply=reply), log_calls=log):
            inner("written by today's functai")  # the first write brings the schema forward, and fills it
        assert db.execute("SELECT value FROM functai_meta").fetchone() == ("3",)
        assert db.execute("SELECT COUNT(*) FROM functai_calls WHERE started IS NULL").fetchone() == (0,)
        before.append(next(functai.read_calls(log, newest=1)).to_dict())
    else:
        assert (tmp_path / "old" / "calls.index.sqlite").exists()
    assert [r.to_dict() for r in functai.read_calls(log)] == before  # nothing lost, nothing changed
    check_every_filter(log)


def test_calls_an_older_functai_logs_after_the_schema_moved_on_are_found_by_every_filter(tmp_path):
    """A rolling upgrade: a process still on store schema 2 writes only each call's line after one on
    schema 3 added the columns; a filtered read fills them (the log's order and filters see them)."""
    log = old_log(tmp_path, "sqlite")
    with functai.settings(client=ScriptedLM(reply=reply), log_calls=log):
        inner("written by today's functai")  # brings the schema forward
    db = sqlite3.connect(str(tmp_path / "old.db"))
    newest = next(functai.read_calls(log, newest=1)).to_dict()
    for n, function in enumerate(["inner", "outer"]):  # as schema 2 appends: the line, no columns
        line = {**newest, "id": f"{n:016x}", "function": function, "started": f"2999-01-0{n + 1}T00:00:00.000+00:00"}
        db.execute("INSERT INTO functai_calls (id, line) VALUES (?, ?)", (line["id"], json.dumps(line)))
    db.execute("INSERT INTO functai_calls (id, line) VALUES ('x', 'not a record')")
    db.commit()
    assert [r.id for r in functai.read_calls(log, newest=2)] == [f"{1:016x}", f"{0:016x}"]
    assert f"{0:016x}" in ids(log, function="inner") and f"{1:016x}" in ids(log, function="outer")
    check_every_filter(log)
    assert db.execute("SELECT COUNT(*) FROM functai_calls WHERE started IS NULL").fetchone() == (0,)


# -- the index beside a folder log is never trusted over the log -----------------------------------


@pytest.fixture
def big_log(tmp_path, monkeypatch):
    monkeypatch.setattr(logindex, "SMALL", 0)
    log = tmp_path / "calls"
    write_log(str(log))
    return log


def ids(log, **query):
    return [r.id for r in functai.read_calls(log, **query)]


def test_a_damaged_or_foreign_index_file_is_made_again(big_log):
    expected = ids(big_log, newest=5)
    for damage in (b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 5000, b""):
        logindex._indexes.clear()  # as a new process finds it
        (big_log / "calls.index.sqlite").write_bytes(damage)
        assert ids(big_log, newest=5) == expected
    assert sqlite3.connect(big_log / "calls.index.sqlite").execute("SELECT COUNT(*) FROM functai_calls").fetchone() \
        == (len(list(functai.read_calls(big_log))),)


def test_a_reader_never_finds_the_index_empty_while_another_process_makes_it_again(big_log):
    expected = ids(big_log, newest=3)
    [reader] = [index for index in logindex._indexes.values() if index.folder == str(big_log)]
    other = logindex.LogIndex(reader.folder)  # another process, which finds the index stale
    caught_up = reader._catch_up

    def forgotten_meanwhile(conn, name):  # between the reader's look at the log and its query
        caught_up(conn, name)
        other._forget(other._connection())

    reader._catch_up = forgotten_meanwhile
    assert ids(big_log, newest=3) == expected
    del reader._catch_up
    assert ids(big_log, newest=3) == expected and ids(big_log, function="inner")


def test_an_index_of_another_version_is_made_again(big_log):
    expected = ids(big_log, function="inner")
    logindex._indexes.clear()
    db = sqlite3.connect(big_log / "calls.index.sqlite")
    db.execute("PRAGMA user_version = 99")
    db.commit()
    assert ids(big_log, function="inner") == expected


@pytest.mark.parametrize("edit", ["line removed", "cut short", "same size in place", "in place, then appended",
                                  "replaced", "a column in place, then appended"])
def test_a_log_edited_by_hand_is_read_as_it_now_is(big_log, edit):
    path = big_log / "calls.jsonl"
    write_log(str(big_log), n=30)  # long enough that its middle is far from both ends
    ids(big_log, newest=3)  # indexed as it was
    lines = path.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    victim = functai.CallRecord.from_dict(json.loads(lines[middle]))
    if edit == "line removed":
        path.write_bytes(b"".join(lines[:middle] + lines[middle + 1:]))
    elif edit == "cut short":
        path.write_bytes(b"".join(lines[:middle]))
    elif edit.startswith(("same size", "in place")):  # one id changed: neither the size nor the ends change
        with open(path, "r+b") as handle:
            handle.seek(sum(map(len, lines[:middle])))
            handle.write(lines[middle].replace(victim.id.encode(), victim.id[::-1].encode()))
        if edit.endswith("appended"):  # and the size grows: only a record read shows the index is wrong
            write_log(str(big_log), n=1)
    elif edit.startswith("a column"):  # the function's name changed: the id is as it was
        with open(path, "r+b") as handle:
            handle.seek(sum(map(len, lines[:middle])))
            handle.write(lines[middle].replace(b'"function":"inner"', b'"function":"innex"'))
        write_log(str(big_log), n=1)
        assert ids(big_log, id=victim.id) == [victim.id]  # read, and its columns found changed: indexed again
        assert ids(big_log, function="innex") == [victim.id] and victim.id not in ids(big_log, function="inner")
    else:
        os.replace(path, big_log / "old")
        (big_log / "new").write_bytes(b"".join(lines[middle:]))
        os.replace(big_log / "new", path)
    every = list(functai.read_calls(big_log))
    if edit == "same size in place":  # written since it was indexed, at the same size: indexed again
        assert ids(big_log, id=victim.id[::-1]) == [victim.id[::-1]]
    assert ids(big_log, id=victim.id) == ([victim.id] if edit.startswith(("replaced", "a column")) else [])
    if edit.startswith(("same size", "in place")):
        assert ids(big_log, id=victim.id[::-1]) == [victim.id[::-1]]
    assert ids(big_log, newest=1000) == reference(every, newest=1000)
    check_every_filter(str(big_log))


def test_a_line_being_written_is_indexed_once_it_is_whole(big_log):
    path = big_log / "calls.jsonl"
    whole = next(functai.read_calls(big_log, newest=1)).to_dict()
    count = len(ids(big_log, newest=1000))
    line = json.dumps({**whole, "id": "f" * 16, "started": "2999-01-01T00:00:00.000+00:00"}).encode()
    with open(path, "ab") as handle:
        handle.write(line[:40])  # a writer halfway through
        handle.flush()
        assert len(ids(big_log, newest=1000)) == count
        handle.write(line[40:] + b"\n")
    assert ids(big_log, newest=1) == ["f" * 16]


def test_damaged_lines_are_reported_on_every_read_and_skipped(big_log):
    with open(big_log / "calls.jsonl", "ab") as handle:
        handle.write(b"not json\n[1, 2]\n")
    for _ in range(2):
        skipped: list = []
        assert len(list(functai.read_calls(big_log, newest=1000, skipped=skipped))) == 21
        assert [why for _, why in skipped] == ["not JSON", "a JSON list, not an object"]
        assert skipped[0][0].endswith("calls.jsonl:22")


def test_a_folder_that_cannot_be_written_is_indexed_in_memory(big_log, tmp_path):
    with tmpfs(tmp_path / "ro", "size=4m") as where:
        ids(big_log, newest=1)  # the index made, then one line edited: the copy's index is stale
        shutil.copy(big_log / "calls.index.sqlite", where / "calls.index.sqlite")
        lines = (big_log / "calls.jsonl").read_bytes().splitlines(keepends=True)
        edited = json.loads(lines[2])
        lines[2] = lines[2].replace(edited["id"].encode(), edited["id"][::-1].encode())
        (where / "calls.jsonl").write_bytes(b"".join(lines))
        shutil.copy(big_log / "ratings.jsonl", where / "ratings.jsonl")
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        every = list(functai.read_calls(where))
        assert ids(where, newest=100) == reference(every, newest=100)
        assert ids(where, id=edited["id"][::-1]) == [edited["id"][::-1]] and ids(where, id=edited["id"]) == []
        assert [r.rating for r in functai.read_calls(where, rated=True, newest=5)] == \
            [r.rating for r in functai.read_calls(big_log, rated=True, newest=5)]
        assert sorted(os.listdir(where)) == ["calls.index.sqlite", "calls.jsonl", "ratings.jsonl"]


def test_a_full_disk_while_indexing_answers_from_memory_and_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(logindex, "SMALL", 0)
    with tmpfs(tmp_path / "disk", "size=96k") as where:
        write_log(str(where))
        logindex._indexes.clear()
        os.remove(where / "calls.index.sqlite")
        every = (where / "calls.jsonl").read_bytes()
        fill(where)  # the disk full to the last byte
        assert len(ids(where, newest=100)) == 21
        assert (where / "calls.jsonl").read_bytes() == every


INDEXER = """
import sys, functai
from functai._stores import logindex
logindex.SMALL = 0
sys.stdin.readline()  # wait for the go
print(len(list(functai.read_calls(sys.argv[1], newest=1000))))
"""


def test_two_processes_indexing_at_once_index_each_call_once(tmp_path):
    log = tmp_path / "calls"
    with functai.settings(client=ScriptedLM(reply=reply), log_calls=str(log)):
        for i in range(400):
            inner(f"call {i}")
    workers = [subprocess.Popen([sys.executable, "-c", INDEXER, str(log)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(3)]
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()
    assert [worker.communicate(timeout=120)[0].strip() for worker in workers] == ["400"] * 3
    db = sqlite3.connect(log / "calls.index.sqlite")
    assert db.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM functai_calls").fetchone() == (400, 400)


def test_threads_read_pages_while_calls_are_logged(big_log):
    stop = threading.Event()
    problems: list = []

    def read() -> None:
        while not stop.is_set():
            page = list(functai.read_calls(big_log, newest=10))
            keys = [(r.started, r.id) for r in page]
            if len(set(keys)) != len(keys) or [k[0] for k in keys] != sorted((k[0] for k in keys), reverse=True):
                problems.append(keys)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    with functai.settings(client=ScriptedLM(reply=reply), log_calls=str(big_log)):
        for i in range(150):
            inner(f"while read {i}")
    stop.set()
    for reader in readers:
        reader.join()
    assert problems == []
    assert len(ids(big_log, function="inner", newest=1000)) == 20 + 150  # every inner call, the outer one not


# -- the commands -------------------------------------------------------------------------------------


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, out, err)
    return status, out.getvalue(), err.getvalue()


def test_functai_calls_shows_the_newest_and_show_finds_a_call_by_its_start(big_log):
    every = list(functai.read_calls(big_log))
    status, out, _ = run(["calls", str(big_log), "--limit", "3"])
    assert status == 0
    assert [line.split()[1] for line in out.splitlines()[1:]] == reference(every, newest=3)[::-1]  # oldest on top
    record = every[7]
    status, out, _ = run(["show", record.id[:9], "--log", str(big_log)])
    assert status == 0 and out.splitlines()[0].split() == ["call:", record.id]
    status, _, err = run(["show", "", "--log", str(big_log)])
    assert status != 0 and "call-id" in err
    with functai.settings(client=ScriptedLM(reply=reply), log_calls=str(big_log)):
        functai.rate(record, good=True, by="cy")
    status, out, _ = run(["show", record.id, "--log", str(big_log)])
    assert "rating:" in out and "good" in out


def test_a_call_is_found_by_the_start_of_its_id_in_every_log(log):
    from functai._calls.reading import find_calls
    from functai._stores.callquery import CallQuery

    every = write_log(log)
    target = every[4]
    found = find_calls(log, CallQuery(id=target.id[:10], prefix=True, newest=2))
    assert [r.id for r in found] == [r.id for r in every if r.id.startswith(target.id[:10])][:2]
    assert find_calls(log, CallQuery(id=target.id[:10] + "\U0010ffff", prefix=True, newest=2)) == []


def test_a_postgresql_log_of_store_schema_2_is_read_then_migrated_by_its_first_write(postgres_url, monkeypatch):
    """16777cc's tables (schema 2), holding the calls 16777cc wrote, in a PostgreSQL schema."""
    import psycopg

    from functai._stores.opening import forget

    old = sqlite3.connect(DATA / "calllog_16777cc.db")
    calls = old.execute("SELECT id, line FROM functai_calls ORDER BY seq").fetchall()
    ratings = old.execute("SELECT call, line FROM functai_ratings ORDER BY seq").fetchall()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for statement in (
            "CREATE TABLE functai_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "INSERT INTO functai_meta VALUES ('schema', '2')",
            "CREATE TABLE functai_records (conversation text NOT NULL, position bigint NOT NULL, data text NOT NULL, "
            "kind text, turn text, parent text, PRIMARY KEY (conversation, position))",
            "CREATE INDEX functai_records_turn ON functai_records (conversation, turn)",
            "CREATE TABLE functai_calls (seq bigserial PRIMARY KEY, id text NOT NULL, line text NOT NULL)",
            "CREATE TABLE functai_ratings (seq bigserial PRIMARY KEY, call text NOT NULL, line text NOT NULL)",
        ):
            conn.execute(statement)
        with conn.cursor() as cursor:
            cursor.executemany("INSERT INTO functai_calls (id, line) VALUES (%s, %s)", calls)
            cursor.executemany("INSERT INTO functai_ratings (call, line) VALUES (%s, %s)", ratings)
    forget(postgres_url)
    before = [r.to_dict() for r in functai.read_calls(postgres_url)]
    assert len(before) == 23 and sum(1 for r in before if r.get("rating")) == 2
    check_every_filter(postgres_url)  # read whole, by the same query, and nothing written
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT value FROM functai_meta").fetchone() == ("2",)
    with functai.settings(client=ScriptedLM(reply=reply), log_calls=postgres_url):
        inner("written by today's functai")  # the first write brings the schema forward, and fills it
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT value FROM functai_meta").fetchone() == ("3",)
        assert conn.execute("SELECT COUNT(*) FROM functai_calls WHERE started IS NULL").fetchone() == (0,)
    before.append(next(functai.read_calls(postgres_url, newest=1)).to_dict())
    assert [r.to_dict() for r in functai.read_calls(postgres_url)] == before
    check_every_filter(postgres_url)


def test_a_log_file_that_cannot_be_read_is_named_with_a_code(tmp_path, monkeypatch):
    monkeypatch.setattr(logindex, "SMALL", 0)
    log = tmp_path / "calls"
    (log / "calls.jsonl").mkdir(parents=True)  # a folder where the file should be
    for query in ({}, {"newest": 1}, {"function": "inner"}):
        with pytest.raises(functai.FunctAIError) as info:
            list(functai.read_calls(log, **query))
        assert info.value.code == "store-unreadable" and "calls.jsonl" in info.value.message, query
