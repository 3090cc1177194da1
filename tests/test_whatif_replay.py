"""What-if replay: a recorded call's first request rebuilt from its record (its inputs, what its
conversation showed it, its recorded changes), with a plugin's changes left out or another
plugin's handlers run; the first place it differs, and the answer to it."""

from __future__ import annotations

import io
import json
import os
import shutil

import attrs
import pytest

import functai
from functai import Change, FunctAIError, Plugin, ai, tool
from functai._calls.reading import read_calls
from functai._cli import main
from functai._evaluation.replay import NotReplayable
from functai._evaluation.whatif import request_data
from functai._stores.opening import forget
from functai.testing import ScriptedLM, tool_call


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@tool
def other(query: str) -> str:
    """Another tool."""
    return "other"


@ai(tools=[lookup, other])
def tutor(question: str) -> str:
    """Tutor the student."""


@ai
def helper(text: str) -> str:
    """Help with one step."""


@tool
def ask_helper(text: str) -> str:
    """Ask the helper."""
    return helper(text)


@ai(tools=[ask_helper])
def coach(question: str) -> str:
    """Coach the student."""


def request_json(request):
    """A request as canonical JSON: two requests are the same when this is."""
    return json.dumps(request_data(request), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, out, err)
    return status, out.getvalue(), err.getvalue()


def same_request(rebuilt, sent):
    """Field by field, and as canonical JSON."""
    for field in ("model", "messages", "tools", "settings", "output_schema"):
        assert getattr(rebuilt, field) == getattr(sent, field), field
    assert request_json(rebuilt) == request_json(sent)
    assert rebuilt == sent


#: For each thing a before_call change sets: the change, the part that differs without it, and diff lines.
KINDS = {
    "instruction": (Change(instruction="Teach carefully."), "instruction and sections",
                    ["-Teach carefully.", "+Tutor the student."]),
    "sections": (Change(sections=["Be formal."]), "instruction and sections", ["-Be formal."]),
    "lm": (Change(lm="big-model"), "model", ["-big-model", "+scripted"]),
    "settings": (Change(settings={"temperature": 0.1}), "settings", ["-temperature: 0.1", "+temperature: 0.7"]),
    "tools": (Change(tools=["lookup"]), "tools", ['+  "name": "other",']),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_before_call_change_is_rebuilt_exactly_and_left_out_shows_the_first_difference(tmp_path, kind):
    change, part, lines = KINDS[kind]
    lm = ScriptedLM(["ok", "ok"])
    shaper = Plugin("shaper", before_call=lambda call: change)
    others = Plugin("others", before_call=lambda call: Change(sections=["Show your steps."]))
    log = str(tmp_path / "calls")
    functai.configure(client=lm, log_calls=log, temperature=0.7, plugins=[others, shaper])
    _, record = tutor.run("What is 1/2?")

    result = functai.replay(record.id)  # read back from the call log: JSON, as another process would
    same_request(result.recorded, lm.requests[0])
    assert result.same and result.diff == "" and result.rebuilt is result.recorded

    result = functai.replay(record.id, without=["shaper"])
    assert result.differs[0] == part
    assert result.diff.startswith(f"--- recorded: {part}\n+++ rebuilt: {part}\n@@ ")
    for line in lines:
        assert line in result.diff.splitlines()
    assert [c["plugin"] for c in result.left_out] == ["shaper"]
    # What the replay says the request would have been is what a call without the plugin sends.
    functai.configure(plugins=[others])
    tutor.run("What is 1/2?")
    same_request(result.rebuilt, lm.requests[1])


def test_a_turn_shown_a_summary_and_its_latest_turns_is_rebuilt_from_its_store_or_the_call_log_alone(
        durable_store, durable_log):
    lm = ScriptedLM(reply=lambda request: f"A{len(lm.requests)}")
    summary = functai.compaction(keep=2, every=2, summarize=lambda earlier, rows: f"{len(rows)} turns so far.")
    functai.configure(client=lm, log_calls=durable_log)
    chat = tutor.conversation("c1", store=durable_store, plugins=[summary])
    for i in range(8):
        chat(f"q{i}")
    records = [r for r in read_calls(durable_log) if r.function == "tutor"]
    assert len(records) == len(lm.requests) == 8
    summarized = records[-1].sections[0].splitlines()
    assert summarized == ["Earlier in this conversation (4 turns, summarized):", "2 turns so far."]
    assert records[-1].conversation["shown"] == {"last": 3}  # the turns after the summary, not all 7

    functai.configure(log_calls=None)  # the record in hand and no call log: the turns come from the store
    for record, sent in zip(records, lm.requests):
        same_request(functai.replay(record).recorded, sent)
    if not durable_store.startswith("postgresql:"):  # with the store gone, the call log alone
        if os.path.isdir(durable_store):
            shutil.rmtree(durable_store)
        else:
            os.remove(durable_store[len("sqlite:///"):])
            forget(durable_store)  # the store this process keeps open
        with pytest.raises(NotReplayable):
            functai.replay(records[-1])
    for record, sent in zip(records, lm.requests):
        same_request(functai.replay(record.id, log=durable_log).recorded, sent)

    status, out, err = run(["replay", records[-1].id, "--log", durable_log, "--without", "compaction"])
    assert (status, err) == (0, "")
    assert out.splitlines()[1:5] == [
        f"left out: compaction 0.1.0 context: {json.dumps(records[-1].changes[0]['change'], sort_keys=True)}",
        "first difference: instruction and sections",
        "--- recorded: instruction and sections",
        "+++ rebuilt: instruction and sections"]
    assert [f"-{line}" for line in summarized] == [line for line in out.splitlines() if line.startswith("-E")
                                                   or line.startswith("-2 turns")]
    assert "note: 'compaction' chose the earlier turns shown; they are shown as recorded" in out


def test_a_call_made_inside_a_turn_is_rebuilt_as_it_was_sent(tmp_path):
    lm = ScriptedLM([tool_call("ask_helper", {"text": "halve it"}), "Half.", "Done."])
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"),
                      plugins=[Plugin("tone", before_call=lambda call: Change(sections=["Be kind."]))])
    coach.conversation("c2", store=str(tmp_path / "store"))("What is 1/2?")
    inner = next(r for r in read_calls(tmp_path / "calls") if r.function == "helper")
    assert inner.conversation == {"id": "c2", "turn": inner.conversation["turn"]}  # inside the turn, not its own
    result = functai.replay(inner.id)
    same_request(result.recorded, lm.requests[1])
    assert result.report().splitlines()[0] == (
        f"call {inner.id}: coach/helper, inside turn {inner.conversation['turn']} of conversation 'c2'")


