"""The call log as lines written by functai._appendlog: strict JSON, lock-free appends, torn tails.

Real processes append at once; a torn tail is made the way a killed writer
leaves one (part of a line, no newline) by another open file.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from tmpfs import tmpfs

import functai
from functai import ai
from functai._appendlog import LineFile, file_system, lock_free
from functai import _logfiles
from functai._calls import reading, records
from functai._stores import FolderStore
from functai.testing import ScriptedLM, log_events


@ai
def measure(x: float) -> float:
    """Measure x."""


@ai
def echo(text: str) -> str:
    """Echo the text."""


def strict_lines(path) -> list[dict]:
    """Every line of the file, parsed as JSON proper (NaN and Infinity refused)."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    with open(path, "rb") as file:
        return [json.loads(line, parse_constant=refuse) for line in file.read().splitlines()]


def test_a_nan_in_a_record_is_written_as_text_named_in_a_warning_and_the_call_keeps_its_answer(tmp_path):
    functai.configure(client=ScriptedLM(["NaN"]), log_calls=str(tmp_path))
    with log_events() as logged:
        value = measure(float("inf"))
    assert logged.named(r"non-finite number was written as text: where=inputs\.x, output")
    assert value != value  # the caller gets the model's NaN
    (line,) = strict_lines(tmp_path / "calls.jsonl")
    assert line["inputs"] == {"x": "Infinity"} and line["output"] == "NaN"
    (record,) = functai.read_calls(tmp_path)
    assert record.inputs == {"x": "Infinity"} and record.output == "NaN"


def test_a_nan_in_a_rating_or_a_store_record_is_written_as_text(tmp_path):
    store = FolderStore(tmp_path / "store")
    with log_events() as logged:
        store.append("c", [{"value": {"scores": [0.5, float("nan")]}}])
    assert logged.named(r"where=value\.scores\[1\]")
    assert strict_lines(store.path_for("c")) == [{"value": {"scores": [0.5, "NaN"]}}]
    with log_events() as logged:
        records.append_line(tmp_path / "log" / "ratings.jsonl", {"call": "x", "score": float("-inf")})
    assert logged.named("where=score")
    assert strict_lines(tmp_path / "log" / "ratings.jsonl") == [{"call": "x", "score": "-Infinity"}]


def test_a_lone_surrogate_and_a_huge_integer_are_logged_exactly(tmp_path):
    functai.configure(client=ScriptedLM(["ok"]), log_calls=str(tmp_path))
    echo("half a pair: \ud83d")  # the old encoder failed the call here (UTF-8 cannot hold it)
    (record,) = functai.read_calls(tmp_path)
    assert record.inputs == {"text": "half a pair: \ud83d"}
    (tmp_path / "calls.jsonl").read_bytes().decode("utf-8")


def test_the_dict_of_a_record_has_every_field_in_order(tmp_path):
    functai.configure(client=ScriptedLM(["ok"]))
    record = echo.run("x").record
    record.replayable, record.heard, record.rating = False, [{"h": 1}], {"good": True}
    import attrs

    assert list(record.to_dict()) == [f.name for f in attrs.fields(type(record))]


def test_appends_take_no_lock_on_a_local_file_system(tmp_path):
    """Another process holding the file's exclusive lock does not stop a line (it used to wait for it)."""
    path = tmp_path / "calls.jsonl"
    records.append_line(path, {"n": 0})
    assert lock_free(str(tmp_path)), file_system(str(tmp_path))
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        code = f"from functai._calls import records; records.append_line({str(path)!r}, {{'n': 1}})"
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.getcwd()},
                              timeout=60, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    finally:
        os.close(fd)
    assert strict_lines(path) == [{"n": 0}, {"n": 1}]


WRITER = textwrap.dedent("""
    import os, sys
    from functai._calls import records
    path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(count):
        size = (i * 7919) % 70000 if i % 5 == 0 else 100  # some lines span many pages
        records.append_line(path, {"tag": tag, "i": i, "pad": tag * size})
""")


@pytest.mark.parametrize("locked", [False, True], ids=["lock-free", "locked"])
def test_processes_appending_at_once_never_interleave(tmp_path, locked):
    path = tmp_path / "calls.jsonl"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    code = WRITER
    if locked:  # the protocol kept for file systems where appends may interleave
        code = "import functai._appendlog as a; a.lock_free = lambda folder: False\n" + code
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), tag, "150"], env=env) for tag in "pqrs"]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    lines = strict_lines(path)
    assert len(lines) == 600
    for tag in "pqrs":
        mine = [line for line in lines if line["tag"] == tag]
        assert [line["i"] for line in mine] == list(range(150))
        assert all(line["pad"] == tag * len(line["pad"]) for line in mine)


