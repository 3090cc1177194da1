"""One damaged record never breaks a conversation or the call log (issue 11, point 5).

Each damaged line is skipped with one warning naming the file, the line and
why; opening never hangs and never raises an uncoded error; the command line
shows what was skipped.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import functai
from functai import FunctAIError, ai
from functai._cli import main
from functai.testing import ScriptedLM, log_events
from store_fixtures import raw_sql


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


@ai
def other(question: str) -> str:
    """Something else."""


def _lm() -> ScriptedLM:
    lm = ScriptedLM(reply=lambda request: f"A{len(lm.requests)}")
    functai.configure(client=lm)
    return lm


def _three_turns(tmp_path):
    _lm()
    store = str(tmp_path / "store")
    chat = tutor.conversation("c", store=store)
    for question in ("q1", "q2", "q3"):
        chat(question)
    path = tmp_path / "store" / "c.jsonl"
    return store, path, [t.id for t in chat.turns]


def _insert(path, line: str, before: int) -> int:
    """Put ``line`` in the file before line ``before`` (1-based); its line number."""
    lines = path.read_text().splitlines()
    lines.insert(before - 1, line)
    path.write_text("\n".join(lines) + "\n")
    return before


def _record(**fields) -> str:
    return json.dumps({"functai_conversation": 1, **fields})


def _open(store):
    """Open the conversation in a fresh process's view, catching what it warns."""
    from functai._stores import FolderStore

    with log_events() as caught:
        chat = tutor.conversation("c", store=FolderStore(store))
        turns = [t.id for t in chat.turns]
    return chat, turns, caught.messages


