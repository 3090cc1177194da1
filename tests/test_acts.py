"""One form per act, the same on every hook and every driver: answer with a Reply, refuse by
raising a FunctAIError, ask with one ``decide`` rule; each older spelling still works and warns,
naming the new form."""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
import warnings
from typing import Any

import attrs
import functai_approval
import pytest

import functai
from functai import Change, FunctAIError, Plugin, PluginError, Reply, ai, tool
from functai._hooks.change import HOOK_FIELDS, OLD_FIELDS
from functai.testing import ScriptedLM, log_events, tool_call

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(params=["sync", "async", "stream"])
def run(request):
    """``run(fn, *args)`` → (value, record): the call made by one driver."""

    def call(fn, *args):
        if request.param == "sync":
            return fn.run(*args)
        if request.param == "async":
            return asyncio.run(fn.arun(*args))
        with fn.stream(*args) as stream:
            for _ in stream:
                pass
        return stream.value, stream.record

    return call


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    refunded.append(order)
    return f"refunded {order}"


refunded: list[str] = []


@pytest.fixture(autouse=True)
def _clean():
    refunded.clear()


def _fn(lm, plugins, **settings):
    @ai(client=lm, plugins=plugins, tools=[refund], **settings)
    def support(question: str) -> str:
        """Answer the customer."""
        raise NotImplementedError

    return support


def _deprecations(caught):
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


# --- answer: a Reply, from request, model_error and reply ------------------------------------------

def test_a_reply_answers_from_each_answering_hook_with_its_note(run):
    def canned(event):
        return Reply(text="from the rules", finish_reason="stop", note="rule 7")

    def down(request):
        raise functai.ModelError("the server is down", code="model-unavailable")

    cases = {
        "request": (ScriptedLM(["from the model"]), "from the rules"),
        "model_error": (ScriptedLM(reply=down), "from the rules"),
        "reply": (ScriptedLM(["from the model"]), "from the rules"),
    }
    for hook, (lm, expected) in cases.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value, record = run(_fn(lm, [Plugin("rules", **{hook: canned})]), "q")
        assert value == expected, hook
        [entry] = [c for c in record.changes if c["plugin"] == "rules"]
        assert entry["hook"] == hook and entry["note"] == "rule 7", entry
        assert _deprecations(caught) == [], hook


def test_the_old_answer_form_still_answers_and_warns_naming_the_new_one():
    def old(event):
        return Change(reply=Reply(text="old", finish_reason="stop"), note="old form")

    for hook in ("request", "reply"):
        with pytest.warns(DeprecationWarning, match="return the functai.Reply itself") as caught:
            value, record = _fn(ScriptedLM(["model"]), [Plugin("old", **{hook: old})]).run("q")
        assert value == "old" and record.changes[-1]["note"] == "old form"
        assert caught[0].filename == __file__  # attributed to the handler that wrote it


def test_a_reply_note_that_is_too_long_is_refused_naming_the_note():
    long = Plugin("long", request=lambda event: Reply(text="x", finish_reason="stop", note="n" * 201))
    with pytest.raises(PluginError) as info:
        _fn(ScriptedLM(["model"]), [long])("q")
    assert (info.value.code, info.value.field, info.value.hook) == ("plugin-change", "note", "request")
    assert "at most 200 characters" in info.value.message


# --- refuse: raise a FunctAIError ------------------------------------------------------------------

def _no_refunds(event):
    if event.name == "refund":
        raise FunctAIError("refunds are paused", code="refunds-paused")


def test_a_tool_call_refusal_keeps_the_tool_from_running_and_tells_the_model(run):
    lm = ScriptedLM([tool_call("refund", {"order": "A1"}), "sorry"])
    value, record = run(_fn(lm, [Plugin("guard", tool_call=_no_refunds)]), "q")
    assert value == "sorry" and refunded == []
    shown = [m["content"] for m in lm.requests[1].messages if m["role"] == "tool"]
    assert shown == ["This call was blocked (guard): refunds are paused"]
    [entry] = [c for c in record.changes if c["plugin"] == "guard"]
    assert entry["change"] == {"block": "refunds are paused", "code": "refunds-paused"}
    assert record.tool_calls[0]["blocked"] == "guard"


