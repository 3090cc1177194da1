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
from dbos import DBOS, SetWorkflowID

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
    elsewhere = dbos_app.judge.conversation("j1", store=str(tmp_path / "not-the-workers"))
    with pytest.raises(functai.FunctAIError) as apart:  # never sent a second time where the answer is not
        functai_dbos.Handle(DBOS.retrieve_workflow(handle.id), DBOS, elsewhere, {"request": "A1 broke"}, "a1").result()
    assert apart.value.code == "dbos-store" and elsewhere.all_turns() == []
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


@pytest.mark.parametrize("key, answer_within, code", [
    (None, None, "dbos-key"), ("", None, "dbos-key"), (5, None, "dbos-key"), ("k" * 201, None, "dbos-key"),
    ("k", "soon", "dbos-answer-within"), ("k", -5, "dbos-answer-within"), ("k", 0, "dbos-answer-within"),
    ("k", True, "dbos-answer-within"), ("k", float("inf"), "dbos-answer-within"),
])
def test_a_bad_key_or_answer_within_is_refused_before_anything_is_queued(launched, tmp_path, key, answer_within,
                                                                          code):
    lm = ScriptedLM(["Hello."])
    functai.configure(client=lm)
    with pytest.raises(functai.FunctAIError) as refused:
        functai_dbos.send(dbos_app.desk.conversation("b1", store=str(tmp_path / "store")), {"request": "hi"},
                          key=key, answer_within=answer_within)
    assert refused.value.code == code
    assert DBOS.list_workflows() == [] and lm.requests == []


def test_inputs_the_function_does_not_take_are_refused_before_anything_is_queued(launched, tmp_path):
    chat = dbos_app.desk.conversation("b9", store=str(tmp_path / "store"))
    with pytest.raises(TypeError, match="did you mean 'request'"):  # as chat.send refuses them
        functai_dbos.send(chat, {"requets": "hi"}, key="k")
    assert DBOS.list_workflows() == []


@pytest.mark.parametrize("own, named", [
    ({"approve": "changes"}, "approve"), ({"plugins": []}, "plugins"), ({"context": functai.last_turns(2)}, "context"),
])
def test_a_view_with_settings_a_worker_would_not_have_is_refused(launched, tmp_path, own, named):
    """A worker opens the conversation with the function's settings: a view's own approve rule must not
    be dropped on the way (a turn that needed a person's approval would run without one)."""
    chat = dbos_app.desk.conversation("b2", store=str(tmp_path / "store"), **own)
    with pytest.raises(functai.FunctAIError) as refused:
        functai_dbos.send(chat, {"request": "refund A1"}, key="k")
    assert refused.value.code == "dbos-settings" and named in refused.value.message
    assert DBOS.list_workflows() == []


def test_an_answer_whose_wake_up_was_lost_is_found_by_the_workflow_itself(launched, tmp_path, monkeypatch):
    """Approved where no system database is named (so nothing wakes the workflow), within answer_within:
    the workflow looks at the turn itself, goes on with it, and does not abandon an answered turn."""
    import functai_dbos.workflow

    monkeypatch.setattr(functai_dbos.workflow, "RECHECK", 0.5)
    functai.configure(client=refunding(), approve="changes")
    store = str(tmp_path / "store")
    handle = functai_dbos.send(dbos_app.desk.conversation("b3", store=store), {"request": "refund A1"}, key="t-b3",
                               answer_within=4)
    until_waiting(handle)
    here = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if k != functai_dbos.ENV}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(here), here, *sys.path])
    subprocess.run([sys.executable, "-c", ANSWER, "b3", store], env=env, check=True, timeout=120)
    assert handle.result(timeout=60) == "Refunded."
    assert functai.Conversation.open("b3", store).head.state == "done"


def test_a_turn_behind_a_waiting_turn_fails_busy_at_once_rather_than_waiting_forever(launched, tmp_path):
    functai.configure(client=refunding(), approve="changes")
    store = str(tmp_path / "store")
    first = functai_dbos.send(dbos_app.desk.conversation("b4", store=store), {"request": "refund A1"}, key="first")
    until_waiting(first)
    second = functai_dbos.send(dbos_app.desk.conversation("b4", store=store), {"request": "hi"}, key="second")
    with pytest.raises(functai.FunctAIError) as busy:
        second.result(timeout=30)
    assert busy.value.code == "conversation-busy" and second.state() == "failed"
    assert [turn.key for turn in functai.Conversation.open("b4", store).all_turns()] == ["first"]
    DBOS.cancel_workflow(first.id)  # not left waiting past the test


