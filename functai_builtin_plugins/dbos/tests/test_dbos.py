"""Turns as DBOS workflows, on a real DBOS over a SQLite system database: sent to the queue and run,
made once per key, waiting without holding a worker, and woken by an answer from another process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import dbos_app
import functai_approval
import functai_dbos
import pytest
from dbos import DBOS

import functai
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")


@pytest.fixture
def launched(tmp_path, installed_plugins):
    installed_plugins(functai_approval.plugin, functai_dbos.plugin)
    url = "sqlite:///" + str(tmp_path / "dbos.db")
    functai_dbos.launch(url)
    yield url
    functai_dbos.stop()


def until_waiting(handle: functai_dbos.Handle) -> None:
    """Wait (at most a minute) until the handle's turn waits for a person, its workflow asleep."""
    deadline = time.monotonic() + 60
    while handle.state() != "waiting":
        assert time.monotonic() < deadline, handle.state()
        time.sleep(0.1)


def refunding() -> ScriptedLM:
    return ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."])


def test_a_turn_sent_to_the_queue_runs_and_is_made_once_per_key(launched, tmp_path):
    lm = ScriptedLM(["Hello.", "Hello."])
    functai.configure(client=lm)
    chat = dbos_app.desk.conversation("d1", store=str(tmp_path / "store"))
    handle = functai_dbos.send(chat, {"request": "hi"}, key="greeting-1")
    assert handle.result(timeout=60) == "Hello." and handle.state() == "done" and handle.id == "d1/greeting-1"
    again = functai_dbos.send(chat, {"request": "hi"}, key="greeting-1")
    assert again.result(timeout=60) == "Hello." and len(lm.requests) == 1
    other = functai_dbos.send(dbos_app.desk.conversation("d1b", store=str(tmp_path / "store")), {"request": "hi"},
                              key="greeting-1")  # a key is the conversation's: another conversation, another turn
    assert other.result(timeout=60) == "Hello." and other.id == "d1b/greeting-1" and len(lm.requests) == 2
    [turn] = functai.Conversation.open("d1", str(tmp_path / "store")).all_turns()
    assert turn.key == "greeting-1" and turn.state == "done"
    with pytest.raises(functai.FunctAIError) as in_memory:  # a worker elsewhere could never open it
        functai_dbos.send(dbos_app.desk.conversation("d1m"), {"request": "hi"}, key="memory-1")
    assert in_memory.value.code == "dbos-store"



def test_the_answer_stays_in_functais_store_and_comes_back_typed(launched, tmp_path):
    functai.configure(client=ScriptedLM(['{"refund": true, "reason": "arrived broken"}']))
    store = str(tmp_path / "store")
    handle = functai_dbos.send(dbos_app.judge.conversation("j1", store=store), {"request": "A1 broke"}, key="a1")
    assert handle.result(timeout=60) == dbos_app.Verdict(refund=True, reason="arrived broken")
    assert DBOS.retrieve_workflow(handle.id).get_result() == {"state": "done"}  # no answer passes through DBOS
    opened = functai.Conversation.open("j1", store)  # without its function: the answer's type is unknown here
    with pytest.raises(functai.FunctAIError) as untyped:
        functai_dbos.Handle(DBOS.retrieve_workflow(handle.id), DBOS, opened, {"request": "A1 broke"}, "a1").result()
    assert untyped.value.code == "conversation-function"

def test_a_waiting_turn_holds_no_worker_and_an_answer_here_wakes_it(launched, tmp_path):
    functai.configure(client=refunding(), approve="changes")
    store = str(tmp_path / "store")
    handle = functai_dbos.send(dbos_app.desk.conversation("d2", store=store), {"request": "refund A1"}, key="t-2")
    until_waiting(handle)
    turn = functai.Conversation.open("d2", store).head
    assert turn.state == "waiting" and turn.key == "t-2"
    turn.approve(by="ops")  # the installed dbos plugin hears turn_answer and wakes the workflow
    assert handle.result(timeout=60) == "Refunded."


ANSWER = textwrap.dedent('''
    import sys
    import functai, functai_dbos
    functai.configure(plugins=[functai_dbos.plugin])  # as installed in that process
    functai.Conversation.open(sys.argv[1], sys.argv[2]).head.approve(by="another process")
''')


def test_an_answer_from_another_process_wakes_the_workflow(launched, tmp_path):
    functai.configure(client=refunding(), approve="changes")
    store = str(tmp_path / "store")
    handle = functai_dbos.send(dbos_app.desk.conversation("d3", store=store), {"request": "refund A1"}, key="t-3")
    until_waiting(handle)
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, functai_dbos.ENV: launched,
           "PYTHONPATH": os.pathsep.join([os.path.dirname(here), here, *sys.path])}
    subprocess.run([sys.executable, "-c", ANSWER, "d3", store], env=env, check=True, timeout=120)
    assert handle.result(timeout=60) == "Refunded."
    assert functai.Conversation.open("d3", store).head.answers  # recorded by that process


def test_a_waiting_turn_not_answered_in_time_is_abandoned_with_a_code(launched, tmp_path):
    functai.configure(client=refunding(), approve="changes")
    store = str(tmp_path / "store")
    handle = functai_dbos.send(dbos_app.desk.conversation("d4", store=store), {"request": "refund A1"}, key="t-4",
                               answer_within=0.5)
    with pytest.raises(functai.FunctAIError) as late:
        handle.result(timeout=60)
    assert late.value.code == "turn-answer-late" and handle.state() == "failed"
    assert functai.Conversation.open("d4", store).head.state == "abandoned"


@pytest.mark.parametrize("lease", [0, -1, "soon", float("nan"), float("inf")])
def test_a_lease_that_is_not_a_positive_number_of_seconds_is_refused_before_dbos_starts(lease, tmp_path):
    with pytest.raises(functai.FunctAIError) as refused:
        functai_dbos.launch("sqlite:///" + str(tmp_path / "dbos.db"), lease=lease)
    assert refused.value.code == "dbos-lease" and not functai_dbos._launched
    assert not (tmp_path / "dbos.db").exists()


def test_send_needs_dbos_launched_and_a_store_a_worker_can_open(tmp_path):
    chat = dbos_app.desk.conversation("d5", store=str(tmp_path / "store"))
    with pytest.raises(functai.FunctAIError) as first:
        functai_dbos.send(chat, {"request": "hi"}, key="k")
    assert first.value.code == "dbos-not-launched"


def test_a_turn_answered_and_resumed_elsewhere_at_once_ends_the_workflow_with_its_answer(launched, tmp_path):
    """``functai approve`` records the answer (which wakes the workflow) and resumes the turn itself:
    whichever claims the turn first runs it, and the workflow ends with the answer either way."""
    functai.configure(client=refunding(), approve="changes")
    store = str(tmp_path / "store")
    handle = functai_dbos.send(dbos_app.desk.conversation("d6", store=store), {"request": "refund A1"}, key="t-6")
    until_waiting(handle)
    here = dbos_app.desk.conversation("d6", store=store)
    here.head.approve(by="ops")
    try:
        assert here.head.resume() == "Refunded."
    except functai.FunctAIError as busy:  # the woken workflow claimed it first
        assert busy.code in ("conversation-busy", "turn-not-waiting")
    assert handle.result(timeout=60) == "Refunded."