def test_the_old_block_still_blocks_and_warns():
    def old(event):
        return Change(block="no")

    lm = ScriptedLM([tool_call("refund", {"order": "A1"}), "sorry"])
    with pytest.warns(DeprecationWarning, match=re.escape("raise functai.FunctAIError(reason, code=...)")):
        value, record = _fn(lm, [Plugin("old", tool_call=old)]).run("q")
    assert refunded == [] and record.tool_calls[0]["block_reason"] == "no"


def test_a_tool_call_handler_that_fails_still_blocks_as_a_failed_check():
    def broken(event):
        raise RuntimeError("the rules service is down")

    lm = ScriptedLM([tool_call("refund", {"order": "A1"}), "sorry"])
    with log_events() as logged:
        _fn(lm, [Plugin("broken", tool_call=broken)]).run("q")
    assert logged.named("hook failed")
    assert refunded == []


def test_a_chunk_refusal_stops_the_reply_on_every_driver(run):
    def no_secrets(chunk):
        if "secret" in chunk.text:
            raise FunctAIError("a secret was about to be shown", code="secret")

    fn = _fn(ScriptedLM(["the secret is 42"], chunk=100), [Plugin("guard", chunk=no_secrets)])
    with pytest.raises(PluginError) as info:
        run(fn, "q")
    error = info.value
    assert (error.code, error.plugin, error.hook) == ("plugin-refused", "guard", "chunk")
    assert error.details == {"reason": "a secret was about to be shown", "refused": "secret"}
    assert error.record.changes[-1]["change"]["code"] == "secret"


def test_the_old_stop_still_stops_and_warns():
    fn = _fn(ScriptedLM(["the secret is 42"]), [Plugin("old", chunk=lambda chunk: Change(stop="no"))])
    with pytest.warns(DeprecationWarning, match="Change\\(stop=reason\\)"), pytest.raises(PluginError) as info:
        fn("q")
    assert info.value.code == "plugin-refused" and "refused" not in info.value.details


def test_a_refusal_elsewhere_ends_the_call_with_its_own_error(run):
    def closed(call):
        raise FunctAIError("the shop is closed", code="shop-closed")

    lm = ScriptedLM(["never"])
    with pytest.raises(FunctAIError) as info:
        run(_fn(lm, [Plugin("hours", before_call=closed)]), "q")
    assert info.value.code == "shop-closed" and lm.requests == []


def test_no_act_is_a_change_field_as_well():
    for field, (hooks, _) in OLD_FIELDS.items():
        assert all(field not in HOOK_FIELDS[hook] for hook in hooks), field
    with pytest.raises(PluginError) as info:
        _fn(ScriptedLM(["x"]), [Plugin("bad", before_call=lambda call: Change(stop="no"))])("q")
    assert info.value.field == "stop"


# --- ask: one decide rule for requests and tool calls ----------------------------------------------

ANSWERS = [(True, True), (2.5, True), (False, False), (None, False), ("not today", False)]


def _recording(given):
    """A decide function that answers ``given``, and the questions it was given."""
    seen = []

    def decide(question):
        seen.append(question)
        return given

    return decide, seen


@pytest.mark.parametrize("given, allowed", ANSWERS)
def test_one_decide_rule_for_a_tool_call(given, allowed):
    decide, seen = _recording(given)
    asker = Plugin("asker", tool_call=lambda event: event.ask("may it run?", decide=decide))
    _fn(ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), [asker]).run("q")
    assert (refunded == ["A1"]) is allowed
    [question] = seen
    assert isinstance(question, functai.events.Question) and isinstance(question.about, functai.events.ToolCall)
    assert (question.text, question.plugin, question.about.name) == ("may it run?", "asker", "refund")


