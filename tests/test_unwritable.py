"""Writes that fail (issue 11, point 7): the call log, ratings and stores finish a
short write or cut it back and raise ``store-unwritable`` naming the path; a
``log_calls`` folder that can never be written is refused when it is set,
before a model is paid for.

The full disk and the read-only folder are real: small tmpfs mounts (root can
mount them; elsewhere these tests skip, and the monkeypatched short writes
still check the logic).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tmpfs import fill, tmpfs

import functai
from functai import FunctAIError, ai
from functai import _logfiles
from functai._calls import reading, records
from functai._stores import FolderStore
from functai._evaluation import rate
from functai.testing import ScriptedLM


@ai
def echo(text: str) -> str:
    """Echo the text."""


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB file system, filled to the brim after ``fill()``."""
    with tmpfs(tmp_path / "disk") as where:
        yield where, lambda: fill(where)


@pytest.fixture
def read_only(tmp_path):
    with tmpfs(tmp_path / "ro", "ro") as where:
        yield where


def _unwritable(info, path) -> None:
    assert info.value.code == "store-unwritable", info.value
    assert str(path) in str(info.value)


def test_log_calls_where_a_file_is_refused_when_set(tmp_path):
    (tmp_path / "afile").write_text("x")
    bad = tmp_path / "afile" / "calls"
    with pytest.raises(FunctAIError) as info:
        functai.configure(log_calls=str(bad))
    _unwritable(info, bad)
    assert "a file is where a folder should be" in str(info.value)
    with pytest.raises(FunctAIError) as info:
        functai.settings(log_calls=str(tmp_path / "afile"))
    _unwritable(info, tmp_path / "afile")
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "calls.jsonl").mkdir()  # a folder where the log file should be
    with pytest.raises(FunctAIError) as info:
        functai.configure(log_calls=str(tmp_path / "log"))
    _unwritable(info, tmp_path / "log" / "calls.jsonl")
    functai.configure(log_calls=str(tmp_path / "not" / "yet" / "there"))  # creatable: fine, nothing created
    assert not (tmp_path / "not").exists()


def test_log_calls_on_a_read_only_disk_is_refused_before_the_model_is_paid(read_only, monkeypatch):
    with pytest.raises(FunctAIError) as info:
        functai.configure(log_calls=str(read_only / "calls"))
    _unwritable(info, read_only / "calls")
    assert "read-only" in str(info.value)
    # Set another way (the environment's process layer is not checked at import): the call refuses
    # before it asks the model.
    monkeypatch.setenv("FUNCTAI_LOG_CALLS", str(read_only / "calls"))
    from functai._layers import reset

    reset()
    lm = ScriptedLM(["never"])
    with functai.settings(client=lm):
        with pytest.raises(FunctAIError) as info:
            echo("hi")
    _unwritable(info, read_only / "calls")
    assert lm.requests == []


def test_a_store_on_a_read_only_disk_refuses_before_the_model_is_asked(read_only):
    lm = ScriptedLM(["never"])
    functai.configure(client=lm)
    chat = echo.conversation("c", store=str(read_only / "store"))
    with pytest.raises(FunctAIError) as info:
        chat("hi")
    _unwritable(info, read_only / "store")
    assert lm.requests == []


def test_a_store_where_a_file_is(tmp_path):
    (tmp_path / "afile").write_text("x")
    lm = ScriptedLM(["never"])
    functai.configure(client=lm)
    with pytest.raises(FunctAIError) as info:
        echo.conversation("c", store=str(tmp_path / "afile"))("hi")
    _unwritable(info, tmp_path / "afile")
    assert lm.requests == []
    with pytest.raises(FunctAIError) as info:
        FolderStore(tmp_path / "afile" / "deeper").append("c", [{"n": 1}])
    _unwritable(info, tmp_path / "afile")


def test_a_full_disk_loses_no_record_and_leaves_no_stray_bytes(small_disk):
    disk, fill = small_disk
    log = disk / "calls"
    functai.configure(client=ScriptedLM(reply=lambda r: "ok " + "y" * 2000), log_calls=str(log))
    echo("first")
    rate(next(reading.read_calls(log)).id, good=True, log=str(log))
    store = FolderStore(disk / "store")
    store.append("c", [{"n": 0}])
    sizes = {p: p.stat().st_size for p in (log / "calls.jsonl", log / "ratings.jsonl", store.path_for("c"))}
    fill()

    with pytest.raises(FunctAIError) as info:
        echo("second " + "z" * 4000)
    _unwritable(info, log / "calls.jsonl")
    assert "disk is full" in str(info.value)
    with pytest.raises(FunctAIError) as info:
        rate(next(reading.read_calls(log)).id, good=False, correction="c" * 8000, log=str(log))
    _unwritable(info, log / "ratings.jsonl")
    with pytest.raises(FunctAIError) as info:
        store.append("c", [{"n": 1, "pad": "p" * 8000}])
    _unwritable(info, store.path_for("c"))
    assert {p: p.stat().st_size for p in sizes} == sizes  # nothing half written anywhere

    os.remove(disk / "filler")  # space again: everything goes on as before
    echo("third")
    assert [r.inputs["text"] for r in reading.read_calls(log)] == ["first", "third"]
    assert store.append("c", [{"n": 1}], expect=1) == 2


