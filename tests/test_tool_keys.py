"""`functai.tool_key()`: one key per tool call, the same across retries, resumes, processes and
``--rerun``; and ``@tool(reconcile=fn)``, which settles a call the process died in."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import functai_approval
import pytest

import functai
from functai import Change, FunctAIError, Plugin, Waiting, ai, tool
from functai._conversations.scope import TurnScope
from functai._stores.opening import forget
from functai.testing import ScriptedLM, tool_call, tool_calls

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crashes are forked processes")

SHOP = textwrap.dedent('''
    """A shop whose payments land in a ledger (a SQLite file), keyed by functai.tool_key()."""
    import os, signal, sqlite3
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM, tool_calls


    def ledger():
        db = sqlite3.connect(os.environ["SHOP_LEDGER"], timeout=30)
        db.execute("CREATE TABLE IF NOT EXISTS paid (key TEXT, payment TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS settled (key TEXT, seen TEXT)")
        return db


    def rows(table):
        db = ledger()
        try:
            return db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
        finally:
            db.close()


    def write(table, *values):
        db = ledger()
        try:
            with db:
                db.execute(f"INSERT INTO {table} VALUES (?, ?)", values)
        finally:
            db.close()


    def settle(key, input):
        """What the payment with this key did: its ledger row, or None; SHOP_SETTLE=fail raises,
        SHOP_SETTLE=unshowable answers a value that cannot be written."""
        write("settled", key, functai.tool_key())
        if os.environ.get("SHOP_SETTLE") == "fail":
            raise ConnectionError("the ledger is down")
        if os.environ.get("SHOP_SETTLE") == "unshowable":
            return Unshowable()
        found = [payment for k, payment in rows("paid") if k == key]
        return f"paid {found[0]} (settled)" if found else None


    class Unshowable:
        def __repr__(self):
            raise RuntimeError("no text for this")


    def act(payment):
        if os.environ.get("SHOP_KILL") == "before-effect":
            os.kill(os.getpid(), signal.SIGKILL)
        write("paid", functai.tool_key(), payment)
        if os.environ.get("SHOP_KILL") == "after-effect":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"paid {payment}"


    @tool(effects="changes", reconcile=settle)
    def pay(payment: str) -> str:
        """Pay."""
        return act(payment)


    async def asettle(key, input):
        return settle(key, input)


    @tool(effects="changes", reconcile=asettle)
    def apay(payment: str) -> str:
        """Pay (reconciled by an async def function)."""
        return act(payment)


    @tool(effects="changes")
    def charge(payment: str) -> str:
        """Charge (no reconcile)."""
        return act(payment)


    def reply(request):
        """Two calls of the tool SHOP_TOOL names in one reply, then what they answered."""
        last = request.messages[-1]
        if last["role"] == "tool":
            return "done: " + " / ".join(m["content"] for m in request.messages if m["role"] == "tool")
        name = os.environ.get("SHOP_TOOL", "pay")
        return tool_calls([(name, {"payment": "A"}), (name, {"payment": "B"})])


    functai.configure(client=ScriptedLM(reply=reply))


    @ai(tools=[pay, apay, charge])
    def desk(request: str) -> str:
        """Make the payments asked for."""
''')


@pytest.fixture
def shop(tmp_path, monkeypatch):
    (tmp_path / "shop.py").write_text(SHOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.db"))
    sys.modules.pop("shop", None)
    import shop

    yield shop
    sys.modules.pop("shop", None)


@pytest.fixture
def store(tmp_path):
    url = "sqlite:///" + str(tmp_path / "store.db")
    yield url
    forget(url)


def died(work, **env):
    """Run ``work()`` in a forked process with ``env`` set there; assert it was SIGKILLed."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        try:
            os.environ.update(env)
            work()
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "the turn's process was not killed"


