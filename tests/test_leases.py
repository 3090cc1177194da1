"""Leases: a turn left running by a dead process is marked interrupted, and can be
resumed (without running a started tool again) or abandoned."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import functai
from functai import FunctAIError
from functai._cli import main as cli
from functai._conversations import leases
from functai._stores import MemoryStore
from functai._conversations.history import History
from functai.testing import ScriptedLM, log_events, tool_call

APP = textwrap.dedent('''
    import json, os, signal, sys, time
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM

    if os.environ.get("APP_SCRIPT"):  # a CLI process answers from this script
        functai.configure(client=ScriptedLM(json.loads(os.environ["APP_SCRIPT"])))

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        how = os.environ.get("APP_REFUND", "")
        if how == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "block":
            sys.stdout.write("in refund\\n")
            sys.stdout.flush()
            sys.stdin.readline()
        with open(os.environ["APP_LEDGER"], "a") as ledger:
            ledger.write(order + "\\n")
        return f"refunded {order}"

    @ai(tools=[refund])
    def support(request: str) -> str:
        """Support the customer."""
''')


@pytest.fixture
def app(tmp_path, monkeypatch, install):
    import functai_approval

    install(functai_approval.plugin)  # as installed for the child processes
    (tmp_path / "leased_app.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("APP_LEDGER", str(tmp_path / "ledger.txt"))
    sys.modules.pop("leased_app", None)
    import leased_app

    yield leased_app
    sys.modules.pop("leased_app", None)


def ledger(tmp_path):
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def child(tmp_path, code, refund, **popen):
    env = {**os.environ, "APP_LEDGER": str(tmp_path / "ledger.txt"), "APP_REFUND": refund,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()]),
           "FUNCTAI_LOAD_PLUGINS": "approval"}  # the plugins this test process has, whatever else is installed
    env.pop("FUNCTAI_DISABLE_PLUGINS", None)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True, **popen)


SEND = '''
    import functai, leased_app
    from functai.testing import ScriptedLM, tool_call
    functai.configure(client=ScriptedLM(["hello", tool_call("refund", {{"order": "A1"}})]))
    chat = leased_app.support.conversation("c", store={store!r})
    chat("hi")
    chat("refund A1")
'''


def interrupted_turn(app, tmp_path, store):
    """A conversation whose second turn's process was SIGKILLed inside the refund tool."""
    proc = child(tmp_path, SEND.format(store=store), "die")
    assert proc.wait(timeout=120) == -signal.SIGKILL
    return app.support.conversation("c", store=store)


def records(store, conversation="c"):
    with open(os.path.join(store, conversation + ".jsonl")) as lines:
        return [json.loads(line) for line in lines]


