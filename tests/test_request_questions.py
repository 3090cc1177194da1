"""A ``request`` handler that asks before its request is sent (``event.ask``), records a decision
(``Change.decision``), changes a setting, or refuses with its own code: what a budget is made of."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest
from checkout import shipped_env

import functai
from functai import Answer, Change, FunctAIError, Plugin, Waiting, ai, read_calls
from functai.testing import ScriptedLM, log_events, tool_call


def _asker(seen: list, *, extend: float | None = 5.0, decide=None, when=lambda event: True) -> Plugin:
    """Asks before the first request ``when`` picks that is not read back, until it has an answer."""
    answers: list = []

    def ask(event):
        seen.append(("event", event.turn, event.recorded))
        if event.recorded or answers or not when(event):
            return None
        answer = event.ask("allow 5 more?", extend=extend, decide=decide)
        answers.append(answer)
        seen.append(answer)
        return Change(decision="asked", note=repr(answer)[:200])

    return Plugin("asker", version="1.2", request=ask)


def _streamed(fn, mode, hear):
    """``fn("q")`` streamed (``mode``: sync or async), each event given to ``hear(stream, event)``; the stream."""
    if mode == "sync":
        with fn.stream("q") as stream:
            for event in stream:
                hear(stream, event)
        return stream

    async def consume():
        async with fn.astream("q") as stream:
            async for event in stream:
                hear(stream, event)
        return stream

    return asyncio.run(consume())


def _fn(plugins, replies, **settings):
    @ai(client=ScriptedLM(replies), plugins=plugins, **settings)
    def answer(question: str) -> str:
        """Answer the question."""

    return answer


def test_in_a_plain_call_nobody_can_be_asked():
    seen: list = []
    assert _fn([_asker(seen)], ["fine"])("q") == "fine"
    assert seen[-1] is None


@pytest.mark.parametrize("given, expected", [
    (True, Answer(True, 5.0)),
    (2.5, Answer(True, 2.5)),
    (0, Answer(True, 0)),
    (False, Answer(False)),
    (None, Answer(False)),
    ("not today", Answer(False, reason="not today")),
    (-1, Answer(False, reason="a check failed")),  # no answer it knows: refused, never allowed
    (object(), Answer(False, reason="a check failed")),
])
def test_a_decide_function_answers_at_once(given, expected):
    seen: list = []
    questions: list = []

    def decide(question):
        questions.append(question)
        return given

    if expected.reason == "a check failed":
        with log_events() as logged:
            _fn([_asker(seen, decide=decide)], ["fine"])("q")
        assert logged.named("decide function returned no answer")
    else:
        _fn([_asker(seen, decide=decide)], ["fine"])("q")
    assert seen[-1] == expected
    assert isinstance(questions[0], functai.events.Question)
    assert questions[0].text == "allow 5 more?" and questions[0].extend == 5.0 and questions[0].plugin == "asker"
    assert isinstance(questions[0].about, functai.events.Request) and questions[0].about.function == "answer"


def test_a_decide_function_that_raises_refuses():
    seen: list = []
    with log_events() as logged:
        _fn([_asker(seen, decide=lambda q: 1 / 0)], ["fine"])("q")
    assert logged.named("decide function failed.*ZeroDivisionError")
    assert seen[-1] == Answer(False, reason="a check failed")


def test_ask_checks_its_arguments():
    for bad in ({"extend": -1}, {"extend": "5"}, {"extend": float("inf")}):
        plugin = Plugin("bad", request=lambda event, bad=bad: event.ask("more?", **bad))
        with pytest.raises(FunctAIError) as info:
            _fn([plugin], ["fine"])("q")
        assert info.value.code == "plugin-failed" and "extension is a number" in info.value.message
    blank = Plugin("blank", request=lambda event: event.ask("  "))
    with pytest.raises(FunctAIError, match="non-empty string"):
        _fn([blank], ["fine"])("q")


def test_a_turn_waits_for_the_question_and_a_person_grants_an_extension(tmp_path):
    seen: list = []
    lm = ScriptedLM(["fine"])
    fn = _fn([_asker(seen)], [])
    chat = fn.conversation("c", store=str(tmp_path / "s"), client=lm)
    with pytest.raises(Waiting) as info:
        chat("q")
    (question,) = info.value.approvals
    assert question["kind"] == "request" and question["question"] == "allow 5 more?"
    assert question["extend"] == 5.0 and question["key"] == "request.1.asker" and lm.requests == []
    turn = info.value.turn
    assert turn.state == "waiting"
    turn.approve(extend=7, by="ana")
    assert turn.resume() == "fine"
    assert seen[-1] == Answer(True, 7, None, "ana", "request.1.asker")
    assert len(lm.requests) == 1


def test_approving_without_extend_grants_the_offer_and_a_denial_says_why(tmp_path):
    for answer, expected in (("approve", Answer(True, 5.0, None, None, "request.1.asker")),
                             ("deny", Answer(False, None, "too much", None, "request.1.asker"))):
        seen: list = []
        chat = _fn([_asker(seen)], ["fine"]).conversation(answer, store=str(tmp_path / answer))
        with pytest.raises(Waiting) as info:
            chat("q")
        turn = info.value.turn
        turn.approve() if answer == "approve" else turn.deny(reason="too much")
        assert turn.resume() == "fine"
        assert seen[-1] == expected


def test_the_question_keeps_its_key_when_the_turn_resumes_after_earlier_requests(tmp_path):
    """Asked before the second request (after a tool ran): the resumed turn reads the first reply
    back (``recorded``) and finds the answer under the same key."""
    seen: list = []

    @functai.tool
    def look(term: str) -> str:
        """Look a term up."""
        return "found"

    lm = ScriptedLM([tool_call("look", {"term": "x"}), "fine"])
    after_the_tool = _asker(seen, when=lambda event: any(m["role"] == "tool" for m in event.request.messages))

    @ai(client=lm, tools=[look], plugins=[after_the_tool])
    def answer(question: str) -> str:
        """Answer the question."""

    chat = answer.conversation("c", store=str(tmp_path / "s"))
    with pytest.raises(Waiting) as info:
        chat("q")
    assert info.value.approvals[0]["key"] == "request.2.asker" and len(lm.requests) == 1
    info.value.turn.approve(extend=1)
    assert info.value.turn.resume() == "fine"
    turn_id = info.value.turn.id
    assert ("event", turn_id, True) in seen  # the first request's reply was read back, not paid again
    assert seen[-1] == Answer(True, 1, None, None, "request.2.asker") and len(lm.requests) == 2


def test_extend_is_refused_where_no_question_offers_one(tmp_path):
    @functai.tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return "done"

    functai_approval = pytest.importorskip("functai_approval")

    @ai(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "ok"]), tools=[refund],
        plugins=[functai_approval.plugin])
    def support(request: str) -> str:
        """Support."""

    chat = support.conversation("c", store=str(tmp_path / "s"), approve="changes")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    with pytest.raises(FunctAIError) as refused:
        info.value.turn.approve(extend=3)
    assert refused.value.code == "input-invalid" and "waits for no such question" in refused.value.message
    seen: list = []
    other = _fn([_asker(seen)], ["fine"]).conversation("d", store=str(tmp_path / "t"))
    with pytest.raises(Waiting) as asked:
        other("q")
    for bad in (-1, "3", float("nan")):
        with pytest.raises(FunctAIError) as wrong:
            asked.value.turn.approve(extend=bad)
        assert wrong.value.code == "input-invalid"
    asked.value.turn.approve(extend=2)
    with pytest.raises(FunctAIError) as again:
        asked.value.turn.approve(extend=9)  # another grant than the one recorded: the first answer holds
    assert again.value.code == "approval-answered"


def test_a_decision_and_a_setting_are_recorded_and_the_setting_is_sent(tmp_path):
    lm = ScriptedLM(["fine"])
    capper = Plugin("capper", version="2.0", request=lambda event: Change(
        decision="checked", settings={"max_tokens": 64}, note="64 tokens left"))

    @ai(client=lm, plugins=[capper], log_calls=str(tmp_path / "log"))
    def answer(question: str) -> str:
        """Answer."""

    assert answer("q") == "fine"
    assert lm.requests[0].settings["max_tokens"] == 64
    (record,) = read_calls(str(tmp_path / "log"))
    assert record.changes == [{"plugin": "capper", "version": "2.0", "hook": "request",
                               "change": {"settings": {"max_tokens": 64}, "decision": "checked"},
                               "note": "64 tokens left", "request": 1}]
    assert record.replayable  # a setting, as before_call's: the call can still be asked again


def test_a_decision_alone_is_recorded_and_changes_nothing(tmp_path):
    lm = ScriptedLM(["fine"])
    judge = Plugin("judge", request=lambda event: Change(decision="checked", note="ok"))

    @ai(client=lm, plugins=[judge], log_calls=str(tmp_path / "log"))
    def answer(question: str) -> str:
        """Answer."""

    answer("q")
    (record,) = read_calls(str(tmp_path / "log"))
    assert [c["change"] for c in record.changes] == [{"decision": "checked"}]
    assert lm.requests[0].settings == {}
    with pytest.raises(FunctAIError) as info:
        _fn([Plugin("odd", reply=lambda event: Change(decision="x"))], ["fine"])("q")
    assert info.value.code == "plugin-change" and "reply does not take 'decision'" in info.value.message


def test_a_handler_refuses_with_its_own_code_and_the_refusal_is_recorded(tmp_path):
    lm = ScriptedLM(["fine"])

    def refuse(event):
        raise FunctAIError("over the limit: nothing was sent", code="budget-exceeded")

    @ai(client=lm, plugins=[Plugin("limit", version="3.1", request=refuse)], log_calls=str(tmp_path / "log"))
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(FunctAIError) as info:
        answer("q")
    assert info.value.code == "budget-exceeded" and lm.requests == []
    (record,) = read_calls(str(tmp_path / "log"))
    assert record.changes == [{"plugin": "limit", "version": "3.1", "hook": "request",
                               "change": {"refused": "budget-exceeded"}, "note": "over the limit: nothing was sent"}]
    crash = Plugin("crash", request=lambda event: 1 / 0)
    with pytest.raises(FunctAIError) as crashed:
        _fn([crash], ["fine"])("q")
    assert crashed.value.code == "plugin-failed"  # a bug is no refusal: nothing recorded as one


def test_request_and_reply_handlers_keep_entries_in_a_turn():
    def note(event):
        event.remember("seen", {"hook": "request", "turn": event.turn})

    def heard(event):
        event.remember("seen", {"hook": "reply", "recorded": event.recorded})

    keeper = Plugin("keeper", request=note, reply=heard)
    chat = _fn([keeper], ["a", "b"]).conversation("c")
    chat("q")
    turn = chat.head.id
    assert [e["data"] for e in chat.entries("keeper", "seen")] == [
        {"hook": "request", "turn": turn}, {"hook": "reply", "recorded": False}]
    with pytest.raises(FunctAIError) as info:
        _fn([keeper], ["a"])("q")  # outside a conversation there is nowhere to keep an entry
    assert info.value.code == "plugin-failed" and "remember() works only inside a conversation turn" in str(info.value)


def test_a_stream_and_an_async_call_wait_for_the_question(tmp_path):
    seen: list = []
    chat = _fn([_asker(seen)], ["fine", "fine"]).conversation("c", store=str(tmp_path / "s"))
    events = []
    with pytest.raises(Waiting) as info:
        for event in chat.stream("q"):
            events.append(event.kind)
    assert info.value.approvals[0]["kind"] == "request" and "text" not in events
    info.value.turn.approve()
    assert asyncio.run(info.value.turn.aresume()) == "fine"
    with pytest.raises(Waiting):
        asyncio.run(_fn([_asker([])], ["fine"]).conversation("d", store=str(tmp_path / "t")).acall("q"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_person_at_a_turns_stream_answers_a_request_question_and_the_turn_goes_on(tmp_path, mode):
    seen: list = []
    chat = _fn([_asker(seen)], ["fine"]).conversation("c", store=str(tmp_path / "s"))
    waiting = []

    def hear(stream, event):
        if event.kind == "waiting":
            waiting.append(event.approvals)
            stream.approve(extend=7)

    stream = _streamed(chat, mode, hear)
    [[question]] = waiting
    assert question["kind"] == "request" and question["key"] == "request.1.asker"
    assert seen[-1] == Answer(True, 7, key="request.1.asker") and stream.value == "fine"
    assert chat.head.state == "done"


def test_the_cli_grants_an_extension_and_shows_the_question(tmp_path):
    module = tmp_path / "asking_app.py"
    module.write_text(textwrap.dedent('''
        import functai
        from functai import Change, Plugin, ai
        from functai.testing import ScriptedLM

        def ask(event):
            if event.recorded:
                return None
            answer = event.ask("used 8 of 10; allow 10 more?", extend=10)
            return Change(decision="granted", note=f"extend={answer.extend} by={answer.by}")

        @ai(client=ScriptedLM(["fine"] * 3), plugins=[Plugin("asker", request=ask)])
        def answer(question: str) -> str:
            """Answer."""
    '''))
    store = str(tmp_path / "s")
    sys.path.insert(0, str(tmp_path))
    try:
        import asking_app
    finally:
        sys.path.remove(str(tmp_path))
    chat = asking_app.answer.conversation("c", store=store)
    with pytest.raises(Waiting):
        chat("q")
    env = shipped_env(PYTHONPATH=os.pathsep.join([str(tmp_path), os.getcwd()]))
    run = [sys.executable, "-m", "functai"]
    shown = subprocess.run([*run, "conversation", store, "c"], capture_output=True, text=True, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "used 8 of 10; allow 10 more? (offers 10 more) (asker)" in shown.stdout
    done = subprocess.run([*run, "approve", store, "c", "--extend", "3", "--by", "ana", "--function",
                           f"{module}:answer"], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "approved by ana with 3 more" in done.stdout and "fine" in done.stdout
    reopened = functai.Conversation.open("c", store=store)
    answered = reopened.turns[-1]
    assert answered.state == "done"
    log = [json.loads(line) for line in open(os.path.join(store, "c.jsonl"))]
    assert [r["extend"] for r in log if r.get("kind") == "answer"] == [3]


def test_what_a_turn_kept_before_it_failed_belongs_to_the_branch_it_failed_on():
    """A failed turn is never a parent: its entries belong to its parent's branches, so a budget
    still counts what it spent (and a branch forked before it does not)."""
    def keep(event):
        if event.recorded:
            return None
        event.remember("spent", {"turn": event.turn})
        if event.request.messages[-1]["content"].endswith("fail"):
            raise FunctAIError("stop here", code="budget-exceeded")
        return None

    chat = _fn([Plugin("keeper", request=keep)], ["a", "b", "c", "d"]).conversation("c")
    chat("one")
    first = chat.head
    with pytest.raises(FunctAIError):
        chat("then fail")
    failed = chat.all_turns()[-1]
    assert failed.state == "failed"
    chat("two")
    seen = [e["turn"] for e in chat.entries("keeper", "spent")]
    assert seen == [first.id, failed.id, chat.head.id]
    during = []
    reader = Plugin("keeper", request=lambda event: during.append(len(event.entries("spent"))))
    other = _fn([reader], ["x"]).conversation("c", store=chat.store)
    other("three")  # a handler reads the failed turn's entry on the branch too
    assert during == [3]
    fork = chat.continue_from(None)  # a branch from the start: before the failed turn's parent
    assert [e["turn"] for e in fork.entries("keeper", "spent")] == []


def test_an_edit_of_a_question_asked_before_a_request_is_refused(tmp_path):
    chat = _fn([_asker([])], ["fine"]).conversation("c", store=str(tmp_path / "s"))
    with pytest.raises(Waiting) as info:
        chat("q")
    turn = info.value.turn
    with pytest.raises(FunctAIError) as refused:
        turn.approve(turn.approvals[0]["key"], inputs={"extend": 3})
    assert refused.value.code == "input-invalid" and "answer it with extend=" in refused.value.message


def test_in_a_turn_a_decide_functions_answer_carries_the_questions_key_and_events_name_the_outer_call(tmp_path):
    seen: list = []
    outer: list = []
    chat = _fn([_asker(seen, decide=lambda q: 3), Plugin("outer", request=lambda e: outer.append(
        (e.call, e.outer_call)))], ["fine"]).conversation("c", store=str(tmp_path / "s"))
    chat("q")
    assert seen[-1] == Answer(True, 3, None, None, "request.1.asker")
    assert outer == [(chat.head.call, chat.head.call)]  # the turn's own call is the outermost


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("answer, expected", [
    (lambda stream: stream.approve(), Answer(True, 5.0, key="request.1.asker")),
    (lambda stream: stream.approve(extend=7), Answer(True, 7, key="request.1.asker")),
    (lambda stream: stream.deny(reason="too much"), Answer(False, reason="too much", key="request.1.asker")),
    (lambda stream: stream.approve(by="ana"), Answer(True, 5.0, by="ana", key="request.1.asker")),
    (lambda stream: stream.deny(by="bo"), Answer(False, by="bo", key="request.1.asker")),
    (lambda stream: None, None),  # nobody answered: as in a plain call
], ids=["the-offer", "more", "denied", "by", "denied-by", "unanswered"])
def test_the_person_at_a_plain_stream_answers_a_request_question(mode, answer, expected):
    seen: list = []
    fn = _fn([_asker(seen)], ["fine"])
    waiting = []

    def hear(stream, event):
        if event.kind == "waiting":
            waiting.append(event.approvals)
            answer(stream)

    stream = _streamed(fn, mode, hear)
    [[question]] = waiting
    assert (question["kind"], question["question"], question["extend"]) == ("request", "allow 5 more?", 5.0)
    assert seen[-1] == expected and stream.value == "fine"
    [decided] = [c for c in stream.record.changes if c["plugin"] == "asker"]  # the hook ran again: recorded once
    assert decided["change"] == {"decision": "asked"}


def test_a_request_question_at_a_stream_takes_no_inputs_and_a_tool_call_no_extension():
    fn = _fn([_asker([])], ["fine"])
    with fn.stream("q") as stream:
        for event in stream:
            if event.kind == "waiting":
                with pytest.raises(FunctAIError, match="extend= instead") as info:
                    stream.approve(inputs={"x": 1})
                assert info.value.code == "input-invalid"
                with pytest.raises(FunctAIError, match="a number from 0 up"):
                    stream.approve(extend=-1)
                stream.approve(extend=2)
    assert stream.value == "fine"
