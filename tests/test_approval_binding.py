"""An approval holds for the exact call it approved (name, input as it runs, the plugins before it);
an edit on approving is a change by the approver, seen by every handler and the rule."""

import json
import os
import subprocess
import sys
import textwrap

import functai_approval
import pytest

import functai
from functai import Change, FunctAIError, Plugin, Waiting
from functai._calls.approvals import digest
from functai.testing import ScriptedLM, tool_call

BANK = textwrap.dedent('''
    import json, os
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM

    if os.environ.get("BANK_SCRIPT"):  # the CLI's process answers from this script
        functai.configure(client=ScriptedLM(json.loads(os.environ["BANK_SCRIPT"])))

    @tool(effects="changes")
    def refund(order: str, amount: int) -> str:
        """Refund an amount on an order."""
        with open(os.environ["BANK_LEDGER"], "a") as ledger:
            ledger.write(f"{order} {amount}\\n")
        return f"refunded {amount} on {order}"

    @tool(effects="changes")
    def email(to: str, text: str) -> str:
        """Send an email."""
        return "sent"

    @ai(tools=[refund, email])
    def support(request: str) -> str:
        """Support the customer."""
''')


@pytest.fixture
def bank(tmp_path, monkeypatch, install):
    (tmp_path / "bank.py").write_text(BANK)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("BANK_LEDGER", str(tmp_path / "ledger.txt"))
    sys.modules.pop("bank", None)
    install(functai_approval.plugin)
    import bank

    yield bank
    sys.modules.pop("bank", None)


def ledger(tmp_path):
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def _setup(tmp_path, *calls):
    """A model asking for these tool calls, then answering "Done."; every call logged."""
    functai.configure(client=ScriptedLM([*(tool_call(name, args) for name, args in calls), "Done."]),
                      log_calls=str(tmp_path / "calls"))


def _shaper(version, amount=None):
    """A plugin whose tool_call handler may cap the amount."""
    def cap(tool):
        if amount is not None and tool.input.get("amount", 0) > amount:
            return Change(inputs={"amount": amount})
        return None

    return Plugin("limits", version=version, tool_call=cap)


def test_the_question_carries_the_digest_of_the_call_as_it_will_run(bank, tmp_path):
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 500}))
    chat = bank.support.conversation("c", store=str(tmp_path / "s"), approve="changes", plugins=[_shaper("1.0", 100)])
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    (asked,) = info.value.approvals
    assert asked["input"] == {"order": "A1", "amount": 100}  # what will run, never the model's 500
    assert asked["plugins"] == [["limits", "1.0"]]
    assert asked["digest"] == digest("refund", {"order": "A1", "amount": 100}, [["limits", "1.0"]])
    assert asked["key"].endswith("." + asked["digest"][:12])


def test_a_plugin_upgraded_between_ask_and_resume_makes_the_approval_stale(bank, tmp_path):
    store = str(tmp_path / "s")
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 50}))
    chat = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("1.0")])
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    info.value.turn.approve(by="ana")

    upgraded = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("1.1")])
    with pytest.raises(Waiting) as stale:
        upgraded.head.resume()
    assert stale.value.code == "approval-stale"
    assert "plugin 'limits' (1.0 → 1.1)" in stale.value.message
    assert ledger(tmp_path) == []  # nothing ran on an approval given for another call
    turn = upgraded.head
    assert turn.state == "waiting" and turn.approvals[0]["plugins"] == [["limits", "1.1"]]
    with pytest.raises(FunctAIError) as early:
        turn.resume()
    assert early.value.code == "turn-waiting"  # the new question needs its own answer
    turn.approve(by="ana")
    assert turn.resume() == "Done." and ledger(tmp_path) == ["A1 50"]


def test_a_handler_changing_the_input_after_the_question_makes_it_stale(bank, tmp_path):
    store = str(tmp_path / "s")
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 500}))
    chat = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("1.0", 400)])
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    info.value.turn.approve()
    stricter = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("1.0", 300)])
    with pytest.raises(Waiting) as stale:
        stricter.head.resume()
    assert stale.value.code == "approval-stale" and "input 'amount' (400 → 300)" in stale.value.message
    assert ledger(tmp_path) == []


def test_a_denial_holds_whatever_changed(bank, tmp_path):
    store = str(tmp_path / "s")
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 50}))
    chat = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("1.0")])
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    info.value.turn.deny(reason="no receipt")
    upgraded = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("2.0")])
    assert upgraded.head.resume() == "Done." and ledger(tmp_path) == []