def test_a_forked_child_and_its_parent_log_through_their_own_files(tmp_path):
    path = tmp_path / "calls.jsonl"
    records.append_line(path, {"who": "parent", "i": -1})  # the parent's file is open before the fork
    pid = os.fork()
    if pid == 0:
        try:
            for i in range(100):
                records.append_line(path, {"who": "child", "i": i})
        finally:
            os._exit(0)
    for i in range(100):
        records.append_line(path, {"who": "parent", "i": i})
    os.waitpid(pid, 0)
    lines = strict_lines(path)
    assert len(lines) == 201  # no line lost, none written twice
    assert [x["i"] for x in lines if x["who"] == "child"] == list(range(100))
    assert [x["i"] for x in lines if x["who"] == "parent"] == list(range(-1, 100))


CAUGHT = "a write cut short (a crash while writing), with the next line caught on it; that line was written again"


def test_a_torn_tail_left_before_the_file_was_opened_does_not_swallow_the_next_line(tmp_path):
    path = tmp_path / "calls.jsonl"
    path.write_bytes(b'{"n": 0}\n{"n": "torn by a cr')
    records.append_line(path, {"n": 1})
    records.append_line(path, {"n": 2})
    skipped: list = []
    assert list(_logfiles.read_lines(path, skipped)) == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert skipped == [(f"{path}:2", CAUGHT)]


def test_a_tail_torn_by_another_process_after_ours_is_not_glued_to_our_next_line(tmp_path):
    path = tmp_path / "calls.jsonl"
    records.append_line(path, {"n": 0})  # our file is open, and trusts its own last line
    with open(path, "ab") as other:  # another writer, killed mid-line
        other.write(b'{"n": "killed mid-wri')
    records.append_line(path, {"n": 1})
    records.append_line(path, {"n": 2})
    skipped: list = []
    assert list(_logfiles.read_lines(path, skipped)) == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert skipped == [(f"{path}:2", CAUGHT)]  # the torn piece, with the first copy it caught


@pytest.mark.parametrize("locked", [False, True], ids=["lock-free", "locked"])
def test_a_last_record_left_without_its_newline_is_ended_not_lost(tmp_path, locked):
    """An editor that drops the file's last newline: the record is whole, and the next line ends it."""
    path = tmp_path / "calls.jsonl"
    path.write_bytes(b'{"n": 0}\n{"n": 1}')
    log = LineFile(str(path), "call log", locked=locked)
    try:
        assert log.append(b'{"n": 2}\n')
        assert log.append(b'{"n": 3}\n')
    finally:
        log.close()
    assert path.read_bytes() == b'{"n": 0}\n{"n": 1}\n{"n": 2}\n{"n": 3}\n'


def test_a_line_file_opened_locked_keeps_the_old_protocol(tmp_path):
    path = tmp_path / "calls.jsonl"
    path.write_bytes(b'{"n": 0}\n{"torn')
    log = LineFile(str(path), "call log", locked=True)
    try:
        assert log.append(b'{"n": 1}\n')
    finally:
        log.close()
    assert path.read_bytes() == b'{"n": 0}\n{"torn\x00\n{"n": 1}\n'


def test_file_system_names_a_tmpfs_mount(tmp_path):
    with tmpfs(tmp_path / "mnt") as where:
        (where / "sub").mkdir()
        assert file_system(str(where / "sub")) == "tmpfs" and lock_free(str(where / "sub"))


