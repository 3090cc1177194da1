"""The first recorded answer to an approval holds: a later contrary answer is refused
(``approval-answered``) and never runs a refused tool — in one process, across processes on
every durable store, and at a stream (the command line: test_cli_errors.py)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import functai_approval
import pytest

import functai
from functai import FunctAIError, Waiting
from functai._conversations import held
from functai._stores import open_store
from functai.testing import ScriptedLM, tool_call

#: The checkout these tests run from, on the subprocesses' path wherever pytest was started.
ROOT = pathlib.Path(__file__).resolve().parent.parent

SHOP = textwrap.dedent('''
    import os
    from functai import ai, tool

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        with open(os.environ["SHOP_LEDGER"], "a") as ledger:
            ledger.write(order + "\\n")
        return f"refunded {order}"

    @ai(tools=[refund])
    def support(request: str) -> str:
        """Support the customer."""
''')


@pytest.fixture
def shop(tmp_path, monkeypatch, install):
    (tmp_path / "answers_shop.py").write_text(SHOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    sys.modules.pop("answers_shop", None)
    install(functai_approval.plugin)
    import answers_shop

    yield answers_shop
    sys.modules.pop("answers_shop", None)


def refunds(tmp_path):
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def python(code, tmp_path):
    """Run ``code`` in a new OS process that shares only the store (and the ledger file) with this one."""
    env = {**os.environ, "SHOP_LEDGER": str(tmp_path / "ledger.txt"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "FUNCTAI_LOAD_PLUGINS": "approval"}
    env.pop("FUNCTAI_DISABLE_PLUGINS", None)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_a_denial_holds_against_an_approval_from_another_process(shop, tmp_path, durable_store):
    store, log = durable_store, str(tmp_path / "calls")
    first = python(f'''
        import functai, answers_shop
        from functai.testing import ScriptedLM, tool_call
        functai.configure(client=ScriptedLM([tool_call("refund", {{"order": "A1"}})]))
        chat = answers_shop.support.conversation("c1", store={store!r}, approve="changes")
        try:
            chat("Refund A1")
        except functai.Waiting as waiting:
            waiting.turn.deny(reason="no receipt", by="manager")
            print(waiting.turn.id, waiting.turn.state)
    ''', tmp_path)
    turn_id, state = first[0].split()
    assert state == "waiting"

    second = python(f'''
        import functai, answers_shop
        from functai.testing import ScriptedLM
        functai.configure(client=ScriptedLM(["I could not refund it."]), log_calls={log!r})
        turn = answers_shop.support.conversation("c1", store={store!r}, approve="changes").turn({turn_id!r})
        try:
            turn.approve(by="intern")
        except functai.FunctAIError as error:
            print(error.code)
            print(error.message)
        print(turn.resume())
    ''', tmp_path)
    assert second[0] == "approval-answered"
    assert "already denied (no receipt) by manager at " in second[1] and "not applied" in second[1]
    assert second[2] == "I could not refund it."
    assert refunds(tmp_path) == []  # the refused tool ran 0 times

    records = open_store(store).read("c1")
    given = [(r["kind"], r["allow"], r["by"]) for r in records if r["kind"] in ("answer", "late_answer")]
    assert given == [("answer", False, "manager"), ("late_answer", True, "intern")]  # both kept, in order
    (record,) = functai.read_calls(log)
    (waited,) = record.conversation["waited"]
    assert [(a["allow"], a["by"], a["reason"]) for a in waited["answers"].values()] == [
        (False, "manager", "no receipt")]  # the answer that held
    assert record.tool_calls[0]["refused"] == "approval"


def test_two_processes_answering_at_once_leave_exactly_one_answer_holding(shop, tmp_path, durable_store):
    store = durable_store
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]))
    chat = shop.support.conversation("c2", store=store, approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    turn_id = info.value.turn.id
    code = f'''
        import sys, functai, answers_shop
        turn = answers_shop.support.conversation("c2", store={store!r}).turn({turn_id!r})
        sys.stdin.readline()  # both processes are ready: answer now
        try:
            turn.approve(by=sys.argv[1]) if sys.argv[1] == "yes" else turn.deny(by=sys.argv[1])
            print("held")
        except functai.FunctAIError as error:
            print(error.code)
    '''
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "FUNCTAI_LOAD_PLUGINS": "approval"}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), who], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for who in ("yes", "no")]
    outs = [proc.communicate("go\n") for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err for _, err in outs]
    said = sorted(out.strip() for out, _ in outs)
    assert said == ["approval-answered", "held"]
    holding = [r for r in open_store(store).read("c2") if r["kind"] == "answer"]
    assert len(holding) == 1
    assert chat.turn(turn_id).answers == {holding[0]["key"]: {"allow": holding[0]["allow"], "reason": None,
                                                              "by": holding[0]["by"]}}


def test_in_one_process_a_later_contrary_answer_is_refused(shop, tmp_path):
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Not refunded."]))
    chat = shop.support.conversation("c3", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    turn = info.value.turn
    turn.deny(reason="no receipt", by="manager")
    with pytest.raises(FunctAIError) as refused:
        turn.approve(by="intern")
    assert refused.value.code == "approval-answered"
    assert refused.value.details["answered"]["by"] == "manager"
    turn.deny(reason="another reason", by="someone else")  # the same answer again: accepted, changes nothing
    assert list(turn.answers.values()) == [{"allow": False, "reason": "no receipt", "by": "manager"}]
    assert turn.resume() == "Not refunded."
    assert refunds(tmp_path) == []


def test_an_approval_holds_against_a_later_denial(shop, tmp_path):
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."]))
    chat = shop.support.conversation("c4", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    turn = info.value.turn
    turn.approve(by="manager")
    turn.approve(by="manager")  # approving twice is not an error
    with pytest.raises(FunctAIError) as refused:
        turn.deny(reason="changed my mind", by="intern")
    assert refused.value.code == "approval-answered" and "already approved by manager" in refused.value.message
    assert turn.resume() == "Refunded."
    assert refunds(tmp_path) == ["A1"]


def test_a_second_answer_an_older_version_recorded_is_not_applied(shop, tmp_path):
    """Records written before this rule may hold a denial and then an approval: the denial holds."""
    store = str(tmp_path / "store")
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Not refunded."]))
    chat = shop.support.conversation("c5", store=store, approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    turn = info.value.turn
    turn.deny(by="manager")
    key = turn.approvals[0]["key"]
    open_store(store).append("c5", [{"functai_conversation": 1, "kind": "answer", "turn": turn.id, "key": key,
                                     "allow": True, "reason": None, "by": "intern", "at": "later"}])
    view = shop.support.conversation("c5", store=store, approve="changes")
    assert view.turn(turn.id).answers == {key: {"allow": False, "reason": None, "by": "manager"}}
    assert view.turn(turn.id).resume() == "Not refunded."
    assert refunds(tmp_path) == []


def test_a_stream_keeps_its_first_answer(shop, tmp_path):
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Not refunded."]), approve="changes")
    stream = shop.support.stream("Refund A1")
    with stream:
        for event in stream:
            if event.kind == "waiting":
                stream.deny(reason="no receipt")
                with pytest.raises(FunctAIError) as refused:
                    stream.approve()
                assert refused.value.code == "approval-answered"
                assert "already denied (no receipt) at this stream" in refused.value.message
    assert stream.value == "Not refunded."
    assert refunds(tmp_path) == []
    assert stream.record.tool_calls[0]["refuse_reason"] == "no receipt"




def meanwhile(monkeypatch, action, writer=held):
    """Run ``action`` once, at the clock reading a writer (the module ``writer``) makes between
    reading the turn and appending: what another thread sharing the view could do at that instant,
    made certain."""
    read_clock = writer.now_text

    def now_text():
        monkeypatch.setattr(writer, "now_text", read_clock)
        action()
        return read_clock()

    monkeypatch.setattr(writer, "now_text", now_text)


def test_an_answer_recorded_between_the_check_and_the_write_holds(shop, tmp_path, monkeypatch):
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Not refunded."]))
    chat = shop.support.conversation("c6", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    turn = info.value.turn
    meanwhile(monkeypatch, lambda: chat.turn(turn.id).deny(reason="no receipt", by="manager"))
    with pytest.raises(FunctAIError) as refused:
        turn.approve(by="intern")
    assert refused.value.code == "approval-answered"
    assert "already denied (no receipt) by manager" in refused.value.message
    records = chat.store.read("c6")
    given = [(r["kind"], r["allow"], r["by"]) for r in records if r["kind"] in ("answer", "late_answer")]
    assert given == [("answer", False, "manager"), ("late_answer", True, "intern")]
    assert turn.resume() == "Not refunded."
    assert refunds(tmp_path) == []  # the refused tool ran 0 times


def test_a_turn_resumed_between_the_check_and_the_write_is_not_abandoned(shop, tmp_path, monkeypatch):
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."]))
    chat = shop.support.conversation("c7", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    turn = info.value.turn
    turn.approve(by="manager")
    meanwhile(monkeypatch, lambda: chat.turn(turn.id).resume())
    with pytest.raises(FunctAIError) as refused:
        turn.abandon(by="intern")
    assert refused.value.code == "turn-not-waiting" and "is done" in refused.value.message
    assert [r["state"] for r in chat.store.read("c7") if r["kind"] == "end"] == ["done"]
    assert refunds(tmp_path) == ["A1"]


def test_a_turn_abandoned_between_the_resume_check_and_its_claim_does_not_run(shop, tmp_path, monkeypatch):
    from functai._conversations import conversation

    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."]))
    chat = shop.support.conversation("c8", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    turn = info.value.turn
    turn.approve(by="manager")
    meanwhile(monkeypatch, lambda: chat.turn(turn.id).abandon(by="intern"), writer=conversation)
    with pytest.raises(FunctAIError) as refused:
        turn.resume()
    assert refused.value.code == "turn-not-waiting" and "is abandoned" in refused.value.message
    assert [r["state"] for r in chat.store.read("c8") if r["kind"] == "end"] == ["abandoned"]
    assert not [r for r in chat.store.read("c8") if r["kind"] == "resume"]
    assert refunds(tmp_path) == []  # the abandoned turn's tool never ran
