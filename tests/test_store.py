"""The conversation stores: append-only logs that survive crashes and concurrent writers."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from functai._stores import folder as folder_module
from functai._stores import (
    FolderStore,
    MemoryStore,
    Store,
    StoreConflict,
    open_store,
)
from functai._errors import FunctAIError
from functai.testing import log_events
from store_fixtures import store_url

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["memory", "folder", "sqlite", "postgresql"])
def any_store(request, tmp_path):
    if request.param == "memory":
        return MemoryStore()
    if request.param == "folder":
        return FolderStore(tmp_path / "convs")
    return open_store(store_url(request.param, tmp_path, request))


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


# -- the protocol, for both stores ------------------------------------------------


def test_both_stores_are_stores(tmp_path):
    assert isinstance(MemoryStore(), Store)
    assert isinstance(FolderStore(tmp_path), Store)


def test_round_trip_and_start(any_store):
    assert any_store.read("c1") == []
    assert any_store.count("c1") == 0
    assert any_store.conversations() == []
    assert any_store.append("c1", [{"n": 0}]) == 1
    assert any_store.append("c1", [{"n": 1}, {"n": 2, "text": "héllo\nwörld \u2028 ✓"}]) == 3
    assert any_store.count("c1") == 3
    assert [r["n"] for r in any_store.read("c1")] == [0, 1, 2]
    assert any_store.read("c1")[2]["text"] == "héllo\nwörld \u2028 ✓"
    assert [r["n"] for r in any_store.read("c1", 1)] == [1, 2]
    assert any_store.read("c1", 3) == []
    assert any_store.read("c1", 99) == []
    with pytest.raises(ValueError):
        any_store.read("c1", -1)
    any_store.append("b-2", [{"n": 0}])
    assert any_store.conversations() == ["b-2", "c1"]


def test_expect_conflict_appends_nothing(any_store):
    any_store.append("c", [{"n": 0}, {"n": 1}])
    with pytest.raises(StoreConflict) as caught:
        any_store.append("c", [{"n": 2}], expect=1)
    assert caught.value.count == 2
    assert caught.value.code == "store-conflict"
    assert isinstance(caught.value, FunctAIError)
    assert any_store.count("c") == 2
    assert any_store.append("c", [{"n": 2}], expect=2) == 3
    with pytest.raises(StoreConflict) as caught:
        any_store.append("new", [{"n": 0}], expect=1)
    assert caught.value.count == 0
    assert "new" not in any_store.conversations()
    assert any_store.append("new", [{"n": 0}], expect=0) == 1


def test_empty_append_checks_expect_and_creates_nothing(any_store):
    assert any_store.append("c", [], expect=0) == 0
    assert any_store.conversations() == []
    any_store.append("c", [{"n": 0}])
    assert any_store.append("c", [], sync=True) == 1
    with pytest.raises(StoreConflict):
        any_store.append("c", [], expect=0)


def test_all_or_none_for_bad_records(any_store):
    any_store.append("c", [{"n": 0}])
    circular: dict = {}
    circular["self"] = circular
    with pytest.raises(TypeError):
        any_store.append("c", [{"n": 1}, ["not", "a", "dict"]])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        any_store.append("c", [{"n": 1}, circular])
    assert any_store.read("c") == [{"n": 0}]


def test_records_are_copies_and_shaped_like_json(any_store):
    record = {"list": [1, 2], "when": object, 3: "int key", "s": "\ud800 lone surrogate"}
    any_store.append("c", [record])
    record["list"].append(3)
    got = any_store.read("c")[0]
    assert got == {"list": [1, 2], "when": str(object), "3": "int key", "s": "\ud800 lone surrogate"}
    got["list"].append(99)
    assert any_store.read("c")[0]["list"] == [1, 2]


@pytest.mark.parametrize("bad", ["../x", "a/b", "", ".hidden", "-x", "a\n", "a" * 201, "a b", "é", None, 5])
def test_conversation_ids_are_checked(any_store, bad):
    for call in (
        lambda: any_store.read(bad),
        lambda: any_store.count(bad),
        lambda: any_store.append(bad, [{"n": 0}]),
        lambda: any_store.sync(bad),
    ):
        with pytest.raises(FunctAIError) as caught:
            call()
        assert caught.value.code == "conversation-id"
    assert any_store.conversations() == []


def test_longest_id_is_fine(any_store):
    name = "A" + "b._-9" * 39 + "xxxx"
    assert len(name) == 200
    any_store.append(name, [{"n": 0}])
    assert any_store.conversations() == [name]


# -- the folder store -----------------------------------------------------------------


def test_file_layout_and_format(tmp_path):
    store = FolderStore(tmp_path / "convs")
    assert not (tmp_path / "convs").exists()  # created lazily
    store.read("c")
    assert not (tmp_path / "convs").exists()
    store.append("c", [{"b": 1, "a": "ü"}, {"x": None}])
    path = store.path_for("c")
    assert path == tmp_path / "convs" / "c.jsonl"
    assert path.read_bytes() == '{"b":1,"a":"ü"}\n{"x":null}\n'.encode()


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_modes_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        store = FolderStore(tmp_path / "deep" / "convs")
        store.append("c", [{"n": 0}])
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "deep" / "convs").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.path_for("c")).st_mode) == 0o600
    assert store.read("c") == [{"n": 0}]


def test_existing_folder_mode_left_alone(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    FolderStore(folder).append("c", [{"n": 0}])
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o755


def test_torn_last_line_is_ignored_and_terminated(tmp_path):
    store = FolderStore(tmp_path)
    store.append("c", [{"n": 0}, {"n": 1}])
    path = store.path_for("c")
    with open(path, "ab") as f:
        f.write(b'{"n":2,"text":"half wri')  # a writer crashed mid-line
    fresh = FolderStore(tmp_path)  # another process, no index yet
    for s in (store, fresh):
        assert s.count("c") == 2
        assert s.read("c") == [{"n": 0}, {"n": 1}]

    before = path.read_bytes()
    with pytest.raises(StoreConflict):  # a refused append leaves every byte as it was
        store.append("c", [{"n": 9}], expect=1)
    assert path.read_bytes() == before

    torn = f"at={path}:3 reason=a write cut short (a crash while writing); the next writer ended it"
    with log_events() as caught:  # said by the writer that ends it
        assert store.append("c", [{"n": 2}], expect=2) == 3
    assert caught.messages == [f"functai: conversation line skipped: {torn}"]
    data = path.read_bytes()
    assert data.startswith(before)  # nothing rewritten
    assert data[len(before) :] == b'\x00\n{"n":2}\n'  # the torn line ended, then the record
    assert store.read("c") == [{"n": 0}, {"n": 1}, {"n": 2}]  # the writer has said it already
    assert store.count("c") == 3
    for s in (fresh, FolderStore(tmp_path)):
        with log_events() as caught:  # and so does each reader that had not seen it
            assert s.read("c") == [{"n": 0}, {"n": 1}, {"n": 2}]
            assert s.count("c") == 3
        assert caught.messages == [f"functai: conversation line skipped: {torn}"]
    assert store.append("c", [{"n": 3}]) == 4
    assert path.read_bytes().endswith(b'{"n":2}\n{"n":3}\n')


def test_torn_line_missing_only_its_newline_never_counts(tmp_path):
    store = FolderStore(tmp_path)
    store.append("c", [{"n": 0}])
    with open(store.path_for("c"), "ab") as f:
        f.write(b'{"n":"lost"}')  # complete JSON, but the newline never made it
    assert store.count("c") == 1
    torn = f"at={store.path_for('c')}:2 reason=a write cut short (a crash while writing); the next writer ended it"
    with log_events() as caught:  # said by the writer that ends it
        assert store.append("c", [{"n": 1}], expect=1) == 2
    assert caught.messages == [f"functai: conversation line skipped: {torn}"]
    assert store.read("c") == [{"n": 0}, {"n": 1}]
    with log_events() as caught:  # and by a new reader
        assert FolderStore(tmp_path).read("c") == [{"n": 0}, {"n": 1}]
    assert caught.messages == [f"functai: conversation line skipped: {torn}"]


def test_lines_that_are_not_objects_are_skipped(tmp_path):
    store = FolderStore(tmp_path)
    store.path_for("c").write_bytes(
        b'{"n":0}\n[1,2]\n42\n"text"\nnull\n\ngarbage{\n\xff\xfe{"bad":"utf8"}\n{"n":1}\n'
    )
    reasons = [
        "JSON array, not an object", "JSON number, not an object", "JSON string, not an object",
        "JSON null, not an object", "an empty line", "not JSON", "not UTF-8 text",
    ]
    said = [f"at={store.path_for('c')}:{n} reason={reason}" for n, reason in enumerate(reasons, start=2)]
    with log_events() as caught:
        assert store.read("c") == [{"n": 0}, {"n": 1}]
    assert [m.split("skipped: ")[1] for m in caught.messages] == said
    assert store.count("c") == 2
    assert store.append("c", [{"n": 2}], expect=2) == 3
    with log_events() as caught:  # said again by a new reader
        assert [r["n"] for r in FolderStore(tmp_path).read("c")] == [0, 1, 2]
    assert [m.split("skipped: ")[1] for m in caught.messages] == said


def test_index_sees_other_writers_and_replaced_or_shrunk_files(tmp_path):
    a, b = FolderStore(tmp_path), FolderStore(tmp_path)
    a.append("c", [{"n": 0}])
    assert b.count("c") == 1
    b.append("c", [{"n": 1}])
    assert a.append("c", [{"n": 2}], expect=2) == 3
    assert [r["n"] for r in b.read("c", 1)] == [1, 2]

    path = a.path_for("c")
    replacement = tmp_path / "new.tmp"
    replacement.write_bytes(b'{"m":0}\n')
    os.replace(replacement, path)  # a new inode
    assert a.read("c") == [{"m": 0}]
    with open(path, "r+b") as f:  # same inode, shorter
        f.truncate(0)
    assert b.count("c") == 0
    assert b.append("c", [{"k": 0}], expect=0) == 1
    path.unlink()
    assert a.read("c") == []
    assert a.append("c", [{"k": 1}], expect=0) == 1


def test_appending_to_a_long_conversation_parses_only_whats_new(tmp_path, monkeypatch):
    writer = FolderStore(tmp_path)
    writer.append("c", [{"n": i, "text": "some words"} for i in range(10_000)])
    parsed: list[int] = []
    real = folder_module.parse_lines

    def counting(data, end, *args):
        parsed.append(end)
        return real(data, end, *args)

    monkeypatch.setattr(folder_module, "parse_lines", counting)
    reader = FolderStore(tmp_path)
    assert reader.count("c") == 10_000  # the first sight parses the file once
    assert sum(parsed) > 100_000
    parsed.clear()
    assert reader.append("c", [{"n": 10_000}]) == 10_001  # own append: nothing to parse
    assert reader.read("c", 10_000) == [{"n": 10_000}]
    assert reader.count("c") == 10_001
    assert sum(parsed) == 0
    writer.append("c", [{"n": 10_001}])  # the writer parses only the reader's new line
    assert parsed == [len('{"n":10000}')]
    parsed.clear()
    assert reader.read("c", 10_001) == [{"n": 10_001}]  # and the reader only the writer's
    assert parsed == [len('{"n":10001}')]


def test_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    store = FolderStore(tmp_path)
    store.append("c", [{"n": 0}])
    before = store.path_for("c").read_bytes()
    real_write = os.write
    calls = []

    def short_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[:5])  # a short write...
        raise OSError(errno.ENOSPC, "No space left on device")  # ...then a full disk

    with monkeypatch.context() as m:
        m.setattr(os, "write", short_then_full)
        with pytest.raises(FunctAIError) as info:
            store.append("c", [{"n": 1}, {"n": 2}])
    assert info.value.code == "store-unwritable" and str(store.path_for("c")) in str(info.value)
    assert "disk is full" in str(info.value)
    assert store.path_for("c").read_bytes() == before
    assert store.count("c") == 1
    assert store.append("c", [{"n": 1}], expect=1) == 2
    assert FolderStore(tmp_path).read("c") == [{"n": 0}, {"n": 1}]


def test_sync_fsyncs_file_and_new_folder_entry(tmp_path, monkeypatch):
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store = FolderStore(tmp_path)
    store.append("c", [{"n": 0}])  # new file: the folder is fsynced
    assert synced == [True]
    store.append("c", [{"n": 1}])
    assert synced == [True]
    store.append("c", [{"n": 2}], sync=True)
    assert synced == [True, False]
    store.sync("c")
    store.sync("unknown")
    assert synced == [True, False, False]


def test_conversations_lists_only_store_files(tmp_path):
    store = FolderStore(tmp_path)
    store.append("b", [{"n": 0}])
    store.append("a.v2", [{"n": 0}])
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden.jsonl").write_text("x")
    assert store.conversations() == ["a.v2", "b"]
    assert FolderStore(tmp_path / "missing").conversations() == []


def test_folder_store_threads(tmp_path):
    store = FolderStore(tmp_path)
    run_threads(store, 100)


# -- concurrency: threads and processes --------------------------------------------------


def cas_append(store, conversation, record):
    count = store.count(conversation)
    while True:
        try:
            return store.append(conversation, [record], expect=count)
        except StoreConflict as conflict:
            count = conflict.count


def run_threads(store, n):
    def work(name):
        for i in range(n):
            cas_append(store, "c", {"w": name, "i": i})

    threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check_each_once_in_order(store.read("c"), n)


def check_each_once_in_order(records, n):
    assert len(records) == 2 * n
    for name in ("a", "b"):
        assert [r["i"] for r in records if r["w"] == name] == list(range(n))


def test_memory_store_threads():
    run_threads(MemoryStore(), 200)


WORKER = textwrap.dedent(
    """
    import sys
    from functai._stores import FolderStore, StoreConflict

    folder, name, n, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = FolderStore(folder)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(n):
        record = {"w": name, "i": i, "pad": name * 3000}
        if mode == "plain":
            store.append("c", [record])
            continue
        count = store.count("c")
        while True:
            try:
                store.append("c", [record], expect=count)
                break
            except StoreConflict as conflict:
                count = conflict.count
    """
)


def run_processes(folder: Path, mode: str, n: int = 200) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(folder), name, str(n), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("a", "b")
    ]
    for p in procs:  # both running before either starts
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.stdin.close()
        assert p.wait(timeout=60) == 0
        p.stdout.close()


@pytest.mark.parametrize("mode", ["cas", "plain"])
def test_two_processes_append_to_one_conversation(tmp_path, mode):
    run_processes(tmp_path, mode)
    store = FolderStore(tmp_path)
    raw = lines_of(store.path_for("c"))
    assert raw[-1] == b""  # ends with a newline
    parsed = [json.loads(line) for line in raw[:-1]]  # every line valid, none interleaved
    assert all(r["pad"] == r["w"] * 3000 for r in parsed)
    check_each_once_in_order(parsed, 200)
    assert store.count("c") == 400
    assert store.read("c") == parsed


# -- open_store ----------------------------------------------------------------


def test_open_store(tmp_path, monkeypatch):
    shared = open_store(None)
    assert isinstance(shared, MemoryStore)
    assert open_store(None) is shared

    folder = open_store(str(tmp_path / "s"))
    assert isinstance(folder, FolderStore)
    assert open_store(tmp_path / "s") is folder
    monkeypatch.chdir(tmp_path)
    assert open_store("s") is folder
    assert open_store(tmp_path / "other") is not folder

    mine = MemoryStore()
    assert open_store(mine) is mine

    class Custom:
        def read(self, conversation, start=0):
            return []

        def count(self, conversation):
            return 0

        def append(self, conversation, records, *, expect=None, sync=False):
            return 0

        def sync(self, conversation):
            pass

        def conversations(self):
            return []

    custom = Custom()
    assert open_store(custom) is custom
    for bad in (42, b"bytes/path", object()):
        with pytest.raises(TypeError):
            open_store(bad)  # type: ignore[arg-type]


def test_a_folder_where_a_conversations_file_should_be_is_named_with_a_code(tmp_path):
    (tmp_path / "s" / "c.jsonl").mkdir(parents=True)
    store = FolderStore(tmp_path / "s")
    for read in (lambda: store.read("c"), lambda: store.read_rows("c"), lambda: store.count("c")):
        with pytest.raises(FunctAIError) as info:
            read()
        assert info.value.code == "store-unreadable" and "c.jsonl" in info.value.message


def test_a_line_nested_past_the_parser_is_skipped_not_a_raw_error(tmp_path):
    import functai

    @functai.ai(lm="test")
    def tutor(question: str) -> str:
        """Answer."""

    chat = tutor.conversation("c", store=str(tmp_path))
    chat("one")
    with open(tmp_path / "c.jsonl", "a", encoding="utf-8") as file:
        file.write('{"functai_conversation": 1, "kind": "entry", "plugin": "p", "entry": "k", "turn": null, '
                   '"data": ' + "[" * 100_000 + "]" * 100_000 + ', "at": "x"}\n')
    with log_events() as caught:
        again = tutor.conversation("c", store=str(tmp_path))
    assert [t.state for t in again.turns] == ["done"] and caught.named("conversation line skipped")
    again("two")
    assert len(tutor.conversation("c", store=str(tmp_path)).turns) == 2