def test_a_plugin_given_with_runs_its_before_call_and_request_handlers_on_the_real_events(tmp_path):
    lm = ScriptedLM(reply=lambda request: "A")
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"))
    chat = tutor.conversation("c3", store=str(tmp_path / "store"))
    chat("q0")
    chat("q1")
    record = list(read_calls(tmp_path / "calls"))[-1]
    seen = []

    def strict(call):
        seen.append((call.function, call.conversation, call.turn, dict(call.inputs), call.sections))
        return Change(sections=["Be strict."])

    def tag(event):
        return attrs.evolve(event.request, messages=[*event.request.messages[:-1],
                                                     {"role": "user", "content": "tagged"}])

    result = functai.replay(record, with_=[Plugin("strict", before_call=strict), Plugin("tag", request=tag)])
    assert seen == [("tutor", "c3", record.conversation["turn"], {"question": "q1"}, ())]
    assert result.differs == ("instruction and sections", "messages")
    assert "+Be strict." in result.diff.splitlines()
    assert result.rebuilt.messages[-1]["content"] == "tagged"
    assert [(c["plugin"], c["hook"]) for c in result.changes] == [("strict", "before_call"), ("tag", "request")]
    same_request(result.recorded, lm.requests[1])


def test_a_plugin_named_in_with_is_the_one_the_function_runs_here_and_replaces_its_recorded_changes(tmp_path):
    lm = ScriptedLM(["ok"])
    mode = {"section": "Be brief."}
    modes = Plugin("modes", before_call=lambda call: Change(sections=[mode["section"]]))
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"), plugins=[modes])
    _, record = tutor.run("q")
    mode["section"] = "Be thorough."  # the plugin as it is now
    result = functai.replay(record.id, with_=["modes"])
    assert result.diff.splitlines()[-2:] == ["-Be brief.", "+Be thorough."]
    assert [c["change"] for c in result.left_out] == [{"sections": ["Be brief."]}]


