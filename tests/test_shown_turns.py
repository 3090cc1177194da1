"""What a turn was shown is recorded exactly and small (issue 11, point 6), and
``without`` naming a turn a plugin no longer keeps drops that entry (issue 9, point 3)."""

from __future__ import annotations

import json

import functai_approval
import pytest

import functai
from functai import Change, Plugin, PluginError, Waiting, ai, tool
from functai._calls.reading import read_calls
from functai._stores import FolderStore
from functai._evaluation.replay import NotReplayable, shown
from functai.testing import ScriptedLM, tool_call


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


def _lm() -> ScriptedLM:
    lm = ScriptedLM(reply=lambda request: f"A{len(lm.requests)}")
    functai.configure(client=lm)
    return lm


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _history(request):
    """The earlier turns a request showed: every message between the system one and the last."""
    return [(m["role"], m["content"]) for m in request.messages[1:-1]]


def test_a_turn_record_stays_the_same_size_however_long_the_branch(tmp_path):
    _lm()
    chat = tutor.conversation("long", store=str(tmp_path / "s"))
    for i in range(120):
        chat(f"q{i}")
    turns = [r for r in _records(tmp_path / "s" / "long.jsonl") if r["kind"] == "turn"]
    assert [t["shown"] for t in turns] == [{"last": i} for i in range(120)]
    sizes = [len(json.dumps(t)) for t in turns[1:]]  # (the first has no parent id)
    assert max(sizes) - min(sizes) <= 10  # only the digits of n and the question grow, not a list of ids


def test_last_turns_and_a_plugin_that_drops_turns_are_recorded_by_their_window(tmp_path):
    lm = _lm()
    store = str(tmp_path / "s")
    chat = tutor.conversation("w", store=store, context=functai.last_turns(3))
    for i in range(5):
        chat(f"q{i}")
    ids = [t.id for t in chat.turns]
    assert _records(tmp_path / "s" / "w.jsonl")[-3]["shown"] == {"last": 3}

    every_other = Plugin("every-other", context=lambda c: Change(keep=[t.id for t in c.turns][::2]))
    picky = tutor.conversation("w", store=store, plugins=[every_other])
    picky("q5")
    record = [r for r in _records(tmp_path / "s" / "w.jsonl") if r["kind"] == "turn"][-1]
    assert record["shown"] == {"last": 5, "drop": [ids[1], ids[3]]}
    assert _history(lm.requests[-1]) == [("user", "question: q0"), ("assistant", "A1"), ("user", "question: q2"),
                                         ("assistant", "A3"), ("user", "question: q4"), ("assistant", "A5")]

    only_two = Plugin("only-two", context=lambda c: Change(keep=[ids[0], ids[2]]))
    tutor.conversation("w", store=store, plugins=[only_two]).continue_from(ids[4])("q6")
    record = [r for r in _records(tmp_path / "s" / "w.jsonl") if r["kind"] == "turn"][-1]
    assert record["shown"] == [ids[0], ids[2]]  # fewer ids than the window would drop: the ids themselves


def test_a_replayed_turn_is_shown_exactly_what_it_was_shown(tmp_path):
    lm = _lm()
    log, store = str(tmp_path / "calls"), str(tmp_path / "s")
    functai.configure(log_calls=log)
    chat = tutor.conversation("r", store=store)
    for i in range(4):
        chat(f"q{i}")
    drop_first = Plugin("drop-first", context=lambda c: Change(keep=[t.id for t in c.turns][1:],
                                                               without={c.turns[-1].id: ["question"]}))
    tutor.conversation("r", store=store, plugins=[drop_first])("q4")
    tutor.conversation("r", store=store, context=functai.last_turns(2))("q5")
    calls = [r for r in read_calls(log) if r.conversation]
    assert len(calls) == len(lm.requests) == 6
    for call, request in zip(calls, lm.requests):
        messages, _ = shown(call)
        assert [(m["role"], m["content"]) for m in messages] == _history(request)