def test_an_edit_on_approve_runs_the_edited_call_and_is_recorded_as_the_approvers_change(bank, tmp_path):
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 80}))
    chat = bank.support.conversation("c", store=str(tmp_path / "s"), approve="changes")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    turn = info.value.turn
    (asked,) = turn.approvals
    turn.approve(asked["key"], inputs={"amount": 60}, by="ana")
    assert turn.answers[asked["key"]]["allow"] is True
    assert turn.resume() == "Done."
    assert ledger(tmp_path) == ["A1 60"]
    log = _last_record(tmp_path)
    edit = [c for c in log["changes"] if c.get("by") == "ana"]
    assert edit == [{"plugin": "approval", "version": functai_approval.__version__, "hook": "tool_call",
                     "by": "ana", "change": {"inputs": {"amount": 60}}}]
    assert log["tool_calls"][0]["input"] == {"order": "A1", "amount": 60}


def _last_record(tmp_path):
    """The last call record of the call log ``_setup`` sets."""
    return json.loads((tmp_path / "calls" / "calls.jsonl").read_text().splitlines()[-1])


def test_an_edit_over_a_plugins_threshold_asks_again(bank, tmp_path):
    def over_100(tool):
        if tool.name == "refund" and tool.input["amount"] > 100:
            tool.ask("over 100")

    limits = Plugin("limits", version="1.0", tool_call=over_100)
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 80}))
    chat = bank.support.conversation("c", store=str(tmp_path / "s"), approve="changes", plugins=[limits])
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    turn = info.value.turn
    assert [a["plugin"] for a in turn.approvals] == ["approval"]
    turn.approve(turn.approvals[0]["key"], inputs={"amount": 500}, by="ana")
    with pytest.raises(Waiting) as again:
        turn.resume()
    assert again.value.code == "turn-waiting"
    assert [(a["plugin"], a["question"], a["input"]["amount"]) for a in again.value.approvals] == [
        ("limits", "over 100", 500)]
    assert ledger(tmp_path) == []
    turn = again.value.turn
    turn.approve(by="lead")
    assert turn.resume() == "Done." and ledger(tmp_path) == ["A1 500"]


def test_an_edit_that_names_an_input_the_tool_does_not_take_is_refused(bank, tmp_path):
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 80}))
    chat = bank.support.conversation("c", store=str(tmp_path / "s"), approve="changes")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    turn = info.value.turn
    key = turn.approvals[0]["key"]
    with pytest.raises(FunctAIError) as cross:
        turn.approve(key, inputs={"to": "mallory@example.com"})  # an input of email, not of refund
    assert cross.value.code == "input-invalid" and "refund takes no input 'to'" in cross.value.message
    with pytest.raises(FunctAIError) as unnamed:
        turn.approve(inputs={"amount": 1})
    assert unnamed.value.code == "input-invalid"
    assert turn.answers == {}  # nothing was recorded
    turn.approve(key)
    assert turn.resume() == "Done." and ledger(tmp_path) == ["A1 80"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stream_approves_with_edited_inputs(bank, tmp_path, mode):
    import asyncio

    _setup(tmp_path, ("refund", {"order": "A1", "amount": 80}))

    def events():
        if mode == "sync":
            with bank.support.stream("refund A1") as stream:
                seen = []
                for event in stream:
                    seen.append(event)
                    if event.kind == "waiting":
                        stream.approve(inputs={"amount": 70}, by="ana")
                return seen, stream.record

        async def collect():
            seen = []
            async with bank.support.astream("refund A1") as stream:
                async for event in stream:
                    seen.append(event)
                    if event.kind == "waiting":
                        stream.approve(inputs={"amount": 70}, by="ana")
            return seen, stream.record

        return asyncio.run(collect())

    with functai.settings(approve="changes"):
        seen, record = events()
    assert [e.kind for e in seen].count("waiting") == 1  # the edited call was approved by the edit
    assert ledger(tmp_path) == ["A1 70"]
    assert [e.input for e in seen if e.kind == "tool_call"] == [{"order": "A1", "amount": 70}]
    [edited] = [c for c in record.changes if c["hook"] == "tool_call" and "inputs" in c["change"]]
    assert edited["by"] == "ana" and edited["change"] == {"inputs": {"amount": 70}}  # who changed it, kept


def test_the_cli_approves_with_an_edited_input(bank, tmp_path):
    store = str(tmp_path / "s")
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 80}))
    chat = bank.support.conversation("c", store=store, approve="changes")
    with pytest.raises(Waiting):
        chat("refund A1")
    env = {**os.environ, "BANK_LEDGER": str(tmp_path / "ledger.txt"), "BANK_SCRIPT": json.dumps(["Done."]),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()]), "FUNCTAI_LOAD_PLUGINS": "approval"}
    env.pop("FUNCTAI_DISABLE_PLUGINS", None)
    turn_id = chat.head.id  # the waiting turn's id names it as well as the conversation's does
    done = subprocess.run([sys.executable, "-m", "functai", "approve", store, turn_id, "--input", "amount=65",
                           "--by", "ana"], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert '"amount": 65' in done.stdout and "edited by ana" in done.stdout
    assert ledger(tmp_path) == ["A1 65"]
    bad = subprocess.run([sys.executable, "-m", "functai", "approve", store, "c", "--input", "amount"],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert bad.returncode != 0


def test_an_async_resume_checks_the_digest_too(bank, tmp_path):
    import asyncio

    store = str(tmp_path / "s")
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 50}))
    chat = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("1.0")])
    with pytest.raises(Waiting) as info:
        asyncio.run(chat.acall("refund A1"))
    info.value.turn.approve()
    upgraded = bank.support.conversation("c", store=store, approve="changes", plugins=[_shaper("1.1")])
    with pytest.raises(Waiting) as stale:
        asyncio.run(upgraded.head.aresume())
    assert stale.value.code == "approval-stale" and ledger(tmp_path) == []