def test_a_live_owner_keeps_its_turn_and_a_dead_one_leaves_it_interrupted(app, tmp_path):
    store = str(tmp_path / "store")
    proc = child(tmp_path, SEND.format(store=store), "block", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == "in refund\n"  # the turn runs, its tool recorded as started
        view = app.support.conversation("c", store=store)
        assert view.head.state == "running"  # the owner is alive: its lease holds
        with pytest.raises(FunctAIError):
            view.head.resume()
    finally:
        proc.kill()
        proc.wait(timeout=60)
        proc.stdin.close()
        proc.stdout.close()
    view = app.support.conversation("c", store=store)  # opening marks it
    turn = view.head
    assert turn.state == "interrupted" and f"pid {proc.pid}" in turn.why and "is gone" in turn.why
    (mark,) = [r for r in records(store) if r["kind"] == "interrupt"]
    assert mark["turn"] == turn.id and mark["why"] == turn.why
    with pytest.raises(FunctAIError) as busy:
        view("something else")
    assert busy.value.code == "conversation-busy" and "interrupted" in busy.value.message


def test_resuming_an_interrupted_turn_reports_the_started_tool_instead_of_running_it(app, tmp_path):
    store = str(tmp_path / "store")
    view = interrupted_turn(app, tmp_path, store)
    lm = ScriptedLM(["It may not have gone through.", "next"])
    functai.configure(client=lm)
    turn = view.head
    assert turn.state == "interrupted"
    assert turn.resume() == "It may not have gone through."
    assert ledger(tmp_path) == []  # not run again
    (tool_message,) = [m for m in lm.requests[0].messages if m["role"] == "tool"]
    assert tool_message["content"] == (
        "The tool was started but its result is unknown; it may or may not have taken effect.")
    assert len(lm.requests) == 1  # the reply that asked for the tool was paid for before the crash: reused
    assert view.head.state == "done"
    assert view("and now?") == "next"
    assert view.head.parent == turn.id


def test_resume_with_rerun_runs_the_named_tool_again(app, tmp_path):
    store = str(tmp_path / "store")
    view = interrupted_turn(app, tmp_path, store)
    functai.configure(client=ScriptedLM(["Refunded."]))
    assert view.head.resume(rerun=["refund"]) == "Refunded."
    assert ledger(tmp_path) == ["A1"]
    resume = [r for r in records(store) if r["kind"] == "resume"]
    assert resume[-1]["rerun"] == ["refund"] and resume[-1]["was"] == "interrupted"
    with pytest.raises(TypeError):
        view.head.resume(rerun="refund")


def test_abandoning_an_interrupted_turn_frees_the_branch(app, tmp_path):
    store = str(tmp_path / "store")
    view = interrupted_turn(app, tmp_path, store)
    first, lost = view.turns
    lost.abandon(reason="the customer called instead", by="ops")
    assert lost.state == "abandoned" and view.turn(lost.id).state == "abandoned"
    functai.configure(client=ScriptedLM(["fresh"]))
    assert view("start over") == "fresh"
    assert view.head.parent == first.id  # an abandoned turn is never a parent
    with pytest.raises(FunctAIError) as info:
        lost.resume()
    assert info.value.code == "turn-not-waiting"
    end = [r for r in records(store) if r["kind"] == "end" and r["turn"] == lost.id][-1]
    assert (end["state"], end["reason"], end["by"], end["was"]) == (
        "abandoned", "the customer called instead", "ops", "interrupted")
    assert ledger(tmp_path) == []


def test_a_waiting_turn_can_be_abandoned_too(app, tmp_path):
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "ok"]))
    chat = app.support.conversation("w", approve="changes")
    with pytest.raises(functai.Waiting) as info:
        chat("refund A1")
    info.value.turn.abandon()
    assert chat.head.state == "abandoned"
    assert chat("hello") == "ok"


# -- the lease rules, on records written by hand ------------------------------------


def store_with_running_turn(owner, t, claim="c1"):
    store = MemoryStore()
    store.append("x", [
        {"functai_conversation": 1, "kind": "conversation", "id": "x", "function": "leased_app:support"},
        {"functai_conversation": 1, "kind": "turn", "turn": "t1", "parent": None, "inputs": {"request": "hi"},
         "at": "2026-01-01T00:00:00.000+00:00", "claim": claim, "owner": owner, "t": t, "ttl": 60},
    ])
    return store


def me(**changes):
    return {**leases.owner(), **changes}


@pytest.mark.parametrize("owner, age, why", [
    ({"pid": 4242, "host": "elsewhere", "boot": "b"}, 30, None),  # another host, renewed 30 s ago
    ({"pid": 4242, "host": "elsewhere", "boot": "b"}, 120, "last renewed 120 s ago"),
    ("pid reused", 0, "is gone"),  # this host, this boot, a live pid that is another process
    ("rebooted", 0, "restarted"),
    ("this process", 0, "this process"),  # our own pid, a claim we do not run
])
def test_when_a_lease_expires(app, owner, age, why):
    if owner in ("pid reused", "rebooted") and not (leases.owner()["boot"] and leases.owner()["start"]):
        pytest.skip("no boot id or process start times (/proc) on this system")
    if owner == "pid reused":
        owner = me(pid=os.getppid(), start="never-a-start-time")
    elif owner == "rebooted":
        owner = me(boot="another-boot")
    elif owner == "this process":
        owner = me()
    store = store_with_running_turn(owner, time.time() - age)
    turn = app.support.conversation("x", store=store).turn("t1")
    if why is None:
        assert turn.state == "running"
    else:
        assert turn.state == "interrupted" and why in turn.why