def test_records_written_before_the_small_form_are_still_read(tmp_path):
    """The old form: ``shown`` as the full list of ids, and ``context.turns``."""
    lm = _lm()
    log, store = str(tmp_path / "calls"), str(tmp_path / "s")
    functai.configure(log_calls=log)
    chat = tutor.conversation("old", store=store)
    for i in range(4):
        chat(f"q{i}")
    path = tmp_path / "s" / "old.jsonl"
    records = _records(path)
    order = [r["turn"] for r in records if r["kind"] == "turn"]
    for record in records:
        if record["kind"] == "turn":
            earlier = order[: order.index(record["turn"])]
            record["shown"] = earlier
            if earlier:
                record["context"] = {"turns": earlier, "without": {}, "sections": []}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))

    for call, request in zip([r for r in read_calls(log) if r.conversation], lm.requests):
        messages, _ = shown(call)
        assert [(m["role"], m["content"]) for m in messages] == _history(request)
    again = tutor.conversation("old", store=FolderStore(store))
    again("q4")
    assert len(_history(lm.requests[-1])) == 8  # the four earlier turns, read from the old form


def test_a_turn_shown_fewer_turns_than_its_branch_now_holds_is_not_replayable(tmp_path):
    _lm()
    log, store = str(tmp_path / "calls"), str(tmp_path / "s")
    functai.configure(log_calls=log)
    chat = tutor.conversation("gone", store=store)
    for i in range(3):
        chat(f"q{i}")
    path = tmp_path / "s" / "gone.jsonl"
    first = chat.turns[0].id
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines()
                            if not (f'"turn":"{first}"' in line and '"kind":"end"' in line)))
    last = [r for r in read_calls(log) if r.conversation][-1]
    with pytest.raises(NotReplayable) as info:
        shown(last)
    assert "1 of the 2 earlier turns it was shown are no longer in the conversation" in str(info.value)


def test_a_resumed_turn_is_shown_what_it_was_shown_when_it_started(tmp_path, install):
    install(functai_approval.plugin)

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    @ai(tools=[refund])
    def support(request: str) -> str:
        """Support the customer."""

    store = str(tmp_path / "s")
    lm = ScriptedLM(["ok 1", "ok 2", "ok 3", tool_call("refund", {"order": "A1"}), "Refunded."])
    functai.configure(client=lm)
    picky = Plugin("picky", context=lambda c: Change(keep=[t.id for t in c.turns][::2]))
    chat = support.conversation("t", store=store, approve="changes", plugins=[picky])
    for i in range(3):
        chat(f"r{i}")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    turn_id = info.value.turn.id

    later = support.conversation("t", store=FolderStore(store), approve="changes", plugins=[picky])
    later.turn(turn_id).approve()
    assert later.turn(turn_id).resume() == "Refunded."
    asked, resumed = lm.requests[3], lm.requests[4]
    assert _history(asked) == [("user", "request: r0"), ("assistant", "ok 1"), ("user", "request: r2"),
                               ("assistant", "ok 3")]
    assert [(m["role"], m.get("content")) for m in resumed.messages[1:5]] == _history(asked)


def test_without_naming_a_turn_dropped_by_an_earlier_keep_drops_that_entry():
    """Issue 9, point 3: a plugin running after compaction still works."""
    lm = _lm()
    chat = tutor.conversation("k")
    for i in range(3):
        chat(f"q{i}")
    first, second, third = [t.id for t in chat.turns]
    compact = Plugin("compact", context=lambda c: Change(keep=[c.turns[-1].id]))
    later = Plugin("later", context=lambda c: Change(without={first: ["question"], third: ["question"]}))
    tutor.conversation("k", plugins=[compact, later])("q3")
    assert _history(lm.requests[-1]) == [("assistant", "A3")]  # third, without its question; first dropped
    record = json.loads(json.dumps(tutor.conversation("k").turns[-1].conversation.store.read("k")[-3]))
    assert record["without"] == {third: ["question"]}


def test_without_naming_a_turn_never_on_the_branch_still_refuses():
    _lm()
    chat = tutor.conversation("n")
    chat("q0")
    elsewhere = chat.continue_from(None)
    elsewhere("other tree")
    stranger = elsewhere.head.id
    bad = Plugin("bad", context=lambda c: Change(without={stranger: ["question"]}))
    with pytest.raises(PluginError) as info:
        tutor.conversation("n", plugins=[bad]).continue_from(chat.turns[0])("q1")
    assert info.value.code == "plugin-change" and stranger in str(info.value)
    with pytest.raises(PluginError):
        tutor.conversation("n", plugins=[Plugin("x", context=lambda c: Change(without={"nope": ["a"]}))])("q")
