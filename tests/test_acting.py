"""Hooks that act: a ``request`` handler answers, a ``reply`` handler replaces, ``model_error``
and ``tool_error`` recover — in the sync, async and streaming drivers alike, every act recorded."""

from __future__ import annotations

import asyncio
import json

import attrs
import pytest

import functai
from functai import Change, ModelError, Plugin, PluginError, Reply, ai, tool
from functai.testing import ScriptedLM, tool_call


@pytest.fixture(params=["sync", "async", "stream"])
def run(request):
    """``run(fn, *args)`` → (value, record, texts): the call made by one driver; ``texts`` are a
    stream's text events (None for the other drivers)."""
    mode = request.param

    def call(fn, *args, **kwargs):
        if mode == "sync":
            value, record = fn.run(*args, **kwargs)
            return value, record, None
        if mode == "async":
            value, record = asyncio.run(fn.arun(*args, **kwargs))
            return value, record, None
        with fn.stream(*args, **kwargs) as stream:
            texts = [event.text for event in stream if event.kind == "text"]
        return stream.value, stream.record, texts

    call.mode = mode
    return call


@tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


def _refuse(tool):
    raise functai.FunctAIError("no", code="no-tools")


def _answers(text="Lima", *, note=None, name="canned", version="2.0.0"):
    plugin = Plugin(name, version=version)

    @plugin.request
    def answer(event):
        reply = Reply(text=text, finish_reason="stop", usage={"input_tokens": 7, "output_tokens": 1})
        return attrs.evolve(reply, note=note) if note else reply

    return plugin


# --- request answers ---------------------------------------------------------------------------

def test_an_answered_request_never_reaches_the_model_and_is_recorded(run):
    lm = ScriptedLM(["from the model"])
    heard = []
    listener = Plugin("listener", reply=lambda event: heard.append((event.answered, event.reply.text)))

    @ai(client=lm, plugins=[_answers(note="canned answer for tests"), listener])
    def capital(country: str) -> str:
        """The capital city of the country."""

    value, record, texts = run(capital, "Peru")
    assert value == "Lima" and lm.requests == []
    assert record.changes == [{
        "plugin": "canned", "version": "2.0.0", "hook": "request", "note": "canned answer for tests",
        "change": {"answer": {"text": "Lima", "tool_calls": [], "finish_reason": "stop",
                              "usage": {"input_tokens": 7, "output_tokens": 1}}},
    }]
    assert record.replayable is True and "replayable" not in record.to_dict()
    assert record.usage == {} and record.attempts == 0  # no model was paid
    assert heard == [("canned", "Lima")]  # reply handlers still run, told who answered
    if texts is not None:
        assert texts == ["Lima"]  # one text event


def test_an_answer_with_tool_calls_runs_the_tools_then_asks_the_model(run):
    lm = ScriptedLM(["It shipped."])
    plugin = Plugin("first-step")

    @plugin.request
    def answer(event):
        if len(event.request.messages) == 2:  # only the first request: system and user
            return tool_call("lookup", {"order": "A1"})

    @ai(client=lm, tools=[lookup], plugins=[plugin])
    def support(question: str) -> str:
        """Answer the customer."""

    value, record, _ = run(support, "where is A1?")
    assert value == "It shipped."
    assert record.tool_calls[0]["output"] == "order A1: shipped"
    assert len(lm.requests) == 1 and lm.requests[0].messages[-1]["content"] == "order A1: shipped"
    assert [c["hook"] for c in record.changes] == ["request"]


def test_the_first_answer_ends_the_request_hook_and_a_replacement_stays_unreplayable(run):
    later = []
    replace = Plugin("replace", request=lambda e: functai.Request(model="other", messages=e.request.messages))

    @ai(client=ScriptedLM([]), plugins=[replace, _answers(), Plugin("late", request=lambda e: later.append(1))])
    def capital(country: str) -> str:
        """The capital city of the country."""

    value, record, _ = run(capital, "Peru")
    assert value == "Lima" and later == []
    assert [c["change"].keys() for c in record.changes] == [{"request"}, {"answer"}]
    assert record.replayable is False  # the replacement, not the answer, made it so


