"""Opening through rows builds exactly what the records' dicts build (issue 15, "Conversation opening").

An open decodes a conversation's lines as rows (`functai._conversations.rows`: only
the fields the fold reads) and folds them with a quick path of its own; anything
it does not take is read again whole and checked field by field. Each test here
opens the same files both ways — the row path, and every record as a dict
through the field-by-field checks — and compares every field of every turn, the
damage found (and the warnings naming its lines), the entries, the answers, and
what the public `Turn` and `Conversation` accessors return: for sound files,
files with damaged records, torn and hand-edited files, and a file written by
functai at commit 4afa954 (tests/data/conversation_4afa954.jsonl).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

import functai
from functai import ai, tool
from functai._conversations import held, rows
from functai._conversations import history as history_module
from functai._conversations.history import NOTHING, History
from functai._stores import FolderStore, MemoryStore
from functai.testing import ScriptedLM, tool_call

DATA = Path(__file__).resolve().parent / "data"


@tool(effects="changes")
def book(slot: str) -> str:
    """Book a slot."""
    return f"booked {slot}"


@ai(tools=[book])
def desk(request: str) -> str:
    """Book what is asked."""


def _reply(request):  # type: ignore[no-untyped-def]
    last = request.messages[-1]
    if last["role"] == "tool":
        return "done: " + last["content"]
    if "fail" in last["content"]:
        raise RuntimeError("the model broke")
    if "plain" in last["content"]:
        return "plain answer"
    return tool_call("book", {"slot": last["content"][-2:]})


@pytest.fixture
def varied(tmp_path, install) -> Path:  # type: ignore[no-untyped-def]
    """A folder holding conversation ``v``: tool runs, a wait answered and resumed, a turn left
    waiting, an entry, a branch, a failure, and plain turns."""
    import functai_approval

    install(functai_approval.plugin)
    folder = tmp_path / "store"
    with functai.settings(client=ScriptedLM(reply=_reply)):
        chat = desk.conversation("v", store=FolderStore(folder))
        chat("book a1")
        chat("plain one")
        chat.remember("notes", "seen", {"n": 1}, chat.head)
        with functai.settings(approve="all"):
            try:
                chat("book b2")
            except functai.Waiting as waiting:
                waiting.turn.approve(by="ana")
                waiting.turn.resume()
            with pytest.raises(functai.Waiting):
                chat("book w9")
        branch = chat.continue_from(chat.turns[0])
        branch("plain two")
        with pytest.raises(Exception):
            branch("please fail")
        branch("plain three")
    return folder


# -- opening both ways ------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A value with its container types named, so that a tuple and a list, or NOTHING and {}, differ."""
    if isinstance(value, (dict, type(NOTHING))):
        return (type(value).__name__, {k: _plain(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_plain(v) for v in value])
    return value


def _state(history: History) -> dict[str, Any]:
    turns = [{name: _plain(getattr(history.turns[t], name)) for name in type(history.turns[t]).FIELDS}
             for t in history.order]
    return {"turns": turns, "order": history.order, "entries": _plain(history.entries),
            "answered": _plain(history.answered), "running": history.running, "count": history.count,
            "damage": history.damage, "header": _plain(history.header), "children": history.children}


def _fast(store: Any, conversation: str) -> tuple[History, list[str]]:
    """The open's own path (`held.refresh`: rows for the built-in stores)."""
    history = History()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        held.refresh(history, store, conversation)
    return history, sorted(str(w.message) for w in caught)


def _full(store: Any, conversation: str, monkeypatch: pytest.MonkeyPatch) -> tuple[History, list[str]]:
    """Every record as its dict, through the field-by-field checks (no quick path at all)."""
    history = History()
    with monkeypatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patch.setattr(history_module, "_QUICK", {})
        history.apply_all(store.read(conversation))
    return history, sorted(str(w.message) for w in caught)


def _compare(folder: Path, conversation: str, monkeypatch: pytest.MonkeyPatch, *, rows_used: bool = True) -> History:
    fast_store, full_store = FolderStore(folder), FolderStore(folder)
    if rows_used:  # the file is read as rows, not as dicts: the quick path for rows is what is compared
        items, _ = FolderStore(folder).read_rows(conversation)
        assert any(type(item) is rows.ROWS["turn"] for item in items)
    fast, fast_warned = _fast(fast_store, conversation)
    full, full_warned = _full(full_store, conversation, monkeypatch)
    assert _state(fast) == _state(full)
    assert fast_warned == full_warned  # the same skipped lines, named the same way
    assert fast_store.skipped(conversation) == full_store.skipped(conversation)
    assert [fast_store.where(conversation, i) for i, _ in fast.damage] == [
        full_store.where(conversation, i) for i, _ in full.damage]
    return fast


def _views(folder: Path, conversation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a view's public accessors return, opened through rows and through dicts."""
    def read(view: Any) -> Any:
        turns = view.all_turns()
        return ([(t.id, t.parent, t.state, t.why, t.call, dict(t.inputs), dict(t.outputs), t.approvals, t.answers)
                 for t in turns], [t.id for t in view.turns], view.head and view.head.id,
                view.entries("notes", "seen"))

    def opened(through_rows: bool) -> Any:
        copy = folder.parent / f"copy-{through_rows}"
        shutil.copytree(folder, copy)  # a view may mark interrupted turns: each opens its own copy
        with monkeypatch.context() as patch, warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            if not through_rows:
                patch.setattr(rows, "row_reader", lambda store: None)
                patch.setattr(history_module, "_QUICK", {})
            return read(desk.conversation(conversation, store=FolderStore(copy)))

    assert opened(True) == opened(False)


def test_a_varied_conversation_opens_the_same_both_ways(varied, monkeypatch) -> None:
    history = _compare(varied, "v", monkeypatch)
    assert history.damage == [] and len(history.order) == 7
    assert {history.turns[t].state for t in history.order} == {"done", "failed", "waiting"}
    _views(varied, "v", monkeypatch)


def test_a_conversation_written_by_4afa954_opens_the_same_both_ways(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    text = (DATA / "conversation_4afa954.jsonl").read_text()
    (folder / "old.jsonl").write_text(text.replace('"__main__:desk"', json.dumps(f"{desk.module}:desk")))
    history = _compare(folder, "old", monkeypatch)
    assert history.damage == [] and len(history.order) == 7
    assert [history.turns[t].state for t in history.order].count("waiting") == 1
    _views(folder, "old", monkeypatch)


def test_replies_kept_as_json_read_back_as_their_records_hold_them(varied) -> None:
    store = FolderStore(varied)
    history, _ = _fast(store, "v")
    plain = next(history.turns[t] for t in history.order if history.turns[t].inputs == {"request": "plain one"})
    assert type(plain._replies[0]) is not dict  # a plain reply stays JSON until asked for
    records = [r for r in store.read("v") if r["kind"] == "reply" and r["turn"] == plain.id]
    assert list(plain.replies) == [r["reply"] for r in records]
    assert type(plain._replies[0]) is dict  # and is decoded once
    for turn_id in history.order:
        raw = history.turns[turn_id]._replies
        replies = history.turns[turn_id].replies
        assert all(type(r) is dict for r in replies) and len(replies) == len(raw)


def _lines(folder: Path, conversation: str) -> list[str]:
    return (folder / f"{conversation}.jsonl").read_text().splitlines()


def _write(folder: Path, conversation: str, lines: list[str], tail: str = "\n") -> None:
    (folder / f"{conversation}.jsonl").write_text("\n".join(lines) + tail)


def _rec(**fields: Any) -> str:
    return json.dumps({"functai_conversation": 1, **fields})


def _damaged_records(base: list[str]) -> list[str]:
    """Every line still one JSON object of a known kind (so the file is read as rows), but many
    records damaged or odd: each must be taken or refused exactly as the dict path does."""
    turns = [json.loads(line) for line in base if json.loads(line).get("kind") == "turn"]
    first, last = turns[0]["turn"], turns[-1]["turn"]
    owner = {"pid": 2 ** 22 + 7, "host": "elsewhere", "boot": "b", "start": "1"}
    extra = [
        _rec(kind="turn", turn="t-list-inputs", parent=last, inputs=["x"], shown={"last": 0}),
        _rec(kind="turn", turn="t-shown-list", parent=last, inputs={"q": 1}, shown=[first]),
        _rec(kind="turn", turn="t-changes", parent=last, inputs={"q": 2}, shown={"last": 1},
             changes=[{"plugin": "p", "hook": "context", "change": {}}]),
        _rec(kind="turn", turn="t-lost", parent="nobody", inputs={"q": 3}, shown={"last": 0}),
        _rec(kind="turn", turn=first, parent=None, inputs={"q": "again"}, shown={"last": 0}),
        _rec(kind="turn", turn="t-running", parent=last, inputs={"q": 4}, shown={"last": 2}, claim="c1",
             owner=owner, t=1.5, ttl=60.0, call="k1", ran_with={"approve": None, "plugins": ["x"]}),
        _rec(kind="lease", turn="t-running", claim="c1", t=2.5),
        _rec(kind="turn", turn="t-running-2", parent="t-running", inputs={}, shown={"last": 0}, owner=None,
             fork=True, context={"a": 1}),
        _rec(kind="turn", turn="", shown={"last": 0}),
        _rec(kind="turn", turn=7, shown={"last": 0}),
        _rec(kind="turn", turn="t-neg", shown={"last": -1}),
        _rec(kind="reply", turn="t-running", reply={"text": 3}),
        _rec(kind="reply", turn="t-running", reply={"text": "a", "tool_calls": None}),
        _rec(kind="reply", turn="t-running", reply={"text": "a", "usage": {"n": {"deep": 1}}, "tool_calls": [],
                                                    "finish_reason": "stop"}),
        _rec(kind="reply", turn="t-running", reply={"text": "a", "tool_calls": [], "usage": {}, "finish_reason": "s",
                                                    "refusal": "no"}),
        _rec(kind="reply", turn="t-running", reply={"finish_reason": "stop", "text": "order differs",
                                                    "tool_calls": [], "usage": {}}),
        _rec(kind="reply", turn="t-running", reply={"text": "new key", "tool_calls": [], "usage": {},
                                                    "finish_reason": "stop", "later": 1}),
        '{"functai_conversation": 1, "kind": "reply", "turn": "t-running", "reply": {"text": "spaced", '
        '"tool_calls": [], "usage": {}, "finish_reason": null}}',
        _rec(kind="reply", turn="t-running", reply={"text": "esc \" \\ \u00e9 \ud83d\ude00", "tool_calls": [],
                                                    "usage": {"in": 1, "out": 2.5, "m": "x"}, "finish_reason": None}),
        _rec(kind="reply", turn="nobody", reply={"text": "x", "tool_calls": [], "usage": {}, "finish_reason": None}),
        _rec(kind="reply", turn="t-running"),
        _rec(kind="end", turn="nobody", state="done", outputs={}),
        _rec(kind="end", turn=last, state="done", outputs={"output": "twice"}),
        _rec(kind="end", turn="t-lost", state="weird"),
        _rec(kind="end", turn="t-lost", state="failed", outputs=["x"]),
        _rec(kind="end", turn="t-lost", state="failed", error={"code": "x", "message": "m"}),
        _rec(kind="end", turn="t-changes", state="stopped", outputs=None, error="text"),
        json.dumps({"functai_conversation": 2, "kind": "turn", "turn": "t-v2", "shown": {"last": 0}}),
        json.dumps({"functai_conversation": True, "kind": "turn", "turn": "t-true", "shown": {"last": 0}}),
        json.dumps({"kind": "turn", "turn": "t-unversioned", "shown": {"last": 0}}),
        _rec(kind="entry", plugin="notes", entry="seen", turn=None, data=[1, 2]),
        _rec(kind="interrupt", turn="t-running-2", claim=None, why="gone"),
        _rec(kind="turn", turn="t-big", parent=None, inputs={"n": 10 ** 30, "f": 1e300}, shown={"last": 0}),
        _rec(kind="end", turn="t-big", state="done", outputs={"output": "\u2028 line sep"}),
    ]
    return base + extra


def test_damaged_records_are_taken_or_refused_as_the_dict_path_does(varied, monkeypatch) -> None:
    _write(varied, "v", _damaged_records(_lines(varied, "v")))
    history = _compare(varied, "v", monkeypatch)
    assert len(history.damage) >= 15
    running = history.turns["t-running"]
    assert running.state == "running" and running.lease == {
        "owner": {"pid": 2 ** 22 + 7, "host": "elsewhere", "boot": "b", "start": "1"}, "t": 2.5, "ttl": 60.0}
    assert history.turns["t-running-2"].lease == {"owner": None, "t": None, "ttl": None}
    assert history.turns["t-lost"].lost_parent == "nobody"
    _views(varied, "v", monkeypatch)


def test_an_unknown_kind_reads_the_file_as_dicts_the_same(varied, monkeypatch) -> None:
    lines = _lines(varied, "v")
    lines.insert(3, _rec(kind="from-a-newer-writer", turn="x"))
    lines.insert(5, json.dumps({"functai_conversation": 1, "turn": "no kind"}))
    lines.insert(6, _rec(kind=["not", "hashable"]))
    _write(varied, "v", lines)
    _compare(varied, "v", monkeypatch, rows_used=False)
    _views(varied, "v", monkeypatch)


@pytest.mark.parametrize("edit", [
    "bom", "torn", "ended-torn", "garbage", "array", "blank", "two-on-a-line", "spread", "nan", "surrogate",
    "not-utf8", "huge-number", "spaces",
])
def test_torn_and_hand_edited_files_open_the_same_both_ways(varied, monkeypatch, edit) -> None:
    lines = _lines(varied, "v")
    tail = "\n"
    at = len(lines) // 2
    if edit == "bom":
        lines[0] = "\ufeff" + lines[0]
    elif edit == "torn":
        tail = "\n" + lines[at][:40]
    elif edit == "ended-torn":
        lines.insert(at, lines[at][:30] + "\x00")
    elif edit == "garbage":
        lines.insert(at, "this is not json")
    elif edit == "array":
        lines.insert(at, "[1, 2]")
    elif edit == "blank":
        lines.insert(at, "   ")
    elif edit == "two-on-a-line":
        lines[at] = lines[at] + lines[at + 1]
        del lines[at + 1]
    elif edit == "spread":
        lines[at] = lines[at].replace(',"kind"', ',\n"kind"', 1)
    elif edit == "nan":
        lines.insert(at, _rec(kind="entry", plugin="p", entry="e", data=float("nan")))
    elif edit == "surrogate":
        lines.insert(at, '{"functai_conversation": 1, "kind": "entry", "plugin": "p", "entry": "e", "data": "\\udc80"}')
    elif edit == "huge-number":
        lines.insert(at, _rec(kind="entry", plugin="p", entry="e", data=1).replace('"data": 1', '"data": 1e999'))
    elif edit == "spaces":
        lines = [json.dumps(json.loads(line), indent=None, separators=(", ", ": ")) for line in lines]
    text = "\n".join(lines) + tail
    (varied / "v.jsonl").write_bytes(text.encode("utf-8", "surrogatepass") if edit != "not-utf8"
                                     else text.encode() + b'{"kind": "\xff"}\n')
    _compare(varied, "v", monkeypatch, rows_used=edit == "spaces")  # the others: read line by line
    _views(varied, "v", monkeypatch)


def test_what_is_appended_after_an_open_folds_the_same(varied, monkeypatch) -> None:
    """A view refreshed after other writers appended (its own appends are text lines, others'
    bytes read from the file) holds what a fresh open of the whole file holds."""
    store = FolderStore(varied)
    history, _ = _fast(store, "v")
    with functai.settings(client=ScriptedLM(reply=_reply)):
        other = desk.conversation("v", store=FolderStore(varied))  # another process's store object
        other.continue_from(None)("plain four")
        mine = desk.conversation("v", store=store).continue_from(None)
        mine("plain five")
        mine("plain six")
    held.refresh(history, store, "v")
    fresh, _ = _full(FolderStore(varied), "v", monkeypatch)
    assert _state(history) == _state(fresh)


def test_the_memory_store_opens_the_same_both_ways(monkeypatch, install) -> None:
    import functai_approval

    install(functai_approval.plugin)
    store = MemoryStore()
    with functai.settings(client=ScriptedLM(reply=_reply)):
        chat = desk.conversation("m", store=store)
        chat("book a1")
        chat("plain one")
        with functai.settings(approve="all"), pytest.raises(functai.Waiting):
            chat("book w9")
    items, _ = store.read_rows("m")
    assert any(type(item) is rows.ROWS["turn"] for item in items)
    assert _state(_fast(store, "m")[0]) == _state(_full(store, "m", monkeypatch)[0])


def test_a_store_that_overrides_read_is_read_by_read(tmp_path) -> None:
    """A subclass that changes what ``read`` gives (and not ``read_rows``) is opened through ``read``."""

    class Hiding(FolderStore):
        def read(self, conversation, start=0):  # type: ignore[no-untyped-def]
            return [r for r in super().read(conversation, start) if r.get("kind") != "entry"]

    assert rows.row_reader(FolderStore(tmp_path)) is not None
    assert rows.row_reader(Hiding(tmp_path)) is None
    assert rows.row_reader(MemoryStore()) is not None
    spied = FolderStore(tmp_path)
    spied.read = lambda conversation, start=0: []  # type: ignore[method-assign]
    assert rows.row_reader(spied) is None  # set on the object: read through it too


def test_a_turn_left_to_fill_in_keeps_what_a_later_record_changes(varied, monkeypatch) -> None:
    """A turn an open made from a row fills in its other fields when first asked, and a record
    folded later (a wait for a turn still running, here) is applied to the filled-in turn: the
    fill never undoes it."""
    owner = {"pid": 2 ** 22 + 9, "host": "elsewhere", "boot": "b", "start": "1"}
    lines = _lines(varied, "v") + [_rec(kind="turn", turn="t-late", parent=None, inputs={"q": 1},
                                        shown={"last": 0}, claim="c9", owner=owner, t=1.0, ttl=60.0, at="then")]
    _write(varied, "v", lines)
    store = FolderStore(varied)
    history, _ = _fast(store, "v")
    late = history.turns["t-late"]
    assert late._row is not None and late.lease == {"owner": owner, "t": 1.0, "ttl": 60.0}  # not filled yet
    approvals = [{"key": "k", "plugin": "approval", "name": "book"}]
    with open(varied / "v.jsonl", "a") as out:
        out.write(_rec(kind="wait", turn="t-late", approvals=approvals, plugins=["approval"], at="now") + "\n")
    held.refresh(history, store, "v")
    assert late.state == "waiting" and late.approvals == approvals and late.inputs == {"q": 1} and late.at == "then"
    assert late._row is None
    assert _state(history) == _state(_full(FolderStore(varied), "v", monkeypatch)[0])


def test_threads_reading_turns_an_open_left_to_fill_in_read_the_same(tmp_path, monkeypatch) -> None:
    import threading

    memory = MemoryStore()
    with functai.settings(client=ScriptedLM(reply=lambda request: "ok")):
        chat = desk.conversation("t", store=memory)
        for i in range(200):
            chat(f"plain {i}")
    history, _ = _fast(memory, "t")
    full, _ = _full(memory, "t", monkeypatch)
    seen: list[Any] = []
    start = threading.Barrier(8)

    def read() -> None:
        start.wait()
        seen.append([(t, dict(history.turns[t].inputs), history.turns[t].at, history.turns[t].call,
                      history.turns[t].claim, dict(history.turns[t].ran_with)) for t in history.order])

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [(t, dict(full.turns[t].inputs), full.turns[t].at, full.turns[t].call, full.turns[t].claim,
                 dict(full.turns[t].ran_with)) for t in full.order]
    assert seen == [expected] * 8


@pytest.mark.parametrize("how", ["in order", "joined out of order", "a record on two lines", "the header on two lines"])
def test_a_sqlite_open_reads_the_records_as_one_text_and_checks_it(varied, tmp_path, how) -> None:
    """An open fetches the records joined into one text with the positions as they were joined;
    a join out of order, or a record whose JSON spans lines, is read again a row at a time."""
    import sqlite3

    from functai._stores import sql
    from functai._stores.sqlite import SQLiteStore

    class Reversed(SQLiteStore):
        read_joined = sql.READ_JOINED.replace("FROM functai_records WHERE conversation = ? AND position >= ?",
                                              "FROM (SELECT data, position FROM functai_records WHERE conversation = ? "
                                              "AND position >= ? ORDER BY position DESC)")

    store = (Reversed if how == "joined out of order" else SQLiteStore)(tmp_path / "v.db")
    expected = FolderStore(varied).read("v")
    store.append("v", expected)
    if how.endswith("on two lines"):
        at = 0 if how.startswith("the header") else 3
        db = sqlite3.connect(tmp_path / "v.db")
        db.execute("UPDATE functai_records SET data = ? WHERE conversation = 'v' AND position = ?",
                   (json.dumps(expected[at], indent=1), at))
        db.commit()
        db.close()
    read_one_at_a_time = []
    data = store._data
    store._data = lambda *args: read_one_at_a_time.append(args) or data(*args)  # type: ignore[method-assign]
    items, whole = store.read_rows("v")
    assert [whole(position) for position in range(len(items))] == expected
    assert store.read_rows("v", 2)[1](0) == expected[2]
    assert store.read_rows("v", len(expected))[0] == []
    # out of order: the read is made again; on two lines: the whole records are fetched a row each
    assert bool(read_one_at_a_time) == (how != "in order")


@pytest.mark.parametrize("damaged", [False, True])
def test_a_sqlite_store_opens_the_same_both_ways(varied, monkeypatch, tmp_path, damaged) -> None:
    """The SQL stores read rows too, in one query decoded once; a row that is not JSON is damage either way."""
    import sqlite3

    from functai._stores import open_store

    url = "sqlite:///" + str(tmp_path / "v.db")
    store = open_store(url)
    store.append("v", FolderStore(varied).read("v"))
    if damaged:
        db = sqlite3.connect(tmp_path / "v.db")
        db.execute("UPDATE functai_records SET data = 'not json {' WHERE conversation = 'v' AND position = 3")
        db.commit()
    items, _ = store.read_rows("v")
    assert (type(items[0]) is rows.ROWS["conversation"]) != damaged  # damaged: each row read as `read` reads it
    fast, fast_warned = _fast(store, "v")
    full, full_warned = _full(store, "v", monkeypatch)
    assert _state(fast) == _state(full) and fast_warned == full_warned
    assert [reason for _, reason in fast.damage] == (["not JSON"] if damaged else [])