def test_a_replaced_request_cannot_be_rebuilt(tmp_path):
    lm = ScriptedLM(["ok"])
    rewrite = Plugin("rewrite", request=lambda event: attrs.evolve(event.request, messages=event.request.messages[:1]
                                                                   + ({"role": "user", "content": "x"},)))
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"), plugins=[rewrite])
    _, record = tutor.run("q")
    assert record.replayable is False
    with pytest.raises(NotReplayable) as info:
        functai.replay(record.id)
    assert info.value.code == "not-replayable"
    assert "plugin 'rewrite' replaced its request" in info.value.message
    status, out, err = run(["replay", record.id, "--log", str(tmp_path / "calls")])
    assert (status, out) == (2, "")
    assert err.startswith("functai: error [not-replayable]: call ")


def test_ask_sends_the_rebuilt_request_and_shows_both_answers(tmp_path):
    lm = ScriptedLM(["Formally: one half.", "One half."])
    log = str(tmp_path / "calls")
    functai.configure(client=lm, log_calls=log,
                      plugins=[Plugin("tone", before_call=lambda call: Change(sections=["Be formal."]))])
    _, record = tutor.run("What is 1/2?")
    status, out, err = run(["replay", record.id[:8], "--log", log, "--without", "tone", "--ask"])
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        f"call {record.id}: tutor",
        'left out: tone 0.0.0 before_call: {"sections": ["Be formal."]}',
        "first difference: instruction and sections",
        "--- recorded: instruction and sections",
        "+++ rebuilt: instruction and sections",
        "@@ -1,3 +1 @@",
        " Tutor the student.",
        "-",
        "-Be formal.",
        "also different: messages",
        "settings sent: {}",
        "recorded answer: Formally: one half.",
        "new answer:      One half.",
    ]
    assert len(lm.requests) == 2
    same_request(lm.requests[1], functai.replay(record, without=["tone"]).rebuilt)


def test_ask_with_another_model_and_the_json_output(tmp_path):
    lm = ScriptedLM(["7", "8"])

    @ai
    def count(text: str) -> int:
        """How many words the text has."""

    functai.configure(client=lm, log_calls=str(tmp_path / "calls"))
    _, record = count.run("a b c d e f g")
    result = functai.replay(record, lm="bigger", ask=True, fn=count)
    assert result.differs == ("model",) and result.diff.splitlines()[-2:] == ["-scripted", "+bigger"]
    assert (result.answer.text, result.value) == ("8", 8) and lm.requests[1].model == "bigger"

    status, out, err = run(["replay", record.id, "--log", str(tmp_path / "calls"), "--json", "--function",
                            f"{__name__}:tutor"])  # a function that is not the one recorded: a note says so
    data = json.loads(out)
    assert (status, data["same"], data["answer"]) == (0, True, None)
    assert data["recorded"]["messages"][-1] == {"role": "user", "content": "text: a b c d e f g"}
    assert any("changed since the call" in note for note in data["notes"])


def test_a_plugin_that_changed_nothing_and_a_function_that_cannot_be_imported(tmp_path):
    lm = ScriptedLM(["ok"])
    log = str(tmp_path / "calls")
    functai.configure(client=lm, log_calls=log)
    _, record = tutor.run("q")
    result = functai.replay(record, without=["ghost"])
    assert result.same and result.notes == (
        "'ghost' made no recorded change to this call's request: leaving it out changes nothing",)

    elsewhere = attrs.evolve(record, module="gone_module", id="f" * 16)
    with pytest.raises(FunctAIError) as info:
        functai.replay(elsewhere)
    assert info.value.code == "replay-function" and "pass fn=" in info.value.message
    from functai._calls.records import append

    append(log, elsewhere)
    append(log, attrs.evolve(record, module="__main__", id="e" * 16))
    status, out, err = run(["replay", "fff", "--log", log])
    assert (status, out) == (2, "")
    assert err.splitlines() == [
        "functai: importing gone_module (the module call ffffffffffffffff names) for its function tutor; "
        "--function MODULE:FUNCTION names another",
        "functai: error [not-found]: no module named 'gone_module'",
        "  hint: gone_module:tutor is the call's function: run this where it is importable, or name it with "
        "--function MODULE:FUNCTION"]
    status, out, err = run(["replay", "eee", "--log", log])
    assert status == 2 and err.startswith("functai: error [script-function]: call eeeeeeeeeeeeeeee was made by a "
                                          "script run as a program")
    status, out, err = run(["replay", "eee", "--log", log, "--with", "nowhere"])
    assert status == 2 and err.startswith("functai: error [script-function]")
    status, out, err = run(["replay", "fff", "--log", log, "--function", f"{__name__}:tutor", "--with", "nowhere"])
    assert status == 2 and err.startswith("functai: error [plugin-load]: no installed plugin named 'nowhere'")
    status, out, err = run(["replay", "fff", "--log", log, "--function", f"{__name__}:tutor"])
    assert status == 0 and out.splitlines()[-1] == "no difference: the rebuilt request is the recorded one"