def test_a_handler_running_after_the_asker_changes_the_call_the_person_is_asked_about(bank, tmp_path, install):
    # Installed plugins run in one layer; "times10" declares last=True like approval and runs after it.
    times10 = Plugin("times10", version="1.0", last=True,
                     tool_call=lambda tool: Change(inputs={"amount": tool.input["amount"] * 10}))
    install(functai_approval.plugin, times10)
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 50}))
    chat = bank.support.conversation("c", store=str(tmp_path / "s"), approve="changes")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    (asked,) = info.value.approvals
    assert asked["input"] == {"order": "A1", "amount": 500}  # the call as it will run
    assert asked["plugins"] == [["times10", "1.0"]]  # every other handler, before or after the asker
    info.value.turn.approve()
    assert info.value.turn.resume() == "Done." and ledger(tmp_path) == ["A1 500"]


def test_a_second_answer_with_another_edit_is_refused_and_the_first_holds(bank, tmp_path):
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 500}))
    chat = bank.support.conversation("c", store=str(tmp_path / "s"), approve="changes")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    turn = info.value.turn
    key = turn.approvals[0]["key"]
    turn.approve(key, by="ana")
    with pytest.raises(FunctAIError) as late:
        turn.approve(key, inputs={"amount": 5}, by="lead")
    assert late.value.code == "approval-answered" and "by ana" in late.value.message
    turn.approve(key, by="ana")  # the same answer again changes nothing
    assert turn.resume() == "Done." and ledger(tmp_path) == ["A1 500"]


def test_a_stream_refuses_a_bad_edit_where_it_is_given_and_keeps_waiting(bank, tmp_path):
    _setup(tmp_path, ("refund", {"order": "A1", "amount": 80}))
    with functai.settings(approve="changes"), bank.support.stream("refund A1") as stream:
        for event in stream:
            if event.kind == "waiting":
                with pytest.raises(FunctAIError) as bad:
                    stream.approve(inputs={"amout": 5})
                assert bad.value.code == "input-invalid" and "'amout'" in bad.value.message
                stream.approve(inputs={"amount": 5})
    assert stream.value == "Done." and ledger(tmp_path) == ["A1 5"]


def test_without_content_the_log_keeps_no_approved_input_question_or_edit(bank, tmp_path):
    _setup(tmp_path, ("refund", {"order": "SECRET-ORDER", "amount": 80}))
    chat = bank.support.conversation("c", store=str(tmp_path / "s"), approve="changes", log_content=False)
    with pytest.raises(Waiting) as info:
        chat("refund it")
    turn = info.value.turn
    turn.approve(turn.approvals[0]["key"], inputs={"amount": 31337}, by="ana")
    assert turn.resume() == "Done."
    log = (tmp_path / "calls" / "calls.jsonl").read_text()
    assert "SECRET-ORDER" not in log and "31337" not in log
    waited = json.loads(log.splitlines()[-1])["conversation"]["waited"]
    assert set(waited[0]["approvals"][0]["input"]) == {"chars"}
    assert set(next(iter(waited[0]["answers"].values()))["inputs"]) == {"chars"}