@pytest.mark.parametrize("given, allowed", ANSWERS)
def test_one_decide_rule_for_a_request(given, allowed):
    decide, seen = _recording(given)
    def asker(event):
        answer = event.ask("allow 5 more?", extend=5, decide=decide)
        if not answer.allow:
            raise FunctAIError("not allowed", code="not-allowed")

    lm = ScriptedLM(["fine"])
    if allowed:
        _fn(lm, [Plugin("asker", request=asker)]).run("q")
    else:
        with pytest.raises(FunctAIError, match="not allowed"):
            _fn(lm, [Plugin("asker", request=asker)]).run("q")
    assert len(lm.requests) == int(allowed)
    [question] = seen
    assert isinstance(question.about, functai.events.Request) and (question.text, question.extend) == ("allow 5 more?", 5)


def test_old_decide_functions_still_read_what_they_read_and_warn():
    tool_asked = Plugin("t", tool_call=lambda event: event.ask(decide=lambda q: q.input["order"] == "A1"))
    with pytest.warns(DeprecationWarning, match="question.about.input"):
        _fn(ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), [tool_asked]).run("q")
    assert refunded == ["A1"]

    def request_asked(event):
        event.ask("more?", extend=3, decide=lambda q: q["extend"] == 3 and q["kind"] == "request")

    with pytest.warns(DeprecationWarning, match="read its attributes"):
        _fn(ScriptedLM(["fine"]), [Plugin("r", request=request_asked)]).run("q")

    with pytest.warns(DeprecationWarning, match=re.escape("tool.ask(question)")):
        reason = Plugin("why", tool_call=lambda event: event.ask(reason="why?", decide=lambda q: q.text == "why?"))
        _fn(ScriptedLM([tool_call("refund", {"order": "B2"}), "done"]), [reason]).run("q")
    assert refunded == ["A1", "B2"]


def test_the_approve_setting_is_still_given_the_tool_call():
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fn(ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), [functai_approval.plugin],
            approve=lambda tool: seen.append(tool.name) or True).run("q")
    assert seen == ["refund"] and refunded == ["A1"] and _deprecations(caught) == []


# --- the page that lists it all ----------------------------------------------------------------------

def test_the_whole_model_is_at_most_twenty_concepts():
    page = (DOCS / "plugins.md").read_text()
    section = page.split("## The whole model", 1)[1].split("\n## ", 1)[0]
    numbered = [int(n) for n in re.findall(r"^(\d+)\. ", section, re.M)]
    numbered += [int(n) for n in re.findall(r"^\| (\d+) \|", section, re.M)]
    assert numbered == list(range(1, len(numbered) + 1)) and len(numbered) <= 20, numbered
    for old in ("Change(reply=...)", "Change(block=...)", "Change(stop=...)", "Change(retry=True)"):
        assert old in section  # each old spelling is named, with the form that replaced it


def test_one_answer_path_at_a_stream_for_tool_calls_and_requests_alike():
    asker = Plugin("asker", tool_call=lambda event: event.ask("may it run?"))
    fn = _fn(ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), [asker])
    asked = []
    with fn.stream("q") as stream:
        for event in stream:
            if event.kind == "waiting":
                asked += event.approvals
                with pytest.raises(FunctAIError, match="waits for a tool call") as info:
                    stream.approve(extend=3)  # an extension answers a request's question, not a tool call's
                assert info.value.code == "input-invalid"
                stream.approve()
    assert refunded == ["A1"] and [a["question"] for a in asked] == ["may it run?"]


def test_a_code_that_ends_the_outermost_call_is_no_refusal():
    """A budget passed inside a guard (its own nested call, say) ends the call, as it would anywhere:
    it is not taken for the guard refusing the tool."""
    def counts(event):
        raise FunctAIError("the budget is spent", code="budget-exceeded")

    lm = ScriptedLM([tool_call("refund", {"order": "A1"}), "sorry"])
    with pytest.raises(FunctAIError) as info:
        _fn(lm, [Plugin("guard", tool_call=counts)]).run("q")
    assert info.value.code == "budget-exceeded" and refunded == [] and len(lm.requests) == 1