def test_the_model_and_settings_a_turn_ran_with_come_from_its_record(tmp_path):
    """The conversation's own settings are not this process's: the record says what they were."""
    lm = ScriptedLM(["ok", "ok"])
    cap = Plugin("cap", before_call=lambda call: Change(settings={"max_tokens": 50, "temperature": 0.9}))
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"), temperature=0.5)
    tutor.conversation("c4", store=str(tmp_path / "store"), plugins=[cap], lm="conv-model", temperature=0.3,
                       seed=7)("q")
    [record] = read_calls(tmp_path / "calls")
    result = functai.replay(record.id)
    same_request(result.recorded, lm.requests[0])
    assert (result.recorded.model, dict(result.recorded.settings)) == (
        "conv-model", {"temperature": 0.9, "seed": 7, "max_tokens": 50})

    result = functai.replay(record.id, without=["cap"])
    assert result.differs == ("settings",)
    assert result.diff.splitlines()[3:] == ["-max_tokens: 50", " seed: 7", "-temperature: 0.9", "+temperature: 0.5"]
    assert result.notes == ("the settings a plugin left out changed are not recorded as they were before it: the "
                            "ones configured here are used (max_tokens unset, temperature=0.5)",)


def test_the_first_request_is_the_one_rebuilt_even_when_tool_steps_changed_the_settings_after_it(tmp_path):
    lm = ScriptedLM([tool_call("lookup", {"query": "halves"}), "One half."])
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"), tool_choice="required")
    _, record = tutor.run("What is 1/2?")
    [logged] = read_calls(tmp_path / "calls")
    assert logged.settings == {"tool_choice": "required", "tool_choice_after_tools": "auto"}
    assert lm.requests[1].settings["tool_choice"] == "auto"
    same_request(functai.replay(logged).recorded, lm.requests[0])


def test_a_recorded_change_that_no_longer_fits_the_function_refuses(tmp_path):
    lm = ScriptedLM(["ok"])
    functai.configure(client=lm, plugins=[Plugin("narrow", before_call=lambda call: Change(tools=["lookup"]))])
    _, record = tutor.run("q")
    with pytest.raises(NotReplayable) as info:
        functai.replay(record, fn=helper)
    assert info.value.message == (f"call {record.id}: the change 'narrow' recorded no longer applies to helper as it "
                                  "is now: plugin 'narrow' 0.0.0 in before_call (field 'tools'): 'lookup' is not one "
                                  "of helper's tools (none)")


def test_a_plugin_file_given_with_and_a_plugin_that_answers_instead_of_the_model(tmp_path):
    lm = ScriptedLM(["ok"])
    log = str(tmp_path / "calls")
    functai.configure(client=lm, log_calls=log)
    _, record = tutor.run("q")
    (tmp_path / "canned.py").write_text(
        "from functai import Change, Plugin, Reply\n"
        "plugin = Plugin('canned', version='2.0.0', before_call=lambda call: Change(instruction='Be canned.'),\n"
        "                request=lambda event: Reply(text='from the plugin'))\n")
    status, out, err = run(["replay", record.id, "--log", log, "--with", str(tmp_path / "canned.py"), "--ask"])
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[1:3] == ['ran: canned 2.0.0 before_call: {"instruction": "Be canned."}',
                          'ran: canned 2.0.0 request: {"answer": {"finish_reason": null, "text": "from the plugin", '
                          '"tool_calls": [], "usage": {}}}']
    assert lines[-2:] == ["recorded answer: ok", "new answer:      from the plugin (answered by plugin 'canned')"]
    assert len(lm.requests) == 1  # the plugin answered: no model was asked

    result = functai.replay(record, with_=[str(tmp_path / "canned.py")])
    assert result.answer is None
    assert result.notes == ("plugin 'canned' would answer the rebuilt request instead of the model",)