def test_a_note_alone_changes_nothing_and_is_not_recorded(run):
    noted = Plugin("noted", request=lambda e: Change(note="looked"), before_call=lambda c: Change(note="x"))

    @ai(client=ScriptedLM(["ok"]), plugins=[noted])
    def echo(text: str) -> str:
        """Echo."""

    value, record, _ = run(echo, "hi")
    assert value == "ok" and record.changes == []


def test_an_answer_in_a_conversation_turn_is_kept_and_read_again_on_resume(install):
    import functai_approval

    install(functai_approval.plugin)

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return f"order {order} refunded"

    answered = []
    plugin = Plugin("canned")

    @plugin.request
    def answer(event):
        if len(event.request.messages) == 2:
            answered.append(1)
            return tool_call("refund", {"order": "A1"})

    lm = ScriptedLM(["Refunded."])

    @ai(client=lm, tools=[refund], plugins=[plugin], approve="changes")
    def support(question: str) -> str:
        """Answer the customer."""

    chat = support.conversation("c1")
    with pytest.raises(functai.Waiting) as waiting:
        chat("refund A1")
    turn = waiting.value.turn
    turn.approve()
    assert turn.resume() == "Refunded."
    assert len(lm.requests) == 1 and len(answered) == 2  # the handler ran again; its reply was the turn's


# --- reply replaces ----------------------------------------------------------------------------

def test_a_replaced_reply_is_read_and_recorded(run):
    redact = Plugin("redact", version="1.1.0")

    @redact.reply
    def mask(event):
        if "4111" in (event.reply.text or ""):
            return Reply(text=event.reply.text.replace("4111", "****"), finish_reason="stop",
                         note="masked a card number")

    lm = ScriptedLM([Reply(text="card 4111", finish_reason="stop", usage={"output_tokens": 2})])

    @ai(client=lm, plugins=[redact])
    def card(name: str) -> str:
        """The card."""

    value, record, texts = run(card, "x")
    assert value == "card ****"
    assert record.changes == [{"plugin": "redact", "version": "1.1.0", "hook": "reply", "note": "masked a card number",
                               "change": {"reply": {"text": "card ****", "tool_calls": [], "finish_reason": "stop",
                                                    "usage": {}}}}]
    assert record.usage == {"output_tokens": 2}  # the model's reply was paid for
    if texts is not None:
        assert "".join(texts) == "card 4111"  # already shown; the done event and the record hold the replacement


def test_a_replaced_reply_with_tool_calls_runs_them(run):
    swap = Plugin("swap", reply=lambda e: tool_call("lookup", {"order": "B2"}) if e.attempt == 1 else None)
    lm = ScriptedLM(["nothing to do", "B2 shipped"])

    @ai(client=lm, tools=[lookup], plugins=[swap])
    def support(question: str) -> str:
        """Answer the customer."""

    value, record, _ = run(support, "q")
    assert value == "B2 shipped" and record.tool_calls[0]["output"] == "order B2: shipped"


def test_later_reply_handlers_see_the_replacement(run):
    seen = []
    first = Plugin("first", reply=lambda e: Reply(text=e.reply.text.upper(), finish_reason="stop"))
    second = Plugin("second", reply=lambda e: seen.append(e.reply.text))

    @ai(client=ScriptedLM(["quiet"]), plugins=[first, second])
    def echo(text: str) -> str:
        """Echo."""

    assert run(echo, "x")[0] == "QUIET" and seen == ["QUIET"]


def test_a_reply_handler_returning_something_else_refuses(run):
    @ai(client=ScriptedLM(["ok"]), plugins=[Plugin("odd", reply=lambda e: "text")])
    def echo(text: str) -> str:
        """Echo."""

    with pytest.raises(PluginError) as info:
        run(echo, "x")
    assert info.value.code == "plugin-change" and "functai.Reply" in info.value.message


# --- model_error -------------------------------------------------------------------------------

def _models(down=("a",)):
    def reply(request):
        if request.model in down:
            raise ModelError(f"{request.model} is down", code="model-http", status=503)
        return f"from {request.model}"

    return ScriptedLM(reply=reply)