def test_a_before_call_handler_cannot_change_the_inputs_in_place():
    """Read-only all the way down: a nested list or dict of the inputs cannot be edited unrecorded
    (it would reach the model, the record and the caller's own object)."""
    def append(call):
        call.inputs["items"].append("EVIL")

    def assign(call):
        call.inputs["config"]["k"] = "EVIL"

    for handler in (append, assign):
        @functai.ai(lm="test", plugins=[functai.Plugin("edits", before_call=handler)])
        def tidy(items: list[str], config: dict[str, str]) -> str:
            """Tidy."""

        mine, config = ["a"], {"k": "v"}
        with pytest.raises(functai.FunctAIError) as info:
            tidy(mine, config)
        assert info.value.code == "plugin-failed" and mine == ["a"] and config == {"k": "v"}


@tool(effects="changes")
def tag(items: list[str]) -> str:
    """Tag the items."""
    tagged.append(list(items))
    return "tagged " + ",".join(items)


tagged: list[list[str]] = []


@pytest.mark.parametrize("hook", ["tool_call", "tool_result", "tool_error"])
def test_a_tool_handler_cannot_change_the_tool_input_in_place(hook, run):
    """What the tool runs with and what the record keeps change only by a recorded Change."""
    tagged.clear()
    tried = []

    def edits(tool):
        try:
            tool.input["items"].append("EVIL")
        except AttributeError as error:
            tried.append(type(error).__name__)

    @tool(effects="changes")
    def fails(items: list[str]) -> str:
        """Fail."""
        raise RuntimeError("no")

    lm = ScriptedLM([tool_call("fails" if hook == "tool_error" else "tag", {"items": ["a"]}), "done"])

    @ai(client=lm, plugins=[Plugin("edits", **{hook: edits})], tools=[tag, fails])
    def label(question: str) -> str:
        """Label."""
        raise NotImplementedError

    _, record = run(label, "q")
    assert tried == ["AttributeError"]
    assert record.tool_calls[0]["input"] == {"items": ["a"]}
    assert tagged == ([] if hook == "tool_error" else [["a"]])


@pytest.mark.parametrize("hook", ["turn_start", "turn_end"])
def test_a_turn_handler_cannot_change_the_turns_inputs_or_outputs_in_place(hook, tmp_path):
    tried = []

    def edits(turn):
        for field, name in (("inputs", "items"), ("outputs", "output"))[:2 if hook == "turn_end" else 1]:
            try:
                getattr(turn, field)[name].append("EVIL")
            except AttributeError as error:
                tried.append(type(error).__name__)

    @ai(client=ScriptedLM(['["x"]']), plugins=[Plugin("edits", **{hook: edits})])
    def listing(items: list[str]) -> list[str]:
        """List."""
        raise NotImplementedError

    chat = listing.conversation("c", store=str(tmp_path))
    mine = ["a"]
    chat(mine)
    assert tried == ["AttributeError"] * (2 if hook == "turn_end" else 1)
    assert mine == ["a"]
    again = listing.conversation("c", store=str(tmp_path)).turns[0]
    assert again.inputs == {"items": ["a"]} and again.outputs == {"output": ["x"]}


def test_a_context_handler_cannot_change_an_earlier_turn_in_place(tmp_path):
    """The turns a context handler is shown are the history every later turn is shown."""
    tried = []

    def edits(context):
        for turn in context.turns:
            for field, name in (("inputs", "items"), ("outputs", "output")):
                try:
                    getattr(turn, field)[name].append("EVIL")
                except AttributeError as error:
                    tried.append(type(error).__name__)

    lm = ScriptedLM(['["x"]', '["y"]', '["z"]'])

    @ai(client=lm, plugins=[Plugin("edits", context=edits)])
    def listing(items: list[str]) -> list[str]:
        """List."""
        raise NotImplementedError

    chat = listing.conversation("c", store=str(tmp_path))
    chat(["a"])
    chat(["b"])
    chat(["c"])
    assert tried == ["AttributeError"] * 6  # turn 2 is shown turn 1, turn 3 turns 1 and 2
    assert "EVIL" not in str(lm.requests[-1].messages)