def test_a_call_made_through_the_async_driver_is_rebuilt_the_same(tmp_path):
    import asyncio

    lm = ScriptedLM(["ok"])

    async def careful(call):
        return Change(sections=["Check twice."], settings={"seed": 3})

    functai.configure(client=lm, log_calls=str(tmp_path / "calls"), plugins=[Plugin("careful", before_call=careful)])
    _, record = asyncio.run(tutor.arun("q"))
    result = functai.replay(record.id)
    same_request(result.recorded, lm.requests[0])
    assert functai.replay(record.id, without=["careful"]).differs == ("instruction and sections", "messages",
                                                                     "settings")


def test_a_template_layout_and_a_baked_model_are_laid_out_as_the_call_laid_them_out(tmp_path):
    lm = ScriptedLM(["ok", "ok"])

    @ai(layout=functai.Template(system="{instruction}\nWrite for {level}.", user="Q: {question}"))
    def explain(question: str, level: str) -> str:
        """Explain it."""

    @ai(lm=functai.baked("student-1"))
    def student(question: str) -> str:
        """Answer."""

    functai.configure(client=lm, log_calls=str(tmp_path / "calls"),
                      plugins=[Plugin("tone", before_call=lambda call: Change(settings={"seed": 1}))])
    _, first = explain.run("Why?", level="children")
    _, second = student.run("Why?")
    for record, sent in zip((first, second), lm.requests):
        same_request(functai.replay(record.id, fn=explain if record is first else student).recorded, sent)
    assert [m["role"] for m in lm.requests[1].messages] == ["user"]  # the baked student reads only its message


def test_a_turn_whose_inputs_a_turn_start_handler_changed_and_whose_shown_turns_lost_a_field(tmp_path):
    lm = ScriptedLM(reply=lambda request: f"A{len(lm.requests)}")
    loud = Plugin("loud", turn_start=lambda turn: Change(inputs={"question": turn.inputs["question"].upper()}))
    quiet = Plugin("quiet", context=lambda context: Change(without={context.turns[0].id: ["question"]})
                   if context.turns else None)
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"))
    chat = tutor.conversation("c5", store=str(tmp_path / "store"), plugins=[loud, quiet])
    for i in range(3):
        chat(f"q{i}")
    records = list(read_calls(tmp_path / "calls"))
    assert records[-1].inputs == {"question": "Q2"} and records[-1].conversation["without"]
    for record, sent in zip(records, lm.requests):
        same_request(functai.replay(record.id).recorded, sent)
    assert functai.replay(records[-1].id, without=["loud"]).notes == (
        "'loud' changed the turn's inputs; the record keeps them only as changed",)


def test_ask_shows_the_settings_it_would_send_and_wants_yes_when_they_are_not_the_functions(tmp_path):
    from functai._calls.records import append

    lm = ScriptedLM(["One half.", "Again one half."])
    log = str(tmp_path / "calls")
    functai.configure(client=lm, log_calls=log)
    _, record = tutor.run("What is 1/2?")
    greedy = attrs.evolve(record, id="a" * 16, settings={"n": 64, "max_tokens": 100000})
    append(log, greedy)
    status, out, err = run(["replay", "aaaa", "--log", log, "--ask"])
    assert (status, out) == (2, "")
    assert err.startswith("functai: error [replay-settings]: the rebuilt request would be sent to the model "
                          "'scripted' with the settings "'{"max_tokens": 100000, "n": 64} (from the record), where ')
    assert "hint: add --yes to send it as shown" in err
    assert len(lm.requests) == 1  # nothing was sent
    status, out, err = run(["replay", "aaaa", "--log", log, "--ask", "--yes"])
    assert (status, err) == (0, "")
    assert 'settings sent: {"max_tokens": 100000, "n": 64}' in out.splitlines()
    assert dict(lm.requests[1].settings) == {"n": 64, "max_tokens": 100000}


