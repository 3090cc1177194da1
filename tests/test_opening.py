"""Opening a long conversation (issue 15, "Conversation opening"; issue 11, point 6's reopen).

What is tested here is the structure that makes an open cheap, never its
time: a turn keeps what its records hold instead of copies (so the collector
has little to walk; it is never switched off, which would be process-wide),
and the quick path for the commonest records builds exactly the state the
field-by-field checks would.
"""

from __future__ import annotations

import gc

import pytest

import functai
from functai import ai, tool
from functai._conversations.history import History, NOTHING
from functai._stores import FolderStore, MemoryStore
from functai.testing import ScriptedLM, log_events, tool_call


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


@pytest.fixture(autouse=True)
def _answering() -> None:
    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))


class WatchedStore(MemoryStore):
    """A memory store that notes whether the collector was on while it was read."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def read(self, conversation, start=0):  # type: ignore[no-untyped-def]
        self.seen.append(gc.isenabled())
        return super().read(conversation, start)


def _filled(store, turns: int = 5) -> None:  # type: ignore[no-untyped-def]
    chat = tutor.conversation("c", store=store)
    for i in range(turns):
        chat(f"q{i}")


def test_an_open_leaves_the_collector_on() -> None:
    """The collector is the host program's: an open never switches it off, even for a moment."""
    store = WatchedStore()
    _filled(store)
    store.seen.clear()
    tutor.conversation("c", store=store).head
    assert store.seen and all(store.seen)


def test_a_long_conversation_keeps_few_collected_objects_per_turn() -> None:
    """The collector's work after an open follows what the turns keep: a turn shares its
    record's parts and holds no empty containers of its own (12 per turn before)."""
    store = MemoryStore()
    _filled(store, 300)
    gc.collect()
    before = len(gc.get_objects())
    history = History()
    history.apply_all(store.read("c"))
    gc.collect()
    per_turn = (len(gc.get_objects()) - before) / 300
    assert per_turn <= 8, per_turn
    turn = history.turns[history.order[-1]]
    assert turn.answers is NOTHING and turn.tools is NOTHING and turn.approvals == ()


def test_a_turn_keeps_its_records_parts_without_copying_them() -> None:
    store = MemoryStore()
    _filled(store, 2)
    records = store.read("c")
    history = History()
    history.apply_all(records)
    first = next(r for r in records if r["kind"] == "turn")
    end = next(r for r in records if r["kind"] == "end")
    turn = history.turns[first["turn"]]
    assert turn.inputs is first["inputs"] and turn.outputs is end["outputs"]
    assert dict(turn.inputs) == {"question": "q0"} and dict(turn.outputs) == {"output": "ok"}


@tool(effects="changes")
def book(slot: str) -> str:
    """Book a slot."""
    return f"booked {slot}"


@ai(tools=[book])
def desk(request: str) -> str:
    """Book what is asked."""


def _varied(folder) -> list[dict]:  # type: ignore[no-untyped-def]
    """A conversation with every kind of record: tool runs, a wait and its answer, a resume,
    a failure, a fork, entries; returned as its records."""

    def reply(request):  # type: ignore[no-untyped-def]
        last = request.messages[-1]
        if last["role"] == "tool":
            return "done: " + last["content"]
        if "fail" in last["content"]:
            raise RuntimeError("the model broke")
        return tool_call("book", {"slot": last["content"][-2:]})

    store = FolderStore(folder)
    with functai.settings(client=ScriptedLM(reply=reply)):
        chat = desk.conversation("v", store=store)
        chat("book a1")
        chat.remember("notes", "seen", {"n": 1}, chat.head)
        with functai.settings(approve="all"):
            try:
                chat("book b2")
            except functai.Waiting as waiting:
                waiting.turn.approve(by="ana")
                waiting.turn.resume()
        with pytest.raises(Exception):
            chat("please fail")
        branch = chat.continue_from(chat.turns[0])
        branch("book c3")
    return store.read("v")


def _state(history: History) -> list[tuple]:
    out = []
    for turn_id in history.order:
        turn = history.turns[turn_id]
        out.append(tuple((name, _plain(getattr(turn, name))) for name in type(turn).FIELDS))
    return out


def _plain(value):  # type: ignore[no-untyped-def]
    if isinstance(value, (dict, type(NOTHING))):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def test_the_quick_path_builds_what_the_checked_path_builds(tmp_path, monkeypatch, install) -> None:
    import functai_approval

    install(functai_approval.plugin)
    records = _varied(tmp_path / "store")
    quick = History()
    quick.apply_all(records)

    from functai._conversations import history as history_module

    monkeypatch.setattr(history_module, "_QUICK", {})  # every record through problem() and _fold()
    checked = History()
    checked.apply_all(_varied(tmp_path / "again"))  # same shape, new ids: compare by position
    assert [t.state for t in quick.turns.values()] == [t.state for t in checked.turns.values()]
    assert len(quick.order) == len(checked.order) == 4 and quick.damage == checked.damage == []

    slow = History()
    slow.apply_all(records)  # the very same records, checked field by field
    assert _state(slow) == _state(quick)
    assert (slow.entries, slow.answered, slow.running, slow.count) == (
        quick.entries, quick.answered, quick.running, quick.count)
    assert slow.children == quick.children