@pytest.mark.parametrize("edit", ["input", "usage"])
def test_a_reply_handler_that_changes_the_reply_in_place_is_refused(edit, run):
    """A Reply is frozen, but its tool calls' inputs and its token counts are dicts: an edit in place
    would run the tool with inputs the record says the model asked for."""
    def sneaky(event):
        if edit == "input":
            event.reply.tool_calls[0].input["order"] = "EVIL"
        else:
            event.reply.usage["output_tokens"] = 10**9

    lm = ScriptedLM([Reply(tool_calls=[tool_call("refund", {"order": "A1"}).tool_calls[0]],
                           usage={"output_tokens": 3}), "done"])
    with pytest.raises(FunctAIError) as info:
        run(_fn(lm, [Plugin("sneaky", reply=sneaky)]), "q")
    assert info.value.code == "plugin-change" and "changed the reply or the request in place" in str(info.value)
    assert refunded == []


@attrs.define
class Picked:
    a: int


def _retyped(schema):
    schema["properties"]["a"]["type"] = "string"


def _reordered(schema):
    items = list(schema.items())
    schema.clear()
    schema.update(reversed(items))  # the same keys and values, in another order


def _zero_for_false(schema):
    schema["additionalProperties"] = 0  # equal to False in Python, not on the wire


@pytest.mark.parametrize("edit", [_retyped, _reordered, _zero_for_false])
@pytest.mark.parametrize("hook", ["request", "reply"])
def test_a_handler_that_changes_the_output_schema_in_place_is_refused_and_the_schema_kept(hook, edit):
    """The output schema is the function's own dict, sent by every later call (of every function of
    that output type): key order and JSON types count, as they do on the wire."""
    edits = [True]

    def sneaky(event):
        if edits.pop() if edits else False:
            edit(event.request.output_schema)

    lm = ScriptedLM(['{"a": 1}', '{"a": 2}'])

    @ai(client=lm, plugins=[Plugin("sneaky", **{hook: sneaky})])
    def pick(question: str) -> Picked:
        """Pick."""
        raise NotImplementedError

    before = json.dumps(pick.output_schema)
    with pytest.raises(FunctAIError) as info:
        pick.run("q")
    assert info.value.code == "plugin-change" and "in place" in str(info.value)
    assert json.dumps(pick.output_schema) == before
    assert pick.run("q")[0] == Picked(2 if hook == "reply" else 1)  # the next call sends the schema as it was
    assert json.dumps(lm.requests[-1].output_schema) == before


def test_a_request_retried_in_a_waiting_turn_is_not_paid_again_on_resume(tmp_path, install):
    """A failed attempt takes no place among the turn's replies: the reply after it is read back on
    resume (it was rejected as out of place, and the model asked and paid again)."""
    install(functai_approval.plugin)
    fails = iter([True])

    def model(request):
        if request.messages[-1]["role"] == "tool":
            return "done"
        if next(fails, False):
            return functai.ModelError("busy", code="model-http", status=429)
        return tool_call("refund", {"order": "A1"})

    lm = ScriptedLM(reply=model)
    again = Plugin("again", model_error=lambda failure: Change(retry=0) if failure.attempt < 2 else None)
    chat = _fn(lm, [again]).conversation("c", store=str(tmp_path), approve="changes")
    with pytest.raises(functai.Waiting) as waiting:
        chat("refund")
    assert len(lm.requests) == 2
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "done"
    assert len(lm.requests) == 3 and refunded == ["A1"]  # only the request after the tool ran