def test_a_failing_model_is_replaced_by_another(run):
    lm = _models()
    failures = []
    switch = Plugin("switch", version="0.3.0")

    @switch.model_error
    def next_model(failure):
        failures.append((failure.lm, failure.error.code, failure.attempt, failure.request.model))
        if failure.lm == "a":
            return Change(lm="b", note="a is down")

    @ai(client=lm, lm="a", plugins=[switch])
    def echo(text: str) -> str:
        """Echo."""

    value, record, _ = run(echo, "x")
    assert value == "from b" and record.model == "b" and record.attempts == 2
    assert failures == [("a", "model-http", 1, "a")]
    assert [r.model for r in lm.requests] == ["a", "b"]
    assert record.changes == [{"plugin": "switch", "version": "0.3.0", "hook": "model_error", "note": "a is down",
                               "change": {"lm": "b", "error": "model-http"}}]


def test_the_request_hook_runs_again_for_the_new_model(run):
    seen = []

    @ai(client=_models(), lm="a", plugins=[Plugin("s", model_error=lambda f: Change(lm="b")),
                                           Plugin("r", request=lambda e: seen.append(e.request.model))])
    def echo(text: str) -> str:
        """Echo."""

    run(echo, "x")
    assert seen == ["a", "b"]


def test_no_change_lets_the_error_stand_and_retry_counts_against_max_requests(run):
    @ai(client=_models(down=("a",)), lm="a", max_requests=3, plugins=[Plugin("again", model_error=lambda f: Change(retry=0))])
    def echo(text: str) -> str:
        """Echo."""

    with pytest.raises(functai.FunctAIError) as info:
        run(echo, "x")
    assert info.value.code == "max-requests" and info.value.record.attempts == 3

    @ai(client=_models(), lm="a", plugins=[Plugin("quiet", model_error=lambda f: None)])
    def plain(text: str) -> str:
        """Echo."""

    with pytest.raises(ModelError) as info:
        run(plain, "x")
    assert info.value.code == "model-http" and info.value.record.changes == []


def test_a_retry_waits_and_asks_again(run):
    calls = []

    def flaky(request):
        calls.append(request.model)
        if len(calls) == 1:
            raise ModelError("busy", code="model-http", status=429)
        return "ok"

    @ai(client=ScriptedLM(reply=flaky), lm="m",
        plugins=[Plugin("wait", model_error=lambda f: Change(retry=0.01) if f.attempt < 3 else None)])
    def echo(text: str) -> str:
        """Echo."""

    value, record, _ = run(echo, "x")
    assert value == "ok" and calls == ["m", "m"] and record.attempts == 2
    assert record.changes[0]["change"] == {"retry": 0.01, "error": "model-http"}


def test_a_model_error_may_be_answered(run):
    @ai(client=_models(), lm="a",
        plugins=[Plugin("sorry", model_error=lambda f: Reply(text="later", finish_reason="stop"))])
    def echo(text: str) -> str:
        """Echo."""

    value, record, texts = run(echo, "x")
    assert value == "later" and record.changes[0]["change"]["answer"]["text"] == "later"
    assert record.changes[0]["change"]["error"] == "model-http"
    if texts is not None:
        assert texts == ["later"]


def test_a_model_error_change_that_sets_two_things_refuses(run):
    @ai(client=_models(), lm="a", plugins=[Plugin("both", model_error=lambda f: Change(lm="b", retry=1))])
    def echo(text: str) -> str:
        """Echo."""

    with pytest.raises(PluginError) as info:
        run(echo, "x")
    assert info.value.code == "plugin-change" and info.value.hook == "model_error"


# --- tool_error --------------------------------------------------------------------------------

def _failing(effects, *, idempotent=False, fails=1):
    runs = []

    @tool(effects=effects, idempotent=idempotent)
    def fetch(order: str) -> str:
        """Fetch an order."""
        runs.append(order)
        if len(runs) <= fails:
            raise ConnectionError("the order service timed out")
        return f"order {order}: ok"

    return fetch, runs