def test_ask_on_a_call_the_scripted_offline_model_answered_never_sends_its_name_to_a_server(tmp_path, monkeypatch):
    from loopback import LoopbackServer, Scripted, completion

    lm = ScriptedLM(["One half."])
    log = str(tmp_path / "calls")
    functai.configure(client=lm, log_calls=log)
    _, record = tutor.run("What is 1/2?")
    assert record.model == "scripted"
    with LoopbackServer() as server:
        server.script(Scripted(body=completion("from the server")))
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
        functai.configure(client=None, log_calls=log)  # as a new process: no scripted model configured
        status, out, err = run(["replay", record.id, "--log", log, "--ask"])
        assert (status, out) == (2, "")
        assert err.startswith("functai: error [replay-offline-model]: call ")
        assert "--lm MODEL" in err
        assert server.requests == []
        status, out, err = run(["replay", record.id, "--log", log, "--ask", "--lm", "openai/gpt-4.1-mini"])
        assert status == 0, err
        assert [r.body["model"] for r in server.requests] == ["gpt-4.1-mini"]


def test_ask_wants_yes_before_sending_to_another_model_than_the_functions(tmp_path, monkeypatch):
    from functai._calls.records import append

    lm = ScriptedLM(["One half."])
    log = str(tmp_path / "calls")
    functai.configure(client=lm, log_calls=log)
    _, record = tutor.run("What is 1/2?")
    append(log, attrs.evolve(record, id="d" * 16, model="openai/o1-pro"))  # a costly model, written in by hand
    functai.configure(client=None, lm="openai/gpt-4.1-mini", log_calls=log)
    status, out, err = run(["replay", "dddd", "--log", log, "--ask"])
    assert (status, out) == (2, "")
    assert "would be sent to the model 'o1-pro'" in err and "has 'gpt-4.1-mini'" in err


def test_settings_a_request_handler_set_on_the_first_request_are_rebuilt_and_can_be_left_out():
    """A budget's ``max_tokens`` is set in ``request``: the request rebuilt from the record is the one
    sent, and leaving the plugin out shows the difference (not "changed nothing")."""
    def cap(request):
        return Change(settings={"max_tokens": 77 if len(request.request.messages) < 3 else 5})

    lm = ScriptedLM([tool_call("lookup", {"word": "a"}), "done"])

    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return "found"

    @ai(client=lm, tools=[lookup], plugins=[Plugin("cap", request=cap)])
    def define(word: str) -> str:
        """Define it."""

    _, record = define.run("a")
    assert [dict(request.settings) for request in lm.requests] == [{"max_tokens": 77}, {"max_tokens": 5}]
    older = attrs.evolve(record, changes=[{k: v for k, v in entry.items() if k != "request"}
                                          for entry in record.changes])  # as written before entries named their place
    for recorded in (record, older):
        replayed = functai.replay(recorded, fn=define)
        assert dict(replayed.recorded.settings) == {"max_tokens": 77}  # the first request's, not a later one's
        without = functai.replay(recorded, fn=define, without=["cap"])
        assert dict(without.rebuilt.settings) == {} and "settings" in without.differs
        assert not any("changes nothing" in note for note in without.notes)


def test_settings_a_request_handler_set_only_on_a_later_request_are_not_put_on_the_first():
    """An unreadable answer is asked again with nothing recorded between the two requests: the
    entry names its request, so the first is rebuilt as it was sent."""
    def cap(request):
        return Change(settings={"max_tokens": 5}) if len(request.request.messages) > 2 else None

    lm = ScriptedLM(["not a number", "3"])

    @ai(client=lm, plugins=[Plugin("cap", request=cap)])
    def count(word: str) -> int:
        """Count it."""

    _, record = count.run("a")
    assert [dict(request.settings) for request in lm.requests] == [{}, {"max_tokens": 5}]
    assert [entry["request"] for entry in record.changes if entry["hook"] == "request"] == [2]
    replayed = functai.replay(record, fn=count)
    assert dict(replayed.recorded.settings) == {}
    without = functai.replay(record, fn=count, without=["cap"])
    assert without.differs == ()