def test_a_change_built_from_the_read_only_inputs_gives_lists_and_dicts_back(tmp_path):
    """``Change(inputs={**tool.input, ...})`` is how one input is changed: the views handlers read
    come back as the lists and dicts they stand for, on tool_call and turn_start alike."""
    got = []

    @tool
    def search(q: str, tags: list[str], filters: dict[str, Any]) -> str:
        """Search."""
        got.append((q, tags, filters))
        return "found"

    def loud(call):
        return Change(inputs={**call.input, "q": call.input["q"].upper(),
                              "filters": {**call.input["filters"], "limit": 10}})

    def polite(turn):
        return Change(inputs={**turn.inputs, "question": turn.inputs["question"] + " please"})

    lm = ScriptedLM([tool_call("search", {"q": "a", "tags": ["x"], "filters": {"near": ["y"]}}), "done"])

    @ai(client=lm, tools=[search], plugins=[Plugin("loud", tool_call=loud), Plugin("polite", turn_start=polite)])
    def find(question: str, seen: list[str]) -> str:
        """Find it."""
        raise NotImplementedError

    chat = find.conversation("c", store=str(tmp_path))
    assert chat("it", ["z"]) == "done"
    assert got == [("A", ["x"], {"near": ["y"], "limit": 10})]
    assert [type(value) for value in got[0]] == [str, list, dict] and type(got[0][2]["near"]) is list
    assert chat.turns[0].inputs == {"question": "it please", "seen": ["z"]}


def test_neither_a_stream_consumer_nor_the_tool_changes_the_recorded_input():
    """The record keeps the input the tool was called with: a stream's ``tool_call`` event is the
    consumer's own copy, and a tool that changes its argument changes its own."""
    ran = []
    heard = []

    @tool
    def tag(query: str, tags: list[str]) -> str:
        """Tag."""
        ran.append((query, list(tags)))
        tags.append("BY-TOOL")
        return "tagged"

    lm = ScriptedLM([tool_call("tag", {"query": "paris", "tags": ["a"]}), "done"])

    @ai(client=lm, tools=[tag], plugins=[Plugin("hear", tool_result=lambda result: heard.append(result.input))])
    def label(question: str) -> str:
        """Label."""
        raise NotImplementedError

    with label.stream("q") as stream:
        for event in stream:
            if event.kind == "tool_call":
                event.input["query"] = "EDITED"
                event.input["tags"].append("EDITED")
    assert ran == [("paris", ["a"])]
    assert stream.record.tool_calls[0]["input"] == {"query": "paris", "tags": ["a"]}
    assert [dict(seen) for seen in heard] == [{"query": "paris", "tags": ("a",)}]


def test_a_reply_handler_that_masks_the_reasoning_is_what_the_record_keeps(run, tmp_path):
    """The reasoning is kept as the reply handlers left it, as the text is: masked, the model's own
    words reach neither the record nor the call log."""
    secret = "4111 1111 1111 1111"

    def mask(event):
        reply = event.reply
        return attrs.evolve(reply, text=reply.text.replace(secret, "[card]"),
                            reasoning=reply.reasoning.replace(secret, "[card]"))

    lm = ScriptedLM(reply=lambda request: Reply(text="paid", reasoning=f"the card is {secret}", finish_reason="stop"))
    value, record = run(_fn(lm, [Plugin("mask", reply=mask)], log_calls=str(tmp_path)), "q")
    assert record.reasoning == "the card is [card]"
    assert record.changes[-1]["change"]["reply"]["reasoning"] == "the card is [card]"
    assert secret not in (tmp_path / "calls.jsonl").read_text()


def test_a_plugins_answer_keeps_its_reasoning_where_its_redactions_point(run):
    """A guard redacts a plugin's answer's reasoning; the answer's entry keeps the reasoning it redacted."""
    answer = Plugin("canned", request=lambda event: Reply(text="ok", reasoning="because 4111", finish_reason="stop"))
    guard = Plugin("guard", chunk=lambda event: Change(text=event.text.replace("4111", "[card]"))
                   if "4111" in event.text else None)
    value, record = run(_fn(ScriptedLM([]), [answer, guard]), "q")
    [answered] = [c for c in record.changes if c["hook"] == "request"]
    assert answered["change"]["answer"]["reasoning"] == "because [card]"
