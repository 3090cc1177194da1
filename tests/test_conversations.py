"""Conversations: turns, branches, the turn hooks, entries, records."""

import json
import os
import stat

import pytest

import functai
from functai import Change, FunctAIError, Plugin, PluginError, ai
from functai._stores import opening as store_module
from functai._stores import memory as memory_module
from functai._stores import open_store
from functai.testing import ScriptedLM, log_events
from store_fixtures import DURABLE, store_url


@pytest.fixture(autouse=True, params=["memory", *DURABLE])
def default_store(request, tmp_path, monkeypatch):
    """Every test here runs with each store as the one ``store=None`` opens."""
    if request.param != "memory":
        monkeypatch.setattr(memory_module, "shared", open_store(store_url(request.param, tmp_path, request)))
    return request.param


def counting_lm():
    """Answers A1, A2, … (one per request), keeping every request."""
    lm = ScriptedLM(reply=lambda request: f"A{len(lm.requests)}")
    functai.configure(client=lm)
    return lm


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


@ai
def lesson(topic: str, level: str = "basic") -> str:
    """Teach the topic."""


def conversation_messages(request):
    return [(m["role"], m["content"]) for m in request.messages[1:]]


def test_turns_are_shown_their_branch_as_prior_messages():
    lm = counting_lm()
    chat = tutor.conversation("alex")
    assert chat("What is 1/2?") == "A1"
    assert chat("And 1/3?") == "A2"
    assert conversation_messages(lm.requests[1]) == [
        ("user", "question: What is 1/2?"), ("assistant", "A1"), ("user", "question: And 1/3?"),
    ]
    first, second = chat.turns
    assert (first.parent, second.parent, chat.head) == (None, first.id, second)
    assert first.inputs == {"question": "What is 1/2?"} and first.outputs == {"output": "A1"}
    assert first.state == "done"


def test_a_branch_never_sees_another_branchs_turns():
    lm = counting_lm()
    chat = tutor.conversation("b")
    chat("one")
    chat("two")
    other = chat.continue_from(chat.turns[0])
    other("branch")
    assert conversation_messages(lm.requests[-1]) == [
        ("user", "question: one"), ("assistant", "A1"), ("user", "question: branch"),
    ]
    chat("three")
    shown = [c for r, c in conversation_messages(lm.requests[-1]) if r == "user"]
    assert shown == ["question: one", "question: two", "question: three"]
    assert [t.inputs["question"] for t in other.turns] == ["one", "branch"]
    assert [t.inputs["question"] for t in chat.turns] == ["one", "two", "three"]


def test_last_turns_picks_the_last_n_done_turns():
    lm = counting_lm()
    chat = tutor.conversation("c", context=functai.last_turns(2))
    for q in ("q1", "q2", "q3", "q4"):
        chat(q)
    shown = [c for r, c in conversation_messages(lm.requests[-1]) if r == "user"]
    assert shown == ["question: q2", "question: q3", "question: q4"]
    with pytest.raises(ValueError):
        functai.last_turns(-1)


def test_failed_turns_are_never_parents():
    script = ScriptedLM(["A1", RuntimeError("model down"), "A3"])
    functai.configure(client=script)
    chat = tutor.conversation("d")
    chat("one")
    with pytest.raises(RuntimeError):
        chat("two")
    assert chat.head.state == "failed"
    chat("three")
    assert chat.head.parent == chat.turns[0].id
    assert [t.inputs["question"] for t in chat.turns] == ["one", "three"]
    assert conversation_messages(script.requests[-1]) == [
        ("user", "question: one"), ("assistant", "A1"), ("user", "question: three"),
    ]


def test_continue_from_a_failed_turn_is_refused():
    functai.configure(client=ScriptedLM([RuntimeError("x")]))
    chat = tutor.conversation("e")
    with pytest.raises(RuntimeError):
        chat("one")
    with pytest.raises(FunctAIError) as info:
        chat.continue_from(chat.head)
    assert info.value.code == "conversation-parent"


@pytest.mark.parametrize("bad", ["", "-x", "a/b", "../x", "x" * 201, "a b", 3])
def test_conversation_ids(bad):
    with pytest.raises(FunctAIError) as info:
        tutor.conversation(bad)
    assert info.value.code == "conversation-id"


def test_conversation_settings_and_plugins_are_the_innermost_block():
    lm = counting_lm()
    log = []

    def tag(name):
        return Plugin(name, before_call=lambda c: log.append(name) or Change(sections=[name]))

    @ai(plugins=[tag("own")], temperature=0.9)
    def helper(q: str) -> str:
        """Helper."""

    functai.configure(plugins=[tag("process")])
    chat = helper.conversation("f", plugins=[tag("conv")], temperature=0.1)
    with functai.settings(plugins=[tag("block")], temperature=0.5):
        chat("x")
    assert log == ["own", "conv", "block", "process"]
    assert lm.requests[0].settings["temperature"] == 0.1  # a conversation's settings beat the function's own