def kill_after_result():
    """In the child: SIGKILL right after the first tool call's result is recorded."""
    recorded = TurnScope.tool_done

    def then_die(self, *args, **kwargs):
        recorded(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    TurnScope.tool_done = then_die


def crashed_turn(shop, store, **env):
    """A turn of ``desk`` whose process was killed as ``env`` says; the turn, read from another process."""
    forget(store)  # no connection is shared with the child
    died(lambda: shop.desk.conversation("c", store=store)("pay A and B"), **env)
    turn = shop.desk.conversation("c", store=store).all_turns()[-1]
    assert turn.state == "interrupted"
    return turn


# -- the key ----------------------------------------------------------------------------------------------------


def spy():
    """A plugin keeping each tool event's hook and key."""
    seen = []
    plugin = Plugin("spy")
    for hook in ("tool_call", "tool_result", "tool_error"):
        plugin.on(hook, lambda event, hook=hook: seen.append((hook, event.name, event.key)))
    return plugin, seen


def keyed_tools():
    keys = []

    @tool(effects="changes")
    def pay(payment: str) -> str:
        """Pay."""
        keys.append(("pay", functai.tool_key()))
        return f"paid {payment}"

    @tool(effects="changes")
    async def apay(payment: str) -> str:
        """Pay, asynchronously."""
        await asyncio.sleep(0)
        keys.append(("apay", functai.tool_key()))
        return f"paid {payment}"

    return pay, apay, keys


def two_payments():
    return ScriptedLM([tool_calls([("pay", {"payment": "A"}), ("pay", {"payment": "B"}),
                                   ("apay", {"payment": "C"})]), "done"])


@pytest.mark.parametrize("mode", ["sync", "async", "stream", "astream"])
def test_each_tool_call_has_its_own_key_on_every_driver(mode):
    pay, apay, keys = keyed_tools()
    plugin, seen = spy()

    @ai(client=two_payments(), tools=[pay, apay], plugins=[plugin])
    def desk(request: str) -> str:
        """Pay."""

    if mode == "sync":
        value, record = desk.run("pay")
    elif mode == "async":
        value, record = asyncio.run(desk.arun("pay"))
    elif mode == "stream":
        with desk.stream("pay") as stream:
            list(stream)
        value, record = stream.value, stream.record
    else:
        async def consume():
            async with desk.astream("pay") as stream:
                async for _ in stream:
                    pass
            return stream.value, stream.record

        value, record = asyncio.run(consume())
    assert value == "done"
    # outside a turn: the asking call's record id, then the call's ordinal (0) and the invocation
    assert keys == [("pay", f"{record.id}:0.1"), ("pay", f"{record.id}:0.2"), ("apay", f"{record.id}:0.3")]
    assert seen == [("tool_call", "pay", f"{record.id}:0.1"), ("tool_result", "pay", f"{record.id}:0.1"),
                    ("tool_call", "pay", f"{record.id}:0.2"), ("tool_result", "pay", f"{record.id}:0.2"),
                    ("tool_call", "apay", f"{record.id}:0.3"), ("tool_result", "apay", f"{record.id}:0.3")]


def test_in_a_turn_the_key_is_the_turns_and_a_nested_call_has_its_own_place():
    pay, apay, keys = keyed_tools()

    @ai(tools=[pay])
    def clerk(request: str) -> str:
        """Pay as asked."""

    @ai(tools=[clerk, pay])
    def desk(request: str) -> str:
        """Pay, or ask the clerk."""

    functai.configure(client=ScriptedLM([tool_call("clerk", {"request": "pay B"}), tool_call("pay", {"payment": "B"}),
                                         "clerk done", tool_call("pay", {"payment": "A"}), "done"]))
    chat = desk.conversation("c")
    assert chat("pay") == "done"
    turn = chat.head.id
    # the turn's own call is the turn's first call, the clerk its second
    assert keys == [("pay", f"{turn}:2.1"), ("pay", f"{turn}:1.2")]


def test_a_retry_after_tool_error_keeps_the_key():
    keys = []

    @tool(effects="changes", idempotent=True)
    def pay(payment: str) -> str:
        """Pay."""
        keys.append(functai.tool_key())
        if len(keys) == 1:
            raise ConnectionError("reset")
        return "paid"

    plugin, seen = spy()
    retry = Plugin("retry", tool_error=lambda failure: Change(retry=0))

    @ai(client=ScriptedLM([tool_call("pay", {"payment": "A"}), "done"]), tools=[pay], plugins=[plugin, retry])
    def desk(request: str) -> str:
        """Pay."""

    value, record = desk.run("pay")
    key = f"{record.id}:0.1"
    assert keys == [key, key] and record.tool_calls[0]["attempts"] == 2
    assert [s for s in seen if s[0] == "tool_error"] == [("tool_error", "pay", key)]


def test_tool_key_outside_a_running_tool_refuses():
    with pytest.raises(FunctAIError) as info:
        functai.tool_key()
    assert info.value.code == "tool-key-outside" and "@functai.tool" in info.value.message
    pay, apay, keys = keyed_tools()

    @ai(client=ScriptedLM([tool_call("pay", {"payment": "A"}), "done"]), tools=[pay])
    def desk(request: str) -> str:
        """Pay."""

    desk("pay")
    assert len(keys) == 1
    with pytest.raises(FunctAIError, match="outside a running tool"):  # the key does not outlive the tool
        functai.tool_key()


def test_two_calls_of_one_tool_in_a_turn_have_two_keys(shop, store):
    chat = shop.desk.conversation("c", store=store)
    assert chat("pay A and B") == "done: paid A / paid B"
    turn = chat.head.id
    assert shop.rows("paid") == [(f"{turn}:1.1", "A"), (f"{turn}:1.2", "B")]


# -- across resumes and processes -------------------------------------------------------------------------------


def test_the_key_is_the_same_when_a_waiting_turn_is_resumed_in_another_process(shop, store, install, tmp_path):
    install(functai_approval.plugin)
    chat = shop.desk.conversation("c", store=store, approve="changes")
    with pytest.raises(Waiting) as info:
        chat("pay A and B")
    turn = info.value.turn
    turn.approve(by="ana")
    forget(store)
    code = f"""
        import functai, shop
        from functai import Waiting
        chat = shop.desk.conversation("c", store={store!r}, approve="changes")
        turn = chat.turn({turn.id!r})
        try:
            turn.resume()
        except Waiting as again:
            again.turn.approve(by="ana")
            print(again.turn.resume())
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()]),
           "FUNCTAI_LOAD_PLUGINS": "approval"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done: paid A / paid B"
    assert shop.rows("paid") == [(f"{turn.id}:1.1", "A"), (f"{turn.id}:1.2", "B")]


def test_rerun_runs_a_started_tool_again_with_the_same_key(shop, store, tmp_path):
    turn = crashed_turn(shop, store, SHOP_TOOL="charge", SHOP_KILL="after-effect")
    assert shop.rows("paid") == [(f"{turn.id}:1.1", "A")]  # it took effect, then the process died
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    forget(store)
    done = subprocess.run([sys.executable, "-m", "functai", "resume", store, "c", "--rerun", "charge"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    # run again under its own key (a service that honours the key would not charge twice)
    assert shop.rows("paid") == [(f"{turn.id}:1.1", "A"), (f"{turn.id}:1.1", "A"), (f"{turn.id}:1.2", "B")]


def test_without_reconcile_a_started_tool_stays_unknown(shop, store):
    turn = crashed_turn(shop, store, SHOP_TOOL="charge", SHOP_KILL="before-effect")
    answer = turn.resume()
    assert answer.startswith("done: The tool was started but its result is unknown")
    assert shop.rows("paid") == [(f"{turn.id}:1.2", "B")] and shop.rows("settled") == []


# -- reconcile ----------------------------------------------------------------------------------------------------


def test_reconcile_returns_what_the_tool_did(shop, store, call_records):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    key = f"{turn.id}:1.1"
    assert shop.rows("paid") == [(key, "A")]
    assert turn.resume() == "done: paid A (settled) / paid B"  # shown to the model as its result
    assert shop.rows("paid") == [(key, "A"), (f"{turn.id}:1.2", "B")]  # A did not run again
    assert shop.rows("settled") == [(key, key)]  # given the key, and tool_key() gives it too
    record = call_records.last()
    entry = {k: v for k, v in record.tool_calls[0].items() if k != "id"}
    assert entry == {"name": "pay", "input": {"payment": "A"}, "reconciled": True, "output": "paid A (settled)"}
    assert "reconciled" not in record.tool_calls[1]
    assert shop.desk.conversation("c", store=store).turn(turn.id).state == "done"


def test_reconcile_result_goes_through_tool_result(shop, store):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    seen = []

    def redact(result):
        seen.append((result.key, result.output))
        return Change(output=result.output.replace("A", "*"))

    with functai.settings(plugins=[Plugin("redact", tool_result=redact)]):
        answer = turn.resume()
    assert seen[0] == (f"{turn.id}:1.1", "paid A (settled)")
    assert answer == "done: paid * (settled) / paid B"


def test_reconcile_none_runs_the_tool_again_with_the_same_key(shop, store):
    turn = crashed_turn(shop, store, SHOP_KILL="before-effect")
    assert shop.rows("paid") == []
    assert turn.resume() == "done: paid A / paid B"
    key = f"{turn.id}:1.1"
    assert shop.rows("settled") == [(key, key)]
    assert shop.rows("paid") == [(key, "A"), (f"{turn.id}:1.2", "B")]


def test_reconcile_none_keeps_the_recorded_approval(shop, store, install):
    install(functai_approval.plugin)
    chat = shop.desk.conversation("c", store=store, approve="changes")
    with pytest.raises(Waiting) as info:
        chat("pay A and B")
    info.value.turn.approve(by="ana")
    forget(store)
    died(lambda: chat.turn(info.value.turn.id).resume(), SHOP_KILL="before-effect")
    turn = shop.desk.conversation("c", store=store, approve="changes").all_turns()[-1]
    assert turn.state == "interrupted"
    with pytest.raises(Waiting) as again:  # A runs again on its recorded yes; B is asked about
        turn.resume()
    assert [a["input"] for a in again.value.approvals] == [{"payment": "B"}]
    assert shop.rows("paid") == [(f"{turn.id}:1.1", "A")]


def test_reconcile_that_raises_leaves_the_turn_interrupted_and_a_later_resume_asks_again(shop, store,
                                                                                         call_records):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    key = f"{turn.id}:1.1"
    for _ in range(2):  # the ledger is down twice: nothing is guessed, nothing ends
        os.environ["SHOP_SETTLE"] = "fail"
        try:
            with pytest.raises(FunctAIError) as info:
                turn.resume()
        finally:
            del os.environ["SHOP_SETTLE"]
        assert info.value.code == "reconcile-failed"
        assert "ConnectionError: the ledger is down" in info.value.message and key in info.value.message
        assert isinstance(info.value.__cause__, ConnectionError)
        assert shop.rows("paid") == [(key, "A")]  # not run again
        forget(store)
        again = shop.desk.conversation("c", store=store).turn(turn.id)  # as another process reads it
        assert again.state == "interrupted"
        assert again.why == f"reconcile-failed: reconcile of {key} raised ConnectionError: the ledger is down"
    assert len(call_records) == 0  # the turn's one call record is written when it ends
    assert again.resume() == "done: paid A (settled) / paid B"  # the ledger is back
    assert shop.rows("paid") == [(key, "A"), (f"{turn.id}:1.2", "B")]
    assert [k for k, _ in shop.rows("settled")] == [key, key, key]
    assert len(call_records) == 1 and call_records.last().tool_calls[0]["reconciled"] is True
    assert shop.desk.conversation("c", store=store).turn(turn.id).state == "done"


def test_a_reconcile_result_that_cannot_be_shown_is_reconcile_failed_and_the_turn_stays_resumable(shop, store,
                                                                                                   monkeypatch):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    key = f"{turn.id}:1.1"
    monkeypatch.setenv("SHOP_SETTLE", "unshowable")
    with pytest.raises(FunctAIError) as info:
        turn.resume()
    monkeypatch.delenv("SHOP_SETTLE")
    assert info.value.code == "reconcile-failed"
    assert "returned a value that cannot be shown (Unshowable; RuntimeError: no text for this)" in info.value.message
    forget(store)
    again = shop.desk.conversation("c", store=store).turn(turn.id)
    assert again.state == "interrupted" and again.why.startswith(f"reconcile-failed: reconcile of {key} returned")
    assert again.resume() == "done: paid A (settled) / paid B"
    assert [k for k, _ in shop.rows("paid")].count(key) == 1


def test_an_async_resume_whose_reconcile_raises_leaves_the_turn_interrupted(shop, store):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    os.environ["SHOP_SETTLE"] = "fail"
    try:
        with pytest.raises(FunctAIError, match="reconcile-failed"):
            asyncio.run(turn.aresume())
    finally:
        del os.environ["SHOP_SETTLE"]
    assert shop.desk.conversation("c", store=store).turn(turn.id).state == "interrupted"
    assert asyncio.run(turn.aresume()) == "done: paid A (settled) / paid B"
    assert [k for k, _ in shop.rows("paid")].count(f"{turn.id}:1.1") == 1


def test_functai_resume_says_a_turn_whose_reconcile_raised_stays_interrupted(shop, store, tmp_path):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()]), "SHOP_SETTLE": "fail"}
    forget(store)
    command = [sys.executable, "-m", "functai", "resume", store, "c"]
    failed = subprocess.run(command, capture_output=True, text=True, env=env)
    assert failed.returncode == 1, failed.stderr
    assert "reconcile-failed" in failed.stderr and f"turn {turn.id} stays interrupted" in failed.stderr
    assert f"{turn.id}: stays interrupted [reconcile-failed]" in failed.stdout
    del env["SHOP_SETTLE"]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "interrupted: reconcile-failed: " in done.stdout and "done: paid A (settled) / paid B" in done.stdout


def test_rerun_asks_reconcile_first(shop, store):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    key = f"{turn.id}:1.1"
    assert turn.resume(rerun=["pay"]) == "done: paid A (settled) / paid B"  # it had taken effect: not run again
    assert shop.rows("paid") == [(key, "A"), (f"{turn.id}:1.2", "B")]
    turn = crashed_turn(shop, store, SHOP_KILL="before-effect")
    key = f"{turn.id}:1.1"
    assert turn.resume(rerun=["pay"]) == "done: paid A / paid B"  # it had not: it runs again, same key
    assert [(k, p) for k, p in shop.rows("paid") if k.startswith(turn.id)] == [(key, "A"), (f"{turn.id}:1.2", "B")]
    assert [k for k, _ in shop.rows("settled") if k.startswith(turn.id)] == [key]


def lower_to_upper():
    """A plugin that rewrites a payment's name before the tool runs: a change the record must keep."""
    return Plugin("upper", tool_call=lambda event: Change(inputs={"payment": event.input["payment"].upper()},
                                                        note="payments are upper case"))


@pytest.mark.parametrize(("tool_name", "shown"), [("pay", "paid A (settled)"),
                                                   ("charge", "The tool was started but its result is unknown")])
def test_a_started_tool_settled_on_resume_keeps_the_changes_that_shaped_its_input(shop, store, call_records,
                                                                                  tool_name, shown):
    def reply(request):
        last = request.messages[-1]
        if last["role"] == "tool":
            return "done: " + " / ".join(m["content"] for m in request.messages if m["role"] == "tool")
        return tool_call(tool_name, {"payment": "a"})

    functai.configure(client=ScriptedLM(reply=reply))
    with functai.settings(plugins=[lower_to_upper()]):
        turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
        assert turn.resume().startswith("done: " + shown)
    assert shop.rows("paid") == [(f"{turn.id}:1.1", "A")]
    record = call_records.last()
    assert record.tool_calls[0]["input"] == {"payment": "A"}  # as it ran, not as the model asked
    changes = [c for c in record.changes if c.get("hook") == "tool_call"]
    assert len(changes) == 1 and changes[0]["plugin"] == "upper" and changes[0]["note"] == "payments are upper case"


def test_reconcile_is_not_asked_about_a_tool_that_finished(shop, store):
    forget(store)
    died(lambda: (kill_after_result(), shop.desk.conversation("c", store=store)("pay A and B")))
    turn = shop.desk.conversation("c", store=store).all_turns()[-1]
    assert turn.state == "interrupted"
    assert turn.resume() == "done: paid A / paid B"
    assert shop.rows("settled") == []
    assert shop.rows("paid") == [(f"{turn.id}:1.1", "A"), (f"{turn.id}:1.2", "B")]


def test_reconcile_in_an_async_resume_and_from_the_command(shop, store, tmp_path):
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")
    assert asyncio.run(turn.aresume()) == "done: paid A (settled) / paid B"
    turn = crashed_turn(shop, store, SHOP_KILL="after-effect")  # a second turn, resumed by `functai resume`
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    forget(store)
    done = subprocess.run([sys.executable, "-m", "functai", "resume", store, "c"], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert "done: paid A (settled) / paid B" in done.stdout
    assert [key for key, _ in shop.rows("paid")].count(f"{turn.id}:1.1") == 1


def test_an_async_reconcile_settles_in_a_plain_and_an_async_resume(shop, store):
    for resume in (lambda turn: turn.resume(), lambda turn: asyncio.run(turn.aresume())):
        turn = crashed_turn(shop, store, SHOP_TOOL="apay", SHOP_KILL="after-effect")
        assert resume(turn) == "done: paid A (settled) / paid B"  # the model's first reply is the recorded one
        key = f"{turn.id}:1.1"
        assert (key, key) in shop.rows("settled")
        assert [k for k, _ in shop.rows("paid")].count(key) == 1


def test_a_tool_inside_an_ai_function_tool_is_reconciled_and_the_replies_stay_in_step(shop, store):
    """The turn asks `clerk` (an AI function as a tool), whose own call pays; the process dies
    inside the payment. The clerk runs again on resume: its recorded reply is reused (the turn's
    own call is not handed the clerk's reply), and the payment is settled by its reconcile."""

    @ai(tools=[shop.pay])
    def clerk(request: str) -> str:
        """Clerk."""

    @ai(tools=[clerk])
    def counter(request: str) -> str:
        """Counter."""

    def reply(request):
        last = request.messages[-1]
        if request.messages[0]["content"] == "Clerk.":
            return "clerk: " + last["content"] if last["role"] == "tool" else tool_call("pay", {"payment": "A"})
        return "counter: " + last["content"] if last["role"] == "tool" else tool_call("clerk", {"request": "pay A"})

    functai.configure(client=ScriptedLM(reply=reply))
    forget(store)
    died(lambda: counter.conversation("n", store=store)("pay A"), SHOP_KILL="after-effect")
    turn = counter.conversation("n", store=store).all_turns()[-1]
    assert turn.resume() == "counter: clerk: paid A (settled)"
    key = f"{turn.id}:2.1"  # the clerk's call is the turn's second call
    assert shop.rows("paid") == [(key, "A")] and shop.rows("settled") == [(key, key)]


def test_reconcile_is_refused_where_it_cannot_help():
    def settle(key, input):
        return None

    with pytest.raises(ValueError, match="not needed"):
        @tool(effects="reads", reconcile=settle)
        def look(order: str) -> str:
            """Look."""
            return "ok"

    with pytest.raises(TypeError, match="reconcile"):
        tool(lambda order: order, effects="changes", reconcile="ledger")  # type: ignore[call-overload]

    @ai
    def clerk(request: str) -> str:
        """Clerk."""

    with pytest.raises(TypeError, match="AI function used as a tool takes no reconcile"):
        tool(clerk, effects="changes", reconcile=settle)  # type: ignore[call-overload]

    @tool(reconcile=settle)  # undeclared effects count as changes
    def pay(payment: str) -> str:
        """Pay."""
        return "paid"

    assert pay.reconcile is settle


def test_a_finished_ai_function_tool_reused_on_resume_keeps_every_later_reply_and_key_in_place(install):
    install(functai_approval.plugin)
    ran = []

    @tool(effects="reads")
    def look(q: str) -> str:
        """Look."""
        ran.append(("look", functai.tool_key()))
        return "looked " + q

    @tool(effects="changes")
    def pay(payment: str) -> str:
        """Pay."""
        ran.append(("pay", functai.tool_key()))
        return "paid " + payment

    @ai(tools=[look])
    def clerk(request: str) -> str:
        """Look things up."""

    @ai(tools=[pay])
    def payer(request: str) -> str:
        """Pay."""

    @ai(tools=[clerk, payer])
    def desk(request: str) -> str:
        """Desk."""

    def reply(request):
        system, last = request.messages[0]["content"], request.messages[-1]
        if system.startswith("Look things"):
            return "clerk done" if last["role"] == "tool" else tool_call("look", {"q": "x"})
        if system.startswith("Pay."):
            return "payer done" if last["role"] == "tool" else tool_call("pay", {"payment": "A"})
        done = [m for m in request.messages if m["role"] == "tool"]
        if not done:
            return tool_call("clerk", {"request": "look"})
        return tool_call("payer", {"request": "pay A"}) if len(done) == 1 else "desk done"

    functai.configure(client=ScriptedLM(reply=reply))
    chat = desk.conversation("nested-keys", approve=["pay"])
    with pytest.raises(Waiting) as waiting:
        chat("go")
    turn = waiting.value.turn
    turn.approve()
    assert turn.resume() == "desk done"  # not the clerk's recorded reply read in desk's place
    turn_id = turn.id
    assert ran == [("look", f"{turn_id}:2.1"), ("pay", f"{turn_id}:3.1")]  # pay ran once, at its own place