def test_a_store_that_fails_for_a_while_is_tried_again_and_the_turn_is_made(launched, tmp_path, monkeypatch):
    """A full disk for the worker's first two tries (store-unwritable): the step is run again, and the turn
    is made once, not ended failed under a key that could never be sent again."""
    import errno

    from functai._stores.folder import FolderStore

    lm = ScriptedLM(["Hello."])
    functai.configure(client=lm)
    real, tries = FolderStore._append, []

    def full_at_first(self, *args, **kwargs):
        tries.append(1)
        if len(tries) <= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(FolderStore, "_append", full_at_first)
    handle = functai_dbos.send(dbos_app.desk.conversation("b5", store=str(tmp_path / "store")), {"request": "hi"},
                               key="k5")
    assert handle.result(timeout=60) == "Hello." and len(tries) > 2 and len(lm.requests) == 1


def test_a_workflow_names_no_module_a_worker_did_not_import(launched, tmp_path):
    from functai_dbos.workflow import QUEUE, turn

    store = str(tmp_path / "store")
    chat = dbos_app.desk.conversation("b6", store=store)
    queue = DBOS.retrieve_queue(QUEUE)
    for n, function in enumerate(["antigravity:fly", "json:loads", "dbos_app:refund"]):
        with SetWorkflowID(functai_dbos.workflow_id("b6", f"k{n}")):
            raw = queue.enqueue(turn, function, "b6", store, {"request": "hi"}, None)
        with pytest.raises(functai.FunctAIError) as refused:
            functai_dbos.Handle(raw, DBOS, chat, {"request": "hi"}, f"k{n}").result(timeout=60)
        assert refused.value.code == "dbos-function" and "--import" in refused.value.message
    assert "antigravity" not in sys.modules


def test_a_workflow_cancelled_in_dbos_fails_its_handle_with_a_code(launched, tmp_path):
    functai.configure(client=refunding(), approve="changes")
    handle = functai_dbos.send(dbos_app.desk.conversation("b7", store=str(tmp_path / "store")), {"request": "A1"},
                               key="k7")
    until_waiting(handle)
    DBOS.cancel_workflow(handle.id)
    with pytest.raises(functai.FunctAIError) as failed:
        handle.result(timeout=60)
    assert failed.value.code == "dbos-workflow-failed" and handle.state() == "failed"


@pytest.mark.parametrize("url", ["nonsense", "mysql://db/x", "sqlite:////no/such/folder/dbos.db"])
def test_a_system_database_that_cannot_be_used_is_refused_with_a_code(url, tmp_path, monkeypatch):
    with pytest.raises(functai.FunctAIError) as refused:
        functai_dbos.launch(url)
    assert refused.value.code == "dbos-url" and not functai_dbos._launched
    monkeypatch.setenv(functai_dbos.ENV, url)
    with pytest.raises(functai.FunctAIError) as client:
        functai_dbos.send(dbos_app.desk.conversation("b8", store=str(tmp_path / "store")), {"request": "hi"}, key="k")
    assert client.value.code in ("dbos-url", "dbos-not-set-up")


def test_the_lease_table_is_reached_for_every_postgresql_spelling_and_places_tell_pid_namespaces_apart():
    from functai_dbos.workers import _place, engine

    for url in ("postgresql://u@h/db", "postgres://u@h/db"):
        assert engine(url).url.drivername == "postgresql+psycopg"
    assert _place().split(" ")[-1].startswith("pid:[")


def test_a_system_database_password_is_in_no_message_wherever_the_url_holds_it():
    url = "postgresql://ann:s3cret@127.0.0.1:1/db?sslmode=disable&password=t0psecret&sslpassword=k3ypass"
    shown = functai_dbos._hidden(url)
    assert "s3cret" not in shown and "t0psecret" not in shown and "sslmode=disable" in shown
    assert "k3ypass" not in shown  # libpq reads sslpassword= too, as the core's redact knows
    said = functai_dbos._hidden(url, "OperationalError: password s3cret / t0psecret refused")
    assert "s3cret" not in said and "t0psecret" not in said
    with pytest.raises(functai.FunctAIError) as refused:
        functai_dbos._url("mysql://ann:s3cret@h/db")
    assert refused.value.code == "dbos-url" and "s3cret" not in refused.value.message