# turn hooks ---------------------------------------------------------------------


def test_turn_start_rewrites_inputs_in_order_and_is_recorded(tmp_path, default_store):
    lm = counting_lm()
    seen = []

    def first(turn):
        seen.append(("first", dict(turn.inputs), turn.conversation, turn.parent, turn.program is lesson))
        return Change(inputs={"level": "advanced"})

    def second(turn):
        seen.append(("second", dict(turn.inputs)))
        return Change(inputs={"topic": turn.inputs["topic"].upper()})

    functai.configure(log_calls=str(tmp_path / "calls"))
    chat = lesson.conversation("g", plugins=[Plugin("one", turn_start=first), Plugin("two", turn_start=second)])
    chat("fractions")
    assert seen == [("first", {"topic": "fractions", "level": "basic"}, "g", None, True),
                    ("second", {"topic": "fractions", "level": "advanced"})]
    assert lm.requests[0].messages[-1]["content"] == "topic: FRACTIONS\nlevel: advanced"
    turn = chat.head
    assert turn.inputs == {"topic": "FRACTIONS", "level": "advanced"}
    (record,) = functai.read_calls(tmp_path / "calls")
    where = "memory" if default_store == "memory" else store_module.store_reference(chat.store)
    assert record.conversation == {"id": "g", "turn": turn.id, "parent": None, "store": where, "shown": {"last": 0}}
    assert [(c["plugin"], c["hook"], c["change"]) for c in record.changes] == [
        ("one", "turn_start", {"inputs": {"level": "advanced"}}),
        ("two", "turn_start", {"inputs": {"topic": "FRACTIONS"}}),
    ]


def test_turn_start_with_an_unknown_input_refuses():
    counting_lm()
    chat = lesson.conversation("h", plugins=[Plugin("bad", turn_start=lambda t: Change(inputs={"nope": 1}))])
    with pytest.raises(PluginError) as info:
        chat("x")
    assert (info.value.code, info.value.plugin, info.value.hook, info.value.field) == (
        "plugin-change", "bad", "turn_start", "inputs")
    assert chat.all_turns() == []


def test_context_keep_without_and_sections_with_three_plugins(tmp_path):
    lm = counting_lm()
    functai.configure(log_calls=str(tmp_path / "calls"))
    chat = lesson.conversation("i", store=str(tmp_path / "store"))
    for topic in ("t1", "t2", "t3"):
        chat(topic)
    t1, t2, t3 = (t.id for t in chat.turns)
    seen = []

    def one(context):
        seen.append([(t.id, t.without) for t in context.turns])
        return Change(without=["level"], sections=["From one."])

    def two(context):
        seen.append([(t.id, t.without) for t in context.turns])
        return Change(keep=[t1, t3], without={t3: ["output"]})

    def three(context):
        seen.append(([(t.id, t.without) for t in context.turns], context.sections))
        return Change(sections=["From three."], without={t1: ["topic"]})

    plugins = [Plugin("one", context=one), Plugin("two", context=two), Plugin("three", context=three)]
    branch = lesson.conversation("i", store=str(tmp_path / "store"), plugins=plugins)
    branch("t4")
    assert seen == [
        [(t1, ()), (t2, ()), (t3, ())],
        [(t1, ("level",)), (t2, ("level",)), (t3, ("level",))],
        ([(t1, ("level",)), (t3, ("level", "output"))], ("From one.",)),
    ]
    request = lm.requests[-1]
    assert request.messages[0]["content"] == "Teach the topic.\n\nFrom one.\n\nFrom three."
    assert conversation_messages(request) == [
        ("assistant", "A1"),  # t1 without level and topic: no user message left
        ("user", "topic: t3"),  # t3 without level and output
        ("user", "topic: t4\nlevel: basic"),
    ]
    head = branch.head
    records = [json.loads(line) for line in (tmp_path / "store" / "i.jsonl").read_text().splitlines()]
    turn_record = next(r for r in records if r["kind"] == "turn" and r["turn"] == head.id)
    assert turn_record["context"] == {
        "without": {t1: ["level", "topic"], t3: ["level", "output"]},
        "sections": ["From one.", "From three."],
    }
    assert turn_record["shown"] == {"last": 3, "drop": [t2]}  # the branch's 3 newest done turns, but t2
    assert [c["plugin"] for c in turn_record["changes"]] == ["one", "two", "three"]
    call = list(functai.read_calls(tmp_path / "calls"))[-1]
    assert call.sections == ["From one.", "From three."]
    assert [c["hook"] for c in call.changes] == ["context", "context", "context"]