def test_renewals_keep_a_long_turn_alive(app, tmp_path, monkeypatch):
    monkeypatch.setattr(leases, "RENEW", 0.05)
    leases._wake.set()  # a renewal thread already waiting picks up the short period
    store = str(tmp_path / "store")

    def slow(order):
        time.sleep(0.4)
        return "refunded"

    monkeypatch.setattr(app.refund, "fn", slow)
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]))
    chat = app.support.conversation("long", store=store)
    assert chat("refund A1") == "done"
    found = records(store, "long")
    (turn,) = [r for r in found if r["kind"] == "turn"]
    renewals = [r for r in found if r["kind"] == "lease"]
    assert renewals and {r["claim"] for r in renewals} == {turn["claim"]}
    assert all(r["t"] > turn["t"] for r in renewals)
    assert turn["owner"]["pid"] == os.getpid() and turn["owner"]["host"] == socket.gethostname()


def test_no_renewal_is_written_before_its_turns_record(app, tmp_path, monkeypatch):
    """Hooks that run before a turn's record is written (a slow context hook, a slow
    store) once let a renewal land first: a lease for a turn the file did not know yet."""
    monkeypatch.setattr(leases, "RENEW", 0.05)
    leases._wake.set()
    store = str(tmp_path / "store")
    slow_context = functai.Plugin("slow-context", context=lambda event: time.sleep(0.4))
    functai.configure(client=ScriptedLM(["first", "second"]))
    chat = app.support.conversation("slow", store=store, plugins=[slow_context])
    chat("one")
    chat("two")
    found = records(store, "slow")
    seen: set[str] = set()
    for record in found:
        if record["kind"] == "turn":
            seen.add(record["turn"])
        elif "turn" in record:
            assert record["turn"] in seen, f"a {record['kind']} record came before its turn's record"
    turns = [r for r in found if r["kind"] == "turn"]
    assert len(turns) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a record for an unknown turn would warn on opening
        reopened = app.support.conversation("slow", store=store, plugins=[slow_context])
        assert [t.state for t in reopened.turns] == ["done", "done"]


def test_a_turns_lease_starts_when_its_record_is_written(app, tmp_path, monkeypatch):
    """Not when its hooks started: hooks longer than the lease's ttl must not leave a turn
    that another process takes for dead the moment it is written."""
    store = str(tmp_path / "store")
    slow_context = functai.Plugin("slow-context", context=lambda event: time.sleep(0.3))
    functai.configure(client=ScriptedLM(["first"]))
    chat = app.support.conversation("late", store=store, plugins=[slow_context])
    before = time.time()
    chat("one")
    (turn,) = [r for r in records(store, "late") if r["kind"] == "turn"]
    assert turn["t"] >= before + 0.3 - 0.01


def test_an_interrupt_for_an_older_claim_is_ignored():
    history = History()
    history.apply_all([
        {"functai_conversation": 1, "kind": "turn", "turn": "t", "claim": "old", "owner": {}, "t": 0},
        {"functai_conversation": 1, "kind": "interrupt", "turn": "t", "claim": "old", "why": "gone"},
        {"functai_conversation": 1, "kind": "resume", "turn": "t", "claim": "new", "owner": {}, "t": 1},
        {"functai_conversation": 1, "kind": "interrupt", "turn": "t", "claim": "old", "why": "stale"},
    ])
    assert history.turns["t"].state == "running" and history.turns["t"].claim == "new"
    assert history.running == {"t"}