def test_a_tool_error_is_shown_to_the_model_as_the_handler_text(run):
    fetch, runs = _failing("reads", fails=5)
    advice = Plugin("advice", version="1.0.0")

    @advice.tool_error
    def explain(failure):
        assert failure.error == "ConnectionError: the order service timed out" and failure.attempt == 1
        return Change(output="The order service is down; tell the customer to try in an hour.", note="service down")

    lm = ScriptedLM([tool_call("fetch", {"order": "A1"}), "Please try in an hour."])

    @ai(client=lm, tools=[fetch], plugins=[advice])
    def support(question: str) -> str:
        """Answer the customer."""

    value, record, _ = run(support, "q")
    assert lm.requests[1].messages[-1]["content"] == "The order service is down; tell the customer to try in an hour."
    assert record.changes == [{"plugin": "advice", "version": "1.0.0", "hook": "tool_error", "note": "service down",
                               "change": {"output": "The order service is down; tell the customer to try in an hour.",
                                          "error": "ConnectionError"}}]
    assert record.tool_calls[0]["error"].startswith("ConnectionError") and runs == ["A1"]


@pytest.mark.parametrize("effects, idempotent", [("reads", False), ("changes", True)])
def test_a_retried_tool_runs_again(run, effects, idempotent):
    fetch, runs = _failing(effects, idempotent=idempotent)
    lm = ScriptedLM([tool_call("fetch", {"order": "A1"}), "done"])

    @ai(client=lm, tools=[fetch], plugins=[Plugin("retry", tool_error=lambda f: Change(retry=0))])
    def support(question: str) -> str:
        """Answer the customer."""

    value, record, _ = run(support, "q")
    assert runs == ["A1", "A1"] and lm.requests[1].messages[-1]["content"] == "order A1: ok"
    assert record.tool_calls[0]["attempts"] == 2 and "error" not in record.tool_calls[0]
    assert record.changes[0]["change"] == {"retry": 0, "error": "ConnectionError"}


@pytest.mark.parametrize("effects", ["changes", None])
def test_a_retried_tool_that_changes_things_refuses(run, effects):
    fetch, runs = _failing(effects)

    @ai(client=ScriptedLM([tool_call("fetch", {"order": "A1"}), "done"]), tools=[fetch],
        plugins=[Plugin("retry", tool_error=lambda f: Change(retry=0))])
    def support(question: str) -> str:
        """Answer the customer."""

    with pytest.raises(PluginError) as info:
        run(support, "q")
    assert info.value.code == "plugin-change" and info.value.field == "retry" and "idempotent=True" in info.value.message
    assert runs == ["A1"]  # never run twice


def test_max_tool_retries_bounds_the_retries(run):
    fetch, runs = _failing("reads", fails=10)

    @ai(client=ScriptedLM([tool_call("fetch", {"order": "A1"}), "gave up"]), tools=[fetch], max_tool_retries=1,
        plugins=[Plugin("retry", tool_error=lambda f: Change(retry=0))])
    def support(question: str) -> str:
        """Answer the customer."""

    value, record, _ = run(support, "q")
    assert value == "gave up" and runs == ["A1", "A1"]
    assert [c["change"] for c in record.changes] == [{"retry": 0, "error": "ConnectionError"}]
    assert record.tool_calls[0]["error"].startswith("ConnectionError")


def test_tool_error_does_not_fire_for_a_blocked_tool(run):
    fetch, runs = _failing("reads")
    fired = []

    @ai(client=ScriptedLM([tool_call("fetch", {"order": "A1"}), "ok"]), tools=[fetch],
        plugins=[Plugin("guard", tool_call=_refuse), Plugin("e", tool_error=fired.append)])
    def support(question: str) -> str:
        """Answer the customer."""

    run(support, "q")
    assert fired == [] and runs == []


# --- records and errors ------------------------------------------------------------------------

def test_acts_are_written_to_the_call_log_and_without_content_keep_who_acted(tmp_path, run):
    @ai(client=ScriptedLM([]), plugins=[_answers(note="canned")], log_calls=str(tmp_path), log_content=False)
    def capital(country: str) -> str:
        """The capital city of the country."""

    run(capital, "Peru")
    line = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[-1])
    assert line["changes"] == [{"plugin": "canned", "version": "2.0.0", "hook": "request"}]