def test_context_keep_must_name_done_turns_of_the_branch():
    counting_lm()
    chat = tutor.conversation("j")
    chat("one")
    other = chat.continue_from(chat.turns[0])
    other("branch")
    stranger = other.head.id
    chat("two")
    bad = Plugin("bad", context=lambda c: Change(keep=[stranger]))
    with pytest.raises(PluginError) as info:
        tutor.conversation("j", plugins=[bad]).continue_from(chat.head)("three")
    assert (info.value.code, info.value.field) == ("plugin-change", "keep")


def test_turn_end_hears_and_a_failure_is_reported_while_the_turn_stays_done():
    counting_lm()
    heard = []

    def listen(turn):
        heard.append((turn.state, dict(turn.outputs), [t.id for t in turn.turns()]))

    def broken(turn):
        raise ValueError("listener crashed")

    chat = tutor.conversation("k", plugins=[Plugin("ear", turn_end=listen), Plugin("broken", turn_end=broken)])
    with log_events() as logged:
        assert chat("q") == "A1"
    assert logged.named("broken")
    assert chat.head.state == "done"
    assert heard == [("done", {"output": "A1"}, [chat.head.id])]


# entries --------------------------------------------------------------------------


def test_entries_follow_branches():
    counting_lm()
    notes = Plugin("notes")

    @notes.before_call
    def note(call):
        call.remember("seen", {"turn": call.turn})
        return None

    chat = tutor.conversation("l", plugins=[notes])
    chat.remember("notes", "mode", "careful")  # no turn: every branch
    chat("one")
    one = chat.head.id
    chat("two")
    two = chat.head.id
    other = chat.continue_from(chat.turns[0])
    other("branch")
    branch = other.head.id
    assert [e["data"] for e in chat.entries("notes", "seen")] == [{"turn": one}, {"turn": two}]
    assert [e["data"] for e in other.entries("notes", "seen")] == [{"turn": one}, {"turn": branch}]
    assert [e["data"] for e in other.entries("notes", "mode")] == ["careful"]
    assert set(chat.entries("notes", "seen")[0]) == {"turn", "data", "at"}
    chat.remember("notes", "pinned", 2, turn=chat.turns[1])
    assert other.entries("notes", "pinned") == [] and len(chat.entries("notes", "pinned")) == 1


def test_remember_outside_a_conversation_raises_and_entries_are_empty():
    counting_lm()
    results = []

    def handler(call):
        results.append(call.entries("x"))
        call.remember("k", 1)

    with pytest.raises(PluginError) as info:
        ai(plugins=[Plugin("p", before_call=handler)])(tutor.fn)("q")
    assert isinstance(info.value.__cause__, ValueError)
    assert results == [[]]


# stores -------------------------------------------------------------------------------


def test_folder_store_records_and_modes(tmp_path):
    counting_lm()
    folder = tmp_path / "tutoring"
    chat = tutor.conversation("alex", store=str(folder))
    chat("q1")
    path = folder / "alex.jsonl"
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(r["functai_conversation"] == 1 and "kind" in r for r in records)
    assert [r["kind"] for r in records] == ["conversation", "turn", "reply", "end"]
    assert records[0]["function"] == "test_conversations:tutor"
    again = tutor.conversation("alex", store=str(folder))
    assert [t.id for t in again.turns] == [t.id for t in chat.turns]


def test_readers_skip_unknown_kinds_and_keys_and_a_torn_last_line(tmp_path):
    counting_lm()
    folder = tmp_path / "s"
    chat = tutor.conversation("m", store=str(folder))
    chat("q1")
    path = folder / "m.jsonl"
    with open(path, "a") as handle:
        handle.write(json.dumps({"functai_conversation": 1, "kind": "from-the-future", "x": 1}) + "\n")
        handle.write('{"functai_conversation": 1, "kind": "turn", "tu')  # a crash mid-write
    fresh = tutor.conversation("m", store=str(folder))
    assert len(fresh.turns) == 1
    torn = f"at={path}:6 reason=a write cut short (a crash while writing); the next writer ended it"
    with log_events() as caught:  # the writer that ends the torn line says so
        assert fresh("q2") == "A2"
    assert caught.messages == [f"functai: conversation line skipped: {torn}"]
    again = tutor.conversation("m", store=str(folder))  # the same store in this process: said once
    assert [t.inputs["question"] for t in again.turns] == ["q1", "q2"]