# -- the command line ---------------------------------------------------------------


def run(argv):
    import io

    out, err = io.StringIO(), io.StringIO()
    status = cli(argv, out, err)
    return status, out.getvalue(), err.getvalue()


def test_the_cli_shows_interrupted_turns_and_resumes_or_abandons_them(app, tmp_path, monkeypatch):
    store = str(tmp_path / "store")
    interrupted_turn(app, tmp_path, store)
    status, out, _ = run(["conversation", store, "c"])
    assert status == 0
    lines = out.splitlines()
    assert "interrupted" in lines[2] and "is gone" in lines[2]
    assert f"functai resume {store} c" in out

    functai.configure(client=ScriptedLM(["It may not have gone through."]))
    monkeypatch.chdir(tmp_path)
    status, out, err = run(["resume", store, "c"])
    assert (status, err) == (0, ""), err
    assert "It may not have gone through." in out and ledger(tmp_path) == []
    status, _, err = run(["resume", store, "c"])
    assert status == 1 and err.startswith("functai: error [nothing-interrupted]")


def test_the_cli_abandons_without_importing_the_function(app, tmp_path):
    store = str(tmp_path / "store")
    interrupted_turn(app, tmp_path, store)
    sys.modules.pop("leased_app", None)
    os.remove(tmp_path / "leased_app.py")  # the function's code is gone
    status, out, err = run(["resume", store, "c", "--abandon", "gone for good"])
    assert (status, err) == (0, ""), err
    assert "abandoned" in out
    history = History()
    history.apply_all(records(store))
    assert [history.turns[t].state for t in history.order] == ["done", "abandoned"]


def test_the_cli_abandons_a_waiting_turn_without_importing_the_function(app, tmp_path):
    """Answering needs the function; a turn that waits for an answer nobody can give any more (its code
    gone) holds its branch until it is abandoned."""
    store = str(tmp_path / "store")
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]))
    with pytest.raises(functai.Waiting):
        app.support.conversation("c", store=store, approve="changes")("refund A1")
    sys.modules.pop("leased_app", None)
    os.remove(tmp_path / "leased_app.py")
    status, out, err = run(["resume", store, "c", "--abandon", "the app is gone", "--by", "ops"])
    assert (status, err) == (0, ""), err
    history = History()
    history.apply_all(records(store))
    assert [history.turns[t].state for t in history.order] == ["abandoned"]
    status, _, err = run(["resume", store, "c", "--abandon"])
    assert status == 1 and "is interrupted or waiting" in err


def test_an_abandoned_waiting_turn_logs_its_one_call_record(app, tmp_path):
    log = str(tmp_path / "calls")
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]), log_calls=log)
    chat = app.support.conversation("gave-up", approve="changes")
    with pytest.raises(functai.Waiting) as info:
        chat("refund A1")
    assert list(functai.read_calls(log)) == []
    info.value.turn.deny(reason="no receipt", by="ops")
    info.value.turn.abandon(reason="customer withdrew")
    (record,) = functai.read_calls(log)
    assert record.id == chat.head.call and record.error["code"] == "turn-abandoned"
    assert "customer withdrew" in record.error["message"]
    (waited,) = record.conversation["waited"]
    assert [a["name"] for a in waited["approvals"]] == ["refund"]
    assert [a["by"] for a in waited["answers"].values()] == ["ops"]


def test_a_store_this_process_cannot_write_still_opens(app):
    class ReadOnly(MemoryStore):
        def append(self, conversation, records, *, expect=None, sync=False):
            raise PermissionError(13, "read-only store")

    source = store_with_running_turn({"pid": 4242, "host": "elsewhere", "boot": "b"}, time.time() - 600)
    store = ReadOnly()
    MemoryStore.append(store, "x", source.read("x"))
    with log_events() as logged:
        view = app.support.conversation("x", store=store)
    assert logged.named("could not mark interrupted turns")
    assert view.turn("t1").state == "running"