def test_lines_decoded_in_one_go_are_still_checked_one_by_one(tmp_path) -> None:
    """The bulk decode reads a file of sound lines at once; a line holding two objects, a blank
    line, an object spread over two lines or a torn tail are still each found and named."""
    store = FolderStore(tmp_path)
    store.append("c", [{"n": 1}, {"n": 2}])
    path = tmp_path / "c.jsonl"
    with open(path, "ab") as out:
        out.write(b'{"n": 3}{"n": 4}\n\n{"n":\n{"m": 5}}\n{"n": 6}\n{"n": 7')
    reader = FolderStore(tmp_path)
    with log_events() as logged:
        assert reader.read("c") == [{"n": 1}, {"n": 2}, {"n": 6}]
    assert logged.named("conversation line skipped")
    assert [where.rpartition(":")[2] for where, _ in reader.skipped("c")] == ["3", "4", "5", "6"]
    assert reader.read("c", 1) == [{"n": 2}, {"n": 6}]  # again, from what the index kept


def test_a_second_reader_in_the_process_gets_the_same_records(tmp_path) -> None:
    """A store shared by two views decodes what the first already read from its index again."""
    _filled(str(tmp_path / "s"), 20)
    first = tutor.conversation("c", store=str(tmp_path / "s"))
    second = tutor.conversation("c", store=str(tmp_path / "s"))
    assert [t.id for t in first.turns] == [t.id for t in second.turns] and len(second.turns) == 20
    assert [dict(t.outputs) for t in second.turns] == [{"output": "ok"}] * 20


@pytest.mark.parametrize("reply", [
    {"text": 3}, {"text": "a", "usage": "x"}, {"text": "a", "finish_reason": 1}, {"text": "a", "refusal": 2},
    {"text": "a", "reasoning": ["x"]}, {"text": "a", "tool_calls": [{"id": 1, "name": "x"}]},
    {"text": "a", "tool_calls": None},
])
def test_the_quick_path_leaves_a_damaged_reply_to_the_checks(reply) -> None:
    history = History()
    history.apply_all([
        {"functai_conversation": 1, "kind": "turn", "turn": "t", "shown": {"last": 0}},
        {"functai_conversation": 1, "kind": "reply", "turn": "t", "reply": reply},
    ])
    assert history.turns["t"].replies == () and [i for i, _ in history.damage] == [1]


@pytest.mark.parametrize("reply", [{"text": "a", "tool_calls": [], "usage": {}, "finish_reason": "stop"},
                                   {"text": None, "tool_calls": [{"id": "c1", "name": "refund", "input": {}}]}],
                         ids=["plain", "a-tool-call"])
def test_a_reply_record_repeated_is_damage_not_a_second_reply(reply) -> None:
    """A resumed turn reads its replies by their place: a reply repeated (a hand edit, a copy) would
    be read as the next request's, and its tool call run again. Its place (``n``) must be the next."""
    history = History()
    history.apply_all([
        {"functai_conversation": 1, "kind": "turn", "turn": "t", "shown": {"last": 0}},
        {"functai_conversation": 1, "kind": "reply", "turn": "t", "n": 1, "reply": reply},
        {"functai_conversation": 1, "kind": "reply", "turn": "t", "n": 1, "reply": reply},
        {"functai_conversation": 1, "kind": "reply", "turn": "t", "n": 2, "reply": reply},
    ])
    assert len(history.turns["t"].replies) == 2 and [i for i, _ in history.damage] == [2]
    assert "not its next" in history.damage[0][1]
    for rows in (False, True):  # the folder store's quick path reads rows: the same
        store = MemoryStore()
        store.append("c", [{"functai_conversation": 1, "kind": "conversation", "id": "c", "function": "m:f",
                            "version": "1", "at": "x"},
                           {"functai_conversation": 1, "kind": "turn", "turn": "t", "shown": {"last": 0}},
                           *[{"functai_conversation": 1, "kind": "reply", "turn": "t", "n": 1, "reply": reply}] * 2])
        opened = History()
        if rows:
            items, whole = store.read_rows("c")
            opened.apply_all(items, whole)
        else:
            opened.apply_all(store.read("c"))
        assert len(opened.turns["t"].replies) == 1 and len(opened.damage) == 1