DAMAGE = {
    "a turn without its id": (lambda ids: _record(kind="turn", parent=ids[2], inputs={"question": "x"}),
                              "it has no 'turn'"),
    "a turn whose inputs are a list": (lambda ids: _record(kind="turn", turn="t-list", parent=ids[2], inputs=[1, 2]),
                                       "'inputs' is not an object"),
    "an end whose outputs are a string": (lambda ids: _record(kind="end", turn=ids[2], state="done", outputs="ok"),
                                          "'outputs' is not an object"),
    "a tool without its site": (lambda ids: _record(kind="tool", turn=ids[2], state="done", entry={"output": "x"}),
                                "it has no 'site'"),
    "an answer without its key": (lambda ids: _record(kind="answer", turn=ids[2], allow=True),
                                  "it has no 'key'"),
    "garbage approvals": (lambda ids: _record(kind="wait", turn=ids[2], approvals="yes please"),
                          "'approvals' is not a list of approvals"),
    "approvals that are not objects": (lambda ids: _record(kind="wait", turn=ids[2], approvals=[1, 2]),
                                       "'approvals' is not a list of approvals"),
    "a record of an unknown turn": (lambda ids: _record(kind="end", turn="nobody", state="done", outputs={}),
                                    "turn 'nobody' is unknown"),
    "a second turn with a used id": (lambda ids: _record(kind="turn", turn=ids[0], parent=ids[2], inputs={}),
                                     f"is already used"),
    "a record with no kind": (lambda ids: _record(turn=ids[0]), "it has no 'kind'"),
    "a reply whose token counts are not numbers": (
        lambda ids: _record(kind="reply", turn=ids[2], reply={"text": "x", "usage": {"input_tokens": [1]}}),
        "'reply' is not a model reply"),
    "a turn shown more turns than can be counted": (
        lambda ids: _record(kind="turn", turn="t-big", parent=ids[2], inputs={"question": "x"}, shown={"last": 10**30}),
        "'shown' is not a list of turn ids"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_record_is_skipped_with_one_warning_naming_file_line_and_reason(tmp_path, case):
    store, path, ids = _three_turns(tmp_path)
    make, reason = DAMAGE[case]
    line = _insert(path, make(ids), before=len(path.read_text().splitlines()) + 1)  # after everything
    chat, turns, warned = _open(store)
    assert turns == ids  # the good turns are all there, on their branch
    mine = [w for w in warned if "record skipped" in w]
    assert len(mine) == 1, warned
    assert f"{path}:{line}" in mine[0] and reason in mine[0]
    assert chat("q4") and chat.turns[-2].id == ids[-1]  # the conversation goes on from where it was


def test_a_damaged_record_in_the_middle_is_named_by_its_own_line(tmp_path):
    store, path, ids = _three_turns(tmp_path)
    line = _insert(path, _record(kind="end", turn=ids[1], state="done", outputs="oops"), before=3)
    _insert(path, "this is not json", before=2)  # the store's own kind of skip, one line earlier
    chat, turns, warned = _open(store)
    assert turns == ids
    assert any(f"{path}:2" in w and "not JSON" in w for w in warned), warned
    assert any(f"{path}:{line + 1}" in w and "'outputs' is not an object" in w for w in warned), warned


def test_a_turn_whose_parent_line_was_damaged_starts_a_branch(tmp_path):
    store, path, ids = _three_turns(tmp_path)
    lines = path.read_text().splitlines()
    second = next(i for i, text in enumerate(lines) if f'"turn":"{ids[1]}"' in text and '"kind":"turn"' in text)
    lines[second] = lines[second][:40]  # the second turn's record, cut: not JSON any more
    path.write_text("\n".join(lines) + "\n")
    chat, turns, warned = _open(store)
    assert turns == [ids[2]]  # its branch now starts at the third turn, which is kept
    assert any(f"{path}:{second + 1}" in w for w in warned), warned
    assert any("is kept as the first turn of a branch" in w and ids[1] in w for w in warned), warned
    assert chat("q4") == "A4"


def test_a_parent_cycle_never_hangs(tmp_path):
    """Two turns naming each other as parent: opening used to loop forever."""
    folder = tmp_path / "store"
    folder.mkdir()
    header = _record(kind="conversation", id="c", function=f"{__name__}:tutor", version="x")
    records = [
        header,
        _record(kind="turn", turn="a", parent="b", inputs={"question": "1"}),
        _record(kind="end", turn="a", state="done", outputs={"output": "A"}),
        _record(kind="turn", turn="b", parent="a", inputs={"question": "2"}),
        _record(kind="end", turn="b", state="done", outputs={"output": "B"}),
        _record(kind="turn", turn="c", parent="c", inputs={"question": "3"}),
        _record(kind="end", turn="c", state="done", outputs={"output": "C"}),
    ]
    (folder / "c.jsonl").write_text("\n".join(records) + "\n")
    script = textwrap.dedent(f"""
        import sys, warnings
        sys.path.insert(0, {str(tmp_path.parent)!r})
        warnings.simplefilter("ignore")
        import functai
        from functai.testing import ScriptedLM
        from functai import ai

        @ai
        def tutor(question: str) -> str:
            "Tutor the student."

        tutor.module = {__name__!r}
        functai.configure(client=ScriptedLM(reply=lambda r: "ok"))
        chat = tutor.conversation("c", store={str(folder)!r})
        print([(t.id, t.parent) for t in chat.all_turns()])
        chat("next")
        print([t.id for t in chat.turns][:-1])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    # a's parent b comes later: a starts a branch; b continues a; c (its own parent) starts one too
    assert first == "[('a', None), ('b', 'a'), ('c', None)]"
    assert second == "['c']"


def test_a_byte_order_mark_does_not_hide_the_header(tmp_path):
    store, path, ids = _three_turns(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    chat, turns, warned = _open(store)
    assert turns == ids and warned == []
    with pytest.raises(FunctAIError) as info:  # the header is read: it belongs to tutor
        other.conversation("c", store=store)
    assert info.value.code == "conversation-function"


def test_the_command_line_shows_what_was_skipped(tmp_path):
    store, path, ids = _three_turns(tmp_path)
    _insert(path, "garbage", before=2)
    _insert(path, _record(kind="wait", turn=ids[2], approvals="yes"), before=len(path.read_text().splitlines()) + 1)
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["conversation", store, "c"], out=out) == 0
    text = out.getvalue()
    assert "3 turns" in text and all(turn in text for turn in ids)
    assert "skipped 2 lines" in text
    assert re.search(rf"{re.escape(str(path))}:2 .*not JSON", text), text
    assert re.search(rf"{re.escape(str(path))}:\d+ .*'approvals' is not a list of approvals", text), text


def test_the_call_log_reports_lines_it_skips(tmp_path, capsys):
    log = tmp_path / "calls"
    _lm()
    with functai.settings(log_calls=str(log)):
        tutor("q1")
        tutor("q2")
    path = log / "calls.jsonl"
    lines = path.read_text().splitlines()
    lines.insert(1, "{not json")
    lines.insert(2, json.dumps({"id": "x", "function": "f"}))  # not a whole call record
    lines.insert(3, json.dumps({**json.loads(lines[0]), "error": "boom"}))  # an error that is not an object
    path.write_text("\n".join(lines) + "\n")

    with log_events() as caught:
        records = list(functai.read_calls(log))
    assert [r.inputs["question"] for r in records] == ["q1", "q2"]
    messages = caught.messages
    assert len(messages) == 3
    assert f"at={path}:2 reason=not JSON" in messages[0]
    assert f"at={path}:3 " in messages[1] and "not a call record" in messages[1]
    assert f"at={path}:4 " in messages[2] and "'error'" in messages[2]

    skipped: list = []
    assert len(list(functai.read_calls(log, skipped=skipped))) == 2
    assert [where for where, _ in skipped] == [f"{path}:2", f"{path}:3", f"{path}:4"]

    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the command reports them itself, not as warnings
        assert main(["calls", str(log)], out=out, err=err) == 0
    assert len(out.getvalue().splitlines()) == 3  # a header and the two calls
    assert f"skipped {path}:2: not JSON" in err.getvalue()
    assert err.getvalue().count("skipped") == 3
    assert capsys.readouterr().err == ""  # the stream main() was given, not the process's stderr


@pytest.mark.parametrize("damage, reason", [
    ({"tool_calls": [{"input": {"q": 1}, "output": "x"}]}, "'tool_calls' holds a call without its name"),
    ({"heard": None}, "'heard' is a JSON NoneType"),
    ({"heard": [1]}, "'heard' holds something other than objects"),
    ({"changes": [{"plugin": "p", "hook": "before_call", "change": {}, "µs": "fast"}]}, "a time ('µs') that is"),
    ({"heard": [{"plugin": "p", "hook": "call_end", "µs": True}]}, "a time ('µs') that is"),
    ({"changes": [{"plugin": " ", "hook": "before_call", "change": {}}]}, "without its plugin"),
    ({"conversation": {"id": "c", "turn": "t", "parent": None, "waited": "yes"}}, "'waited'"),
    ({"conversation": {"id": "c", "turn": "t", "parent": None, "waited": [{"approvals": ["x"], "answers": {}}]}},
     "'waited'"),
    ({"conversation": {"id": "c", "turn": "t", "parent": None, "waited": [{"approvals": [], "answers": []}]}},
     "'waited'"),
    ({"conversation": {"id": "c", "turn": "t", "parent": None, "waited": [{"approvals": [], "answers": {"k": 1}}]}},
     "'waited'"),
])
def test_a_logged_call_that_functai_show_could_not_show_is_skipped(tmp_path, damage, reason):
    log = tmp_path / "calls"
    _lm()
    with functai.settings(log_calls=str(log), record_timing=True):
        tutor("q1")
    path = log / "calls.jsonl"
    good = json.loads(path.read_text())
    path.write_text(path.read_text() + json.dumps({**good, "id": "d" * 16, **damage}) + "\n")
    skipped: list = []
    assert [r.id for r in functai.read_calls(log, skipped=skipped)] == [good["id"]]
    assert [where for where, _ in skipped] == [f"{path}:2"] and reason in skipped[0][1], skipped
    for show in (["show", "d" * 16, "--log", str(log)], ["show", "d" * 16, "--log", str(log), "--timing"]):
        out, err = io.StringIO(), io.StringIO()
        assert main(show, out=out, err=err) != 0
        assert "[not-found]" in err.getvalue() and f"functai: skipped {path}:2: " in err.getvalue(), err.getvalue()


def test_functai_show_says_a_damaged_line_once_as_calls_does(tmp_path):
    log = tmp_path / "calls"
    _lm()
    with functai.settings(log_calls=str(log)):
        tutor("q1")
    path = log / "calls.jsonl"
    path.write_text(path.read_text() + "{not json\n")
    call = next(functai.read_calls(log, skipped=[])).id
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said by the command, not as a warning
        assert main(["show", call[:6], "--log", str(log)], out=out, err=err) == 0
    assert err.getvalue() == f"functai: skipped {path}:2: not JSON\n" and call in out.getvalue()


def test_damaged_ratings_are_skipped_and_reported(tmp_path):
    log = tmp_path / "calls"
    _lm()
    with functai.settings(log_calls=str(log)):
        tutor("q1")
    call = next(functai.read_calls(log)).id
    functai.rate(call, good=True, log=str(log))
    path = log / "ratings.jsonl"
    with path.open("a") as ratings:
        ratings.write(json.dumps({"call": [call], "good": True}) + "\n")  # an id that is a list
        ratings.write(json.dumps({"call": call, "good": "yes"}) + "\n")
    with log_events() as caught:
        rated = list(functai.read_calls(log, rated=True))
    assert [r.rating["good"] for r in rated] == [True]
    assert [f"at={path}:{n} " in m for n, m in zip((2, 3), caught.messages)] == [True, True]


# -- every store reports a garbled record the same way ------------------------------------------------


def _garble_end(store: str) -> None:
    """Overwrite the conversation's `end` record with bytes that are not JSON, as a disk or a hand might."""
    if store.startswith(("sqlite:", "postgresql:")):
        raw_sql(store)("UPDATE functai_records SET data = '{\"kind\": \"end\", garbled' WHERE kind = 'end'")
        return
    from pathlib import Path

    path = Path(store) / "c.jsonl"
    path.write_text("".join('{"kind": "end", garbled\n' if '"kind":"end"' in line else line
                            for line in path.read_text().splitlines(keepends=True)))


def test_a_garbled_record_is_reported_by_every_store(durable_store):
    _lm()
    tutor.conversation("c", store=durable_store)("q1")
    _garble_end(durable_store)
    with log_events() as caught:
        turn = tutor.conversation("c", store=durable_store).turns[-1]
    assert turn.state != "done"  # its end is lost, in every store alike
    warned = [m for m in caught.messages if "skipped" in m]
    assert len(warned) == 1 and "reason=not JSON" in warned[0], warned
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["conversation", durable_store, "c"], out=out) == 0
    assert "skipped 1 line that could not be used" in out.getvalue() and "not JSON" in out.getvalue()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_garbled_sql_row_keeps_its_text_through_a_copy(kind, tmp_path, request):
    from store_fixtures import store_url

    from functai._stores import open_store
    from functai._stores.copy import copy_conversations

    store = store_url(kind, tmp_path, request)
    _lm()
    tutor.conversation("c", store=store)("q1")
    _garble_end(store)
    copy_conversations(store, str(tmp_path / "copy"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (kept,) = [r for r in open_store(str(tmp_path / "copy")).read("c") if "functai_unusable" in r]
    assert kept["functai_unusable"] == "not JSON" and kept["text"] == '{"kind": "end", garbled'


def test_a_garbled_call_log_row_is_reported_by_every_log(durable_log):
    _lm()
    with functai.settings(log_calls=durable_log):
        tutor("q1")
        tutor("q2")
    if durable_log.startswith(("sqlite:", "postgresql:")):
        raw_sql(durable_log)("UPDATE functai_calls SET line = '{garbled' WHERE seq = (SELECT MIN(seq) FROM functai_calls)")
    else:
        path = f"{durable_log}/calls.jsonl"
        lines = open(path).read().splitlines()
        open(path, "w").write("{garbled\n" + lines[1] + "\n")
    skipped: list = []
    assert [r.inputs["question"] for r in functai.read_calls(durable_log, skipped=skipped)] == ["q2"]
    assert len(skipped) == 1 and skipped[0][1] == "not JSON" and skipped[0][0].endswith(":1")
    with log_events() as logged:
        assert len(list(functai.read_calls(durable_log))) == 1
    assert logged.named("log line skipped.*reason=not JSON")


def _two_turns_edited(tmp_path, update: str) -> str:
    """A SQLite store of conversation ``c`` with two turns, then ``update`` run on its records by hand;
    the store's URL, forgotten by this process (opened again, it is read from the file)."""
    from functai._stores.opening import forget

    _lm()
    store = "sqlite:///" + str(tmp_path / "s.db")
    chat = tutor.conversation("c", store=store)
    chat("q1")
    chat("q2")
    raw_sql(store)(f"UPDATE functai_records SET {update}")
    forget(store)
    return store


@pytest.mark.parametrize("value", ["x'80ff'", "42", "'[' || printf('%.*c', 100000, '[') || ']'"])
def test_a_sql_row_that_is_not_readable_text_is_skipped_as_damage(tmp_path, value):
    """SQLite keeps whatever a hand-written UPDATE gives it: bytes that are not UTF-8, a number,
    JSON nested past the parser."""
    store = _two_turns_edited(tmp_path, f"data = {value} WHERE conversation = 'c' AND position = 1")
    with log_events() as caught:
        again = tutor.conversation("c", store=store)
        assert [turn.inputs["question"] for turn in again.turns] == ["q2"]  # q1's turn record is the damaged row
    assert any("skipped" in message for message in caught.messages), caught.messages


@functai.tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@pytest.mark.parametrize("edit, code", [
    (lambda record: record.update(inputs={"query": record["inputs"]["question"]}), "resume-inputs"),
    (lambda record: record.update(inputs=None), "resume-inputs"),
    (lambda record: record["ran_with"].update(plugins=None), "resume-settings"),
    (lambda record: record["ran_with"].update(plugins=[1]), "resume-settings"),
])
def test_a_waiting_turn_whose_record_was_edited_is_refused_on_resume_with_a_code(tmp_path, install, edit, code):
    import functai_approval

    install(functai_approval.plugin)

    @ai(client=ScriptedLM([functai.testing.tool_call("refund", {"order": "A1"}), "done"]), tools=[refund])
    def support(question: str) -> str:
        """Help."""

    store = str(tmp_path / "store")
    with pytest.raises(functai.Waiting):
        support.conversation("c", store=store, approve="changes")("Refund A1")
    path = tmp_path / "store" / "c.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    edit(next(record for record in records if record["kind"] == "turn"))
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    turn = support.conversation("c", store=store, approve="changes").turns[-1]
    turn.approve()
    with pytest.raises(FunctAIError) as info:
        turn.resume()
    assert info.value.code == code and "cannot be resumed" in str(info.value)
    assert "abandon it" in str(info.value)
    turn.abandon()  # the way out the message names
    assert support.conversation("c", store=store).turns[-1].state == "abandoned"


def test_an_approval_whose_digest_was_edited_is_damage_and_the_turn_can_be_answered_again(tmp_path, install):
    """No call matches an edited digest: kept, the approval went stale at every resume and a new
    approve() was a no-op (the first answer holds), so only abandoning was left."""
    import functai_approval

    install(functai_approval.plugin)
    ran = []

    @functai.tool(effects="changes")
    def pay(order: str) -> str:
        """Pay an order."""
        ran.append(order)
        return "paid"

    @ai(client=ScriptedLM([functai.testing.tool_call("pay", {"order": "A1"}), "done"]), tools=[pay])
    def support(question: str) -> str:
        """Help."""

    store = str(tmp_path / "store")
    with pytest.raises(functai.Waiting) as waiting:
        support.conversation("c", store=store, approve="changes")("Pay A1")
    waiting.value.turn.approve()
    path = tmp_path / "store" / "c.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    answer = next(record for record in records if record["kind"] == "answer")
    answer["digest"] = "0" * 64
    path.write_text("".join(json.dumps(record) + "\n" for record in records))

    with log_events() as caught:
        turn = support.conversation("c", store=store, approve="changes").turns[-1]
    assert any("its digest was changed" in message for message in caught.messages), caught.messages
    assert turn.state == "waiting" and ran == []
    turn.approve()
    assert turn.resume() == "done" and ran == ["A1"]


def test_token_counts_a_client_gave_as_fractions_are_sound_in_both_readers(tmp_path):
    """The fast reader and the field-by-field check agree: numbers are token counts, text is not."""
    from functai import Reply
    from functai._stores import FolderStore

    functai.configure(client=ScriptedLM([Reply(text="A1", finish_reason="stop", usage={"input_tokens": 12.5})]))
    store = str(tmp_path / "s")
    tutor.conversation("c", store=store)("q1")
    path = tmp_path / "s" / "c.jsonl"
    assert tutor.conversation("c", store=FolderStore(store))._history.damage == []
    path.write_text(path.read_text().replace('"input_tokens":12.5', '"input_tokens":"12"'))
    from functai._conversations.history import History

    whole = History()
    whole.apply_all(FolderStore(store).read("c"))  # the records as dicts, as `functai conversation` reads them
    for history in (tutor.conversation("c", store=FolderStore(store))._history, whole):
        assert [why for _, why in history.damage] == ["'reply' is not a model reply"]


NESTED_EDITS = {
    "shown a string": lambda r: r["conversation"].update(shown="abc"),
    "shown.last text": lambda r: r["conversation"].update(shown={"last": "x"}),
    "shown.drop a number": lambda r: r["conversation"].update(shown={"last": 1, "drop": 5}),
    "without a string": lambda r: r["conversation"].update(without="abc"),
    "no conversation id": lambda r: r["conversation"].pop("id"),
    "no turn": lambda r: r["conversation"].pop("turn"),
    "a turn that is a list": lambda r: r["conversation"].update(turn=["t"]),
    "a section that is a number": lambda r: r.update(sections=[5]),
    "a change that is text": lambda r: r.update(changes=[{"plugin": "p", "hook": "before_call", "change": "x"}]),
    "a change without its plugin": lambda r: r.update(changes=[{"hook": "before_call", "change": {}}]),
}


@pytest.mark.parametrize("edit", sorted(NESTED_EDITS))
def test_a_call_record_edited_deep_inside_is_damage_to_replay_and_evaluate_not_a_crash(tmp_path, edit):
    log = str(tmp_path / "calls")
    functai.configure(client=ScriptedLM(reply=lambda request: "A"), log_calls=log)
    chat = tutor.conversation("c", store=str(tmp_path / "store"))
    chat("q1")
    chat("q2")
    for record in functai.read_calls(log):
        functai.rate(record, good=True, log=log)
    path = tmp_path / "calls" / "calls.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    NESTED_EDITS[edit](records[-1])
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    try:
        functai.replay(records[-1]["id"], fn=tutor, log=log)
    except FunctAIError:
        pass
    functai.evaluate(tutor, log=log)  # the damaged call left out, not the run
    for argv in (["replay", records[-1]["id"], "--log", log, "--function", "test_damaged_records:tutor"],
                 ["evaluate", "test_damaged_records:tutor", "--log", log]):
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out=out, err=err) in (0, 1, 2)
        assert "[internal]" not in err.getvalue() and "[usage]" not in err.getvalue(), err.getvalue()


@pytest.mark.parametrize("position", ["2.5", "'x'", "1000000000000000"])
def test_a_sql_row_whose_position_was_edited_is_store_unreadable(tmp_path, position):
    from functai._stores.opening import forget

    store = _two_turns_edited(tmp_path, f"position = {position} WHERE conversation = 'c' AND position = 2")
    with pytest.raises(FunctAIError) as info:
        tutor.conversation("c", store=store)("q3")
    assert info.value.code == "store-unreadable" and "edited by hand" in str(info.value)
    forget(store)


SITE = textwrap.dedent("""
    import os, signal, sys, functai
    from functai.testing import ScriptedLM, tool_call

    @functai.tool(effects="changes")
    def refund(order: str) -> str:
        '''Refund an order.'''
        print("ran", order, flush=True)
        return f"order {order} refunded"

    def model(request):
        if request.messages[-1].get("role") == "tool":
            if sys.argv[2] == "start":
                os.kill(os.getpid(), signal.SIGKILL)  # dies after the tool ran, before the turn ends
            return "model saw: " + request.messages[-1]["content"]
        return tool_call("refund", {"order": sys.argv[3]})

    for _ in range(int(sys.argv[4])):
        tool_call("other")  # another process numbers its tool calls on from elsewhere

    @functai.ai(client=ScriptedLM(reply=model), tools=[refund])
    def support(request: str) -> str:
        '''Handle.'''

    chat = support.conversation("d1", store=sys.argv[1])
    if sys.argv[2] == "start":
        chat("refund my order")
    else:
        try:
            print(chat.all_turns()[-1].resume())
        except functai.FunctAIError as error:
            print(error.code)
""")


def test_a_resumed_turn_never_gives_a_recorded_tool_result_to_another_call(tmp_path):
    """Its reply lost, the resumed turn's model asks for another call at the place a recorded one
    ran: that one's result is not handed over as the new call's, nor is anything run."""
    (tmp_path / "site.py").write_text(SITE)
    store = str(tmp_path / "s")

    def run(*argv):
        root = str(pathlib.Path(__file__).resolve().parent.parent)  # this checkout's functai
        return subprocess.run([sys.executable, str(tmp_path / "site.py"), store, *argv], capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PYTHONPATH": root})

    assert run("start", "A1", "0").stdout == "ran A1\n"
    path = tmp_path / "s" / "d1.jsonl"
    lines = path.read_text().splitlines()
    reply = next(i for i, line in enumerate(lines) if '"kind":"reply"' in line)
    lines[reply] = "#" + lines[reply]  # the reply line damaged
    path.write_text("\n".join(lines) + "\n")
    done = run("resume", "B2", "5")
    assert done.stdout == "resume-mismatch\n", done.stdout + done.stderr


def test_an_approval_whose_shown_input_was_edited_is_not_put_to_anyone(tmp_path, install):
    """The question shows the input a person approves; its digest is what runs. Edited by hand to show
    another input (a refund of 8 shown for one of 8,000), approving it would run what nobody saw."""
    import functai_approval

    install(functai_approval.plugin)
    ran = []

    @functai.tool(effects="changes")
    def pay(amount: int) -> str:
        """Pay."""
        ran.append(amount)
        return "paid"

    @ai(client=ScriptedLM([functai.testing.tool_call("pay", {"amount": 8000}), "done"]), tools=[pay])
    def cashier(question: str) -> str:
        """Pay what is asked."""

    store = str(tmp_path / "store")
    with pytest.raises(functai.Waiting):
        cashier.conversation("c", store=store, approve="changes")("pay")
    path = tmp_path / "store" / "c.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    [wait] = [record for record in records if record["kind"] == "wait"]
    wait["approvals"][0]["input"] = {"amount": 8}
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    with log_events() as caught:
        view = cashier.conversation("c", store=store, approve="changes")
        turn = view.turns[-1]
    assert turn.state == "interrupted" and turn.approvals == []  # nothing to approve: the question is damage
    assert any("shows another call than the one asked" in message for message in caught.messages), caught.messages
    with pytest.raises(functai.Waiting) as again:  # resumed, the call is asked about as it is
        turn.resume()
    assert again.value.approvals[0]["input"] == {"amount": 8000} and ran == []