def test_a_short_write_to_the_call_log_is_finished(tmp_path, monkeypatch):
    path = tmp_path / "log" / records.LOG_FILE
    real_write = os.write

    def short(fd, data):
        return real_write(fd, data[: max(1, len(data) // 3)])  # a third at a time

    monkeypatch.setattr(os, "write", short)
    records.append_line(path, {"a": "x" * 300})
    records.append_line(path, {"b": 2})
    monkeypatch.undo()
    assert list(_logfiles.read_lines(path)) == [{"a": "x" * 300}, {"b": 2}]


def test_a_write_that_fails_halfway_is_cut_back(tmp_path, monkeypatch):
    path = tmp_path / "log" / records.LOG_FILE
    records.append_line(path, {"first": 1})
    before = path.read_bytes()
    real_write = os.write
    calls = []

    def short_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[:7])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(FunctAIError) as info:
        records.append_line(path, {"second": 2})
    monkeypatch.undo()
    _unwritable(info, path)
    assert path.read_bytes() == before
    records.append_line(path, {"third": 3})
    assert list(_logfiles.read_lines(path)) == [{"first": 1}, {"third": 3}]


@pytest.mark.skipif(not hasattr(os, "setuid") or os.geteuid() != 0, reason="needs root to become another user")
def test_permission_denied_names_the_path(tmp_path):
    """As another user (root passes permission checks): a folder it may not write."""
    shared = tmp_path.parent / f"functai-perm-{uuid.uuid4().hex[:8]}"
    shared.mkdir(mode=0o755)
    try:
        os.chmod(tmp_path.parent, 0o755)
        os.chmod(tmp_path, 0o755)
        locked = shared / "locked"
        locked.mkdir(mode=0o755)  # root's: others may read, not write
        code = (  # everything imported first: the interpreter's own files may be root's only
            "import os, sys, functai, structlog, difflib, msgspec.json\n"
            "from functai.stores import FolderStore\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "try:\n"
            f"    functai.configure(log_calls={str(locked / 'calls')!r})\n"
            "except functai.FunctAIError as e:\n"
            "    print(e.code, 'permission denied' in str(e))\n"
            "try:\n"
            f"    FolderStore({str(locked / 'store')!r}).append('c', [{{'n': 1}}])\n"
            "except functai.FunctAIError as e:\n"
            "    print(e.code, 'permission denied' in str(e))\n"
        )
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run([sys.executable, "-c", code],
                              capture_output=True, text=True, env=env, cwd="/")
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[:2] == ["store-unwritable True", "store-unwritable True"]
    finally:
        import shutil

        shutil.rmtree(shared)


# -- SQL stores: read-only and full, each as the folder store says it ---------------------------------------


def _sqlite_with_a_turn(where):
    """A SQLite store (and call log) at ``where`` holding one done turn and one logged call."""
    url = "sqlite:///" + str(where / "s.db")
    functai.configure(client=ScriptedLM(reply=lambda r: "ok"), log_calls=url)
    echo.conversation("c", store=url)("hi")
    functai.configure(log_calls=None)
    from functai._stores.opening import forget

    forget(url)  # as a new process would find it: no connection open, no -wal file left
    return url


def test_a_sqlite_store_on_a_read_only_disk_reads_and_refuses_writes(tmp_path):
    with tmpfs(tmp_path / "ro", "size=4m") as where:
        _read_only_sqlite(where)


def _read_only_sqlite(where):
    try:
        url = _sqlite_with_a_turn(where)
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        lm = ScriptedLM(["never"])
        functai.configure(client=lm)
        chat = echo.conversation("c", store=url)  # reading a read-only store works
        assert [(t.state, t.outputs) for t in chat.turns] == [("done", {"output": "ok"})]
        assert [r.inputs["text"] for r in reading.read_calls(url)] == ["hi"]
        with pytest.raises(FunctAIError) as info:
            chat("again")
        _unwritable(info, where / "s.db")
        assert lm.requests == []  # refused before the model was asked
        with pytest.raises(FunctAIError) as info:
            functai.configure(log_calls=str(where / "s.db"))  # (the URL itself was found writable before)
        _unwritable(info, where)
        assert "read-only" in info.value.message
    finally:
        from functai._stores.opening import forget

        forget("sqlite:///" + str(where / "s.db"))


def test_a_full_disk_under_a_sqlite_store_is_store_unwritable(tmp_path):
    with tmpfs(tmp_path / "disk", "size=1m") as where:
        _full_sqlite(where)


def _full_sqlite(where):
    try:
        url = _sqlite_with_a_turn(where)
        from functai._stores import open_store

        store = open_store(url)
        before = store.count("c")
        fill(where)  # the disk, filled to the brim
        with pytest.raises(FunctAIError) as info:
            store.append("c", [{"pad": "p" * 200_000}])
        _unwritable(info, where / "s.db")
        assert "full" in info.value.message
        with pytest.raises(FunctAIError) as info:
            store.log_lines("calls", [("x", json_line("p" * 200_000))])
        _unwritable(info, where / "s.db")
        with pytest.raises(FunctAIError) as info:  # a new store there: its tables cannot be made
            open_store("sqlite:///" + str(where / "new.db")).append("c", [{"n": 1}])
        _unwritable(info, where / "new.db")
        os.remove(where / "filler")  # space again: it goes on
        assert store.count("c") == before and store.append("c", [{"n": 1}], expect=before) == before + 1
    finally:
        from functai._stores.opening import forget

        for name in ("s.db", "new.db"):
            forget("sqlite:///" + str(where / name))


def json_line(text: str) -> str:
    return '{"pad": "' + text + '"}'


@pytest.fixture
def readable_by_others():
    """A SQLite store with one turn, in a folder under /tmp that other users may read but not write
    (wherever the checkout lives); and the environment a child that becomes another user runs with."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="functai-ro-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)
        url = _sqlite_with_a_turn(shared)
        os.chmod(shared / "s.db", 0o644)
        yield url, {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(sys.path)}
    finally:
        shutil.rmtree(shared)


@pytest.mark.skipif(not hasattr(os, "setuid") or os.geteuid() != 0, reason="needs root to become another user")
def test_a_sqlite_store_another_user_may_only_read(readable_by_others):
    """As another user (root passes permission checks): a database in a folder it may read, not write."""
    url, env = readable_by_others
    code = (
        "import os, functai, structlog, difflib, msgspec.json, sqlite3, functai._calls.records, functai._stores.calllog\n"
        "from functai.stores import open_store\n"
        f"store = open_store({url!r})  # everything imported first: the interpreter's files may be root's only\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "print(store.count('c'), len(list(functai.read_calls(" + repr(url) + "))))\n"
        "try:\n"
        "    store.append('c', [{'n': 1}])\n"
        "except functai.FunctAIError as e:\n"
        "    print(e.code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4", "1", "store-unwritable"], done.stdout


@pytest.mark.skipif(not hasattr(os, "setuid") or os.geteuid() != 0, reason="needs root to become another user")
def test_a_reader_that_may_not_write_sees_what_the_owner_writes_later(readable_by_others):
    """A store read immutable (no -shm can be made) is not read from a kept connection once its owner wrote."""
    from functai._stores import open_store
    from functai._stores.opening import forget

    url, env = readable_by_others
    code = (
        "import os, sys, functai, structlog, difflib, msgspec.json, sqlite3, functai._calls.records\n"
        "from functai.stores import open_store\n"
        f"store = open_store({url!r})\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "for _ in range(2):\n"
        "    print(store.count('c'), store.read('c')[-1].get('n'), flush=True)\n"
        "    sys.stdin.readline()  # the owner writes in between\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, cwd="/") as reader:
        first = reader.stdout.readline().split()
        open_store(url).append("c", [{"n": 7}])
        forget(url)  # the owner done: its -wal checkpointed into the file
        reader.stdin.write("\n")
        reader.stdin.flush()
        second = reader.stdout.readline().split()
        reader.stdin.write("\n")
        out, err = reader.communicate()
    assert reader.returncode == 0, err
    assert first == ["4", "None"] and second == ["5", "7"], (first, second, err)


def test_a_read_only_postgresql_session_reads_and_refuses_writes(postgres_url):
    from functai._stores import open_store
    from functai._stores.opening import forget

    functai.configure(client=ScriptedLM(reply=lambda r: "ok"), log_calls=postgres_url)
    echo.conversation("c", store=postgres_url)("hi")
    functai.configure(log_calls=None)
    read_only = postgres_url + "%20-cdefault_transaction_read_only%3Don"
    try:
        store = open_store(read_only)
        assert store.count("c") == 4 and [r.inputs["text"] for r in reading.read_calls(read_only)] == ["hi"]
        for write in (lambda: store.append("c", [{"n": 1}]), lambda: store.log_lines("calls", [("x", "{}")])):
            with pytest.raises(FunctAIError) as info:
                write()
            assert info.value.code == "store-unwritable", info.value
        fresh = read_only.replace("search_path%3D", "search_path%3Dnone_")  # a schema with no tables yet
        assert open_store(fresh).count("c") == 0  # a read creates no tables
        with pytest.raises(FunctAIError) as info:
            open_store(fresh).append("c", [{"n": 1}])  # creating them is a write too
        assert info.value.code == "store-unwritable", info.value
    finally:
        forget(read_only)