@pytest.mark.parametrize("kwargs, field", [
    ({"note": "x" * 201}, "note"), ({"note": 3}, "note"), ({"retry": -1}, "retry"), ({"retry": 301}, "retry"),
    ({"retry": float("nan")}, "retry"), ({"retry": "soon"}, "retry"), ({"reply": "text"}, "reply"),
])
def test_a_bad_acting_change_is_refused_where_it_is_made(kwargs, field):
    with pytest.raises(PluginError) as info:
        Change(**kwargs)
    assert info.value.code == "plugin-change" and info.value.field == field


def test_idempotent_takes_a_flag():
    with pytest.raises(TypeError):
        tool(lambda order: order, idempotent="yes")


def test_show_prints_each_act_with_its_note(tmp_path, capsys):
    from functai.cli import main

    @ai(client=ScriptedLM([]), plugins=[_answers(note="canned answer for tests")], log_calls=str(tmp_path))
    def capital(country: str) -> str:
        """The capital city of the country."""

    _, record = capital.run("Peru")
    assert main(["show", record.id, "--log", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "canned 2.0.0\n    request: {\"answer\": {" in out and "(canned answer for tests)" in out


def test_a_reply_handler_handing_back_the_reply_changes_nothing(run):
    @ai(client=ScriptedLM(["ok"]), plugins=[Plugin("hear", reply=lambda e: e.reply)])
    def echo(text: str) -> str:
        """Echo."""

    value, record, _ = run(echo, "x")
    assert value == "ok" and record.changes == []


def _refund_turn(install, reply, plugins):
    """A turn that waits for approval of a refund the model (or a plugin) asked for."""
    import functai_approval

    install(functai_approval.plugin)
    ran = []

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return f"order {order} refunded"

    @ai(client=ScriptedLM(reply=reply), lm="a", tools=[refund], plugins=plugins, approve="changes")
    def support(question: str) -> str:
        """Answer the customer."""

    chat = support.conversation("c1")
    with pytest.raises(functai.Waiting) as waiting:
        chat("refund A1")
    return waiting.value.turn, ran


def test_a_resumed_turn_records_again_the_model_a_plugin_switched_to(install, tmp_path):
    def reply(request):
        if request.model == "a":
            raise ModelError("a is down", code="model-http", status=503)
        if request.messages[-1]["role"] == "tool":
            return Reply(text="Refunded.", finish_reason="stop", usage={"output_tokens": 2})
        return Reply(tool_calls=tool_call("refund", {"order": "A1"}).tool_calls, finish_reason="tool_calls",
                     usage={"output_tokens": 5})

    switch = Plugin("switch", model_error=lambda f: Change(lm="b") if f.lm == "a" else None)
    functai.configure(log_calls=str(tmp_path))
    turn, ran = _refund_turn(install, reply, [switch])
    turn.approve()
    assert turn.resume() == "Refunded." and ran == ["A1"]
    record = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[-1])
    assert record["model"] == "b" and record["usage"] == {"output_tokens": 7}
    assert record["attempts"] == 3  # a failed, b asked for the tool call, b asked after it
    assert [c["change"] for c in record["changes"] if c["hook"] == "model_error"] == [
        {"lm": "b", "error": "model-http"}]


def test_a_resumed_turn_records_a_plugins_answer_as_the_plugins(install, tmp_path):
    def reply(request):
        if request.messages[-1]["role"] == "tool":
            return "Refunded."
        raise ModelError("down", code="model-http", status=503)

    answer = Plugin("rescue", model_error=lambda f: Reply(
        tool_calls=tool_call("refund", {"order": "A1"}).tool_calls, finish_reason="tool_calls",
        usage={"output_tokens": 999}, note="answered while the model was down"))
    functai.configure(log_calls=str(tmp_path))
    turn, ran = _refund_turn(install, reply, [answer])
    turn.approve()
    assert turn.resume() == "Refunded." and ran == ["A1"]
    record = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[-1])
    assert record["usage"] == {}  # the plugin's answer was never paid for, first run or resumed
    assert [(c["plugin"], c["hook"], c.get("note")) for c in record["changes"]] == [
        ("rescue", "model_error", "answered while the model was down")]
    assert record["attempts"] == 2  # the model was asked twice: it failed, then it answered after the tool