def test_a_short_write_split_by_another_writer_is_written_again_whole(tmp_path, monkeypatch):
    path = tmp_path / "calls.jsonl"
    records.append_line(path, {"n": 0})
    real_write = os.write
    other = os.open(path, os.O_WRONLY | os.O_APPEND)
    calls = []

    def short_then_interrupted(fd, data):
        calls.append(len(data))
        if len(calls) == 1:  # a third of our line, then another writer's whole line lands after it
            n = real_write(fd, data[: len(data) // 3])
            real_write(other, b'{"other": 1}\n')
            return n
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", short_then_interrupted)
    records.append_line(path, {"n": 1, "pad": "x" * 300})
    monkeypatch.undo()
    os.close(other)
    records.append_line(path, {"n": 2})
    skipped: list = []
    got = list(_logfiles.read_lines(path, skipped))
    assert [line.get("n") for line in got] == [0, 1, 2] and got[1]["pad"] == "x" * 300
    assert len(skipped) == 2  # our first third with the other line it caught, and our stranded rest


# -- where the log goes: checked when set; a server that cannot be reached keeps the answer ------------------


@pytest.mark.parametrize("bad", ["sqlite://", "sqlite:", "foo://x", "memory:", "postgresql://[::zz]/db", " "])
def test_a_log_calls_that_can_never_keep_a_log_is_refused_when_set(bad):
    for set_it in (lambda: functai.configure(log_calls=bad), lambda: functai.settings(log_calls=bad),
                   lambda: ai(log_calls=bad)(lambda text: None)):
        with pytest.raises(functai.FunctAIError) as info:
            set_it()
        assert info.value.code == "store-url", info.value


def test_a_sqlite_log_where_a_file_is_refused_when_set(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(functai.FunctAIError) as info:
        functai.configure(log_calls="sqlite:///" + str(tmp_path / "afile" / "calls.db"))
    assert info.value.code == "store-unwritable" and "a file is where a folder should be" in info.value.message
    functai.configure(log_calls="sqlite:///" + str(tmp_path / "not" / "yet" / "calls.db"))  # creatable: fine
    assert not (tmp_path / "not").exists()  # and nothing made by the check


def test_a_postgresql_log_that_cannot_be_reached_keeps_the_answer_and_warns_with_a_code():
    import socket

    with socket.socket() as sock:  # a port nothing listens on: bound, then closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://functai:s3cret@127.0.0.1:{port}/calls?connect_timeout=5"
    lm = ScriptedLM(["the answer"])
    functai.configure(client=lm, log_calls=url)  # accepted: the server is reached by the first call
    with log_events() as caught:
        assert echo("hi") == "the answer"  # paid for, and kept
    assert len(lm.requests) == 1
    (warned,) = [m for m in caught.messages if "call record not written" in m]
    assert "code=call-log-unreachable" in warned and f"127.0.0.1:{port}" in warned and "s3cret" not in warned


@pytest.mark.parametrize("bad", ["postgresql://u@host:notaport/db", "foo://u:pw@x/y"])
def test_a_log_calls_url_with_a_password_from_the_environment_is_checked_before_the_model_is_paid(bad, monkeypatch):
    from functai._layers import reset

    bad = bad.replace("u@", "u:pg-PASSWORD-0123@")  # each with a password: kept behind a handle
    monkeypatch.setenv("FUNCTAI_LOG_CALLS", bad)
    reset()  # the process layer as this environment starts it
    try:
        lm = ScriptedLM(["the answer"])
        with functai.settings(client=lm):
            with pytest.raises(functai.FunctAIError) as info:
                echo("hi")
        assert info.value.code == "store-url" and "PASSWORD" not in str(info.value)
        assert len(lm.requests) == 0  # refused before the model was paid
    finally:
        monkeypatch.delenv("FUNCTAI_LOG_CALLS")
        reset()


def test_a_store_url_with_a_nul_byte_is_refused_without_its_password():
    url = "postgresql://u:secretpw@host/db\x00"
    for refuse in (lambda: functai.configure(log_calls=url), lambda: echo.conversation("c", store=url)):
        with pytest.raises(functai.FunctAIError) as info:
            refuse()
        assert info.value.code == "store-url" and "secretpw" not in str(info.value), info.value


def _end_the_log_connection(url: str) -> None:
    """End the server session the call log's store holds, as a server restart or an admin would."""
    from store_fixtures import raw_sql

    from functai._stores.opening import open_url

    pid = open_url(url)._conn.info.backend_pid
    run = raw_sql(url)
    assert run(f"SELECT pg_terminate_backend({pid})") == [(True,)]
    while run(f"SELECT 1 FROM pg_stat_activity WHERE pid = {pid}"):  # the signal is sent; wait until it is gone
        time.sleep(0.01)


def test_a_postgresql_log_whose_session_was_ended_reconnects_and_keeps_every_record(postgres_url):
    lm = ScriptedLM(["one", "two"])
    functai.configure(client=lm, log_calls=postgres_url)
    assert echo("a") == "one"
    _end_the_log_connection(postgres_url)
    assert echo("b") == "two"  # the session is replaced before anything is sent on the dead one
    assert [r.output for r in functai.read_calls(postgres_url)] == ["one", "two"]


def test_a_postgresql_log_connection_lost_while_writing_keeps_the_answer_and_warns(postgres_url, monkeypatch):
    from functai._stores import postgres

    lm = ScriptedLM(["one", "two", "three"])
    functai.configure(client=lm, log_calls=postgres_url)
    assert echo("a") == "one"
    _end_the_log_connection(postgres_url)
    # as if it ended just after the look (raising=False: older code has no such look to skip)
    monkeypatch.setattr(postgres.PostgresStore, "_stale", lambda self, conn: False, raising=False)
    with log_events() as caught:
        assert echo("b") == "two"  # paid for, and kept
    (warned,) = [m for m in caught.messages if "call record not written" in m]
    assert "code=call-log-unreachable" in warned and "connection to the server was lost" in warned
    assert echo("c") == "three"  # the next call opens a new session
    assert [r.output for r in functai.read_calls(postgres_url)] == ["one", "three"]


def test_a_store_whose_entry_point_ends_the_process_is_store_url_not_a_silent_exit(tmp_path, monkeypatch):
    (tmp_path / "exit_store.py").write_text("raise SystemExit('no config')\n")
    info = tmp_path / "exit_store-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: exit-store\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[functai.stores]\nexitstore = exit_store:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(functai.FunctAIError) as info:
        functai.configure(log_calls="exitstore://x")
    assert info.value.code == "store-url" and "SystemExit: no config" in str(info.value)