def test_a_lease_whose_time_reads_nan_is_kept_not_reaped():
    """A hand-edited or damaged lease time of "nan" is not a lease that ran out: its turn stays held."""
    elsewhere = {"owner": {"host": "another-host", "pid": 1}, "ttl": 30}
    assert leases.expired({**elsewhere, "t": "nan"}, None, time.time()) is None
    assert "was last renewed at 1970-01-01" in leases.expired({**elsewhere, "t": 0.0}, None, time.time())


def test_a_live_owner_in_another_pid_namespace_is_not_taken_for_gone():
    """Containers sharing the host name and boot id each number their own processes: a pid from
    another namespace is not looked up here, and its lease holds until its time runs out."""
    from functai._conversations import leases

    me = leases.owner()
    elsewhere = {**me, "pid": 1, "ns": "pid:[1]", "start": "1"}  # pid 1 here is init: alive, and not it
    missing = {**me, "pid": 2 ** 22 + 7, "ns": "pid:[1]", "start": "1"}
    now = time.time()
    for who in (elsewhere, missing):
        assert leases.expired({"owner": who, "t": now, "ttl": 60}, "c", now) is None
        assert "ago" in leases.expired({"owner": who, "t": now - 120, "ttl": 60}, "c", now)
    same_space = {**missing, "ns": me["ns"]}
    assert "is gone" in leases.expired({"owner": same_space, "t": now, "ttl": 60}, "c", now)


PAUSED = '''
    import os, signal, sys
    import functai, leased_app
    from functai._conversations import leases
    from functai.testing import ScriptedLM, tool_call
    leases.TTL = 1.0  # its lease lapses a second after it stops

    def model(request):
        if len(request.messages) == 2:  # asked for the refund: stopped here, as by SIGSTOP, a debugger, a suspended VM
            print("asking", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
            if {fails}:
                raise ConnectionError("read timed out")  # the request in flight did not survive the pause
            return tool_call("refund", {{"order": "A1"}})
        return "done here"

    functai.configure(client=ScriptedLM(reply=model))
    try:
        leased_app.support.conversation("c", store={store!r})("refund A1")
    except functai.FunctAIError as error:
        print(error.code, flush=True)
'''


@pytest.mark.parametrize("wakes", ["after", "during"])
def test_an_owner_paused_past_its_lease_does_not_run_the_tool_the_turn_ran_elsewhere(app, tmp_path, wakes):
    """Its lease lapsed, another process resumed the turn and ran the tool; woken, the owner must not
    run it a second time, nor end a turn that is not its own: woken after the other ended, it asks
    for the tool; woken while the other runs, its request failed in the pause (a timeout), which
    ended the turn failed over the other's."""
    store = str(tmp_path / "store")
    proc = child(tmp_path, PAUSED.format(store=store, fails=wakes == "during"), "", stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE)
    woken = []

    def wake():
        if not woken:
            os.kill(proc.pid, signal.SIGCONT)
            woken.append(proc.communicate(timeout=120))

    try:
        assert proc.stdout.readline() == "asking\n"
        deadline = time.monotonic() + 60
        while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.5)  # past the lease's ttl
        view = app.support.conversation("c", store=store)
        turn = view.head
        assert turn.state == "interrupted" and "last renewed" in turn.why

        def model(request):
            if request.messages[-1]["role"] != "tool":
                return tool_call("refund", {"order": "A1"})
            if wakes == "during":
                wake()  # while this turn still runs here
            return "refunded here"

        functai.configure(client=ScriptedLM(reply=model))
        assert turn.resume() == "refunded here"
        assert ledger(tmp_path) == ["A1"]
    finally:
        wake()
    [(out, err)] = woken
    assert (out, proc.returncode) == ("turn-lost\n", 0), err
    assert ledger(tmp_path) == ["A1"]  # once
    again = app.support.conversation("c", store=store)
    assert again.head.state == "done" and again.head.outputs == {"output": "refunded here"}