def test_a_resumed_turn_records_again_what_a_guard_did_to_the_error_a_plugin_answered(install, tmp_path):
    def reply(request):
        if request.messages[-1]["role"] == "tool":
            return "Refunded."
        raise ModelError("down, key sk-123", code="model-http", status=503)

    guard = Plugin("guard", chunk=lambda c: Change(text=c.text.replace("sk-123", "[key]")) if "sk-123" in c.text
                   else None)
    answer = Plugin("rescue", model_error=lambda f: Reply(
        tool_calls=tool_call("refund", {"order": "A1"}).tool_calls, finish_reason="tool_calls"))
    functai.configure(log_calls=str(tmp_path))
    turn, ran = _refund_turn(install, reply, [guard, answer])
    turn.approve()
    assert turn.resume() == "Refunded." and ran == ["A1"]
    record = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[-1])
    assert [(c["plugin"], c["hook"]) for c in record["changes"]] == [("guard", "chunk"), ("rescue", "model_error")]


def test_a_resumed_turn_counts_no_attempt_for_a_request_a_plugin_answered(install, tmp_path):
    def reply(request):
        return "Refunded."

    answer = Plugin("canned", request=lambda f: None if f.request.messages[-1]["role"] == "tool" else Reply(
        tool_calls=tool_call("refund", {"order": "A1"}).tool_calls, finish_reason="tool_calls"))
    functai.configure(log_calls=str(tmp_path))
    turn, ran = _refund_turn(install, reply, [answer])
    turn.approve()
    assert turn.resume() == "Refunded." and ran == ["A1"]
    record = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[-1])
    assert record["attempts"] == 1  # only the request after the tool reached a model



def test_a_tool_retry_is_seconds_as_a_model_retry_is_and_true_still_works_with_a_warning(run):
    import time as clock
    import warnings as warned

    calls = []

    @tool(effects="reads")
    def fetch(url: str) -> str:
        """Fetch a page."""
        calls.append(clock.monotonic())
        if len(calls) < 3:
            raise ConnectionError("reset")
        return "page"

    lm = ScriptedLM(reply=lambda r: "got it" if r.messages[-1]["role"] == "tool" else tool_call("fetch", {"url": "x"}))
    waits = Plugin("waits", tool_error=lambda f: Change(retry=0.05))

    @ai(client=lm, tools=[fetch], plugins=[waits])
    def reader(question: str) -> str:
        """Read it."""

    value, record, _ = run(reader, "read")
    assert value == "got it" and len(calls) == 3
    assert calls[1] - calls[0] >= 0.05 and calls[2] - calls[1] >= 0.05  # waited before each run again
    assert [c["change"] for c in record.changes] == [{"retry": 0.05, "error": "ConnectionError"}] * 2

    calls.clear()
    old = Plugin("old", tool_error=lambda f: Change(retry=True))

    @ai(client=lm, tools=[fetch], plugins=[old])
    def reader_old(question: str) -> str:
        """Read it."""

    with warned.catch_warnings(record=True) as caught:
        warned.simplefilter("always")
        value, record, _ = run(reader_old, "read")
    assert value == "got it" and len(calls) == 3
    said = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert said and "Change(retry=True) in tool_error is Change(retry=0) now" in said[0]


def test_the_old_retry_spelling_is_shown_where_it_is_written_without_any_warning_filter(tmp_path):
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "old_plugin.py"
    script.write_text(textwrap.dedent("""
        from functai import Change, Plugin, ai, tool
        from functai.testing import ScriptedLM, tool_call

        runs = []

        @tool(effects="reads")
        def fetch(url: str) -> str:
            \"\"\"Fetch.\"\"\"
            runs.append(1)
            if len(runs) == 1:
                raise ConnectionError("reset")
            return "page"

        old = Plugin("old", tool_error=lambda f: Change(retry=True))

        @ai(client=ScriptedLM([tool_call("fetch", {"url": "x"}), "done"]), tools=[fetch], plugins=[old])
        def reader(q: str) -> str:
            \"\"\"Read.\"\"\"

        print(reader("q"), len(runs))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in __import__("os").environ.items() if k != "PYTHONWARNINGS"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done 2"
    assert f"{script}:15: DeprecationWarning: plugin 'old': Change(retry=True) in tool_error is Change(retry=0)" \
        in done.stderr
