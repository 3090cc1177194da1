"""Waiting turns: saved, answered and resumed — in this process or another one."""

import json
import os
import subprocess
import sys
import textwrap

import functai_approval
import pytest

import functai
from functai import FunctAIError, Waiting
from functai._stores import open_store
from functai.testing import ScriptedLM, tool_call

SHOP = textwrap.dedent('''
    import json, os
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM

    if os.environ.get("SHOP_SCRIPT"):  # the CLI's process answers from this script
        functai.configure(client=ScriptedLM(json.loads(os.environ["SHOP_SCRIPT"])))

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        with open(os.environ["SHOP_LEDGER"], "a") as ledger:
            ledger.write(order + "\\n")
        return f"refunded {order}"

    @tool(effects="reads")
    def order_status(order: str) -> str:
        """Look an order up."""
        return "delivered"

    @ai(tools=[refund, order_status])
    def support(request: str) -> str:
        """Support the customer."""

    @ai
    def echo(text: str) -> str:
        """Echo."""
''')


@pytest.fixture
def shop(tmp_path, monkeypatch, install):
    (tmp_path / "shop.py").write_text(SHOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    sys.modules.pop("shop", None)
    install(functai_approval.plugin)
    import shop

    yield shop
    sys.modules.pop("shop", None)


def ledger(tmp_path):
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def run_python(code, tmp_path):
    env = {**os.environ, "SHOP_LEDGER": str(tmp_path / "ledger.txt"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    env["FUNCTAI_LOAD_PLUGINS"] = "approval"  # the plugins the shop fixture installs, whatever else is installed
    env.pop("FUNCTAI_DISABLE_PLUGINS", None)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def test_a_waiting_turn_answered_and_resumed_in_process(shop, tmp_path):
    lm = ScriptedLM([tool_call("order_status", {"order": "A1"}), tool_call("refund", {"order": "A1"}), "Refunded A1."])
    functai.configure(client=lm)
    chat = shop.support.conversation("c1", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1, please")
    waiting = info.value
    assert waiting.code == "turn-waiting"
    assert waiting.turn.state == "waiting" and chat.head == waiting.turn
    (approval,) = waiting.approvals
    assert {k: approval[k] for k in ("name", "input", "effects", "path", "plugin")} == {
        "name": "refund", "input": {"order": "A1"}, "effects": "changes", "path": "support/refund",
        "plugin": "approval"}
    assert ledger(tmp_path) == [] and len(lm.requests) == 2

    with pytest.raises(FunctAIError) as busy:
        chat("Something else")
    assert busy.value.code == "conversation-busy"
    with pytest.raises(FunctAIError) as early:
        waiting.turn.resume()
    assert early.value.code == "turn-waiting"

    waiting.turn.approve(by="manager")
    assert waiting.turn.resume() == "Refunded A1."
    assert ledger(tmp_path) == ["A1"]
    assert len(lm.requests) == 3  # the two replies paid for were reused
    assert chat.head.state == "done" and chat.head.outputs == {"output": "Refunded A1."}


def test_a_denied_approval_shows_the_model_the_refusal(shop, tmp_path):
    lm = ScriptedLM([tool_call("refund", {"order": "A1"}), "I could not refund it."])
    functai.configure(client=lm)
    chat = shop.support.conversation("c2", approve=["refund"])
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    info.value.turn.deny(reason="refunds need a receipt")
    assert info.value.turn.resume() == "I could not refund it."
    assert ledger(tmp_path) == []
    tool_message = [m for m in lm.requests[-1].messages if m["role"] == "tool"][0]
    assert tool_message["content"] == "The person did not allow this call. Reason: refunds need a receipt"


def test_a_waiting_turn_resumed_by_a_second_os_process(shop, tmp_path, durable_store):
    store = durable_store  # the only thing the two processes share
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]))
    chat = shop.support.conversation("c3", store=store, approve="changes")
    with pytest.raises(Waiting):
        chat("Refund A1")
    assert ledger(tmp_path) == []

    out = run_python(f'''
        import functai, shop
        from functai.testing import ScriptedLM
        lm = ScriptedLM(["Refunded A1."])
        functai.configure(client=lm)
        chat = shop.support.conversation("c3", store={store!r}, approve="changes")
        turn = chat.head
        print(turn.state, [a["name"] for a in turn.approvals])
        turn.approve(by="manager")
        print(turn.resume())
        print(len(lm.requests))
    ''', tmp_path)
    assert out == ["waiting ['refund']", "Refunded A1.", "1"]
    assert ledger(tmp_path) == ["A1"]  # ran exactly once, in the second process
    assert chat.head.state == "done" and chat.head.outputs == {"output": "Refunded A1."}
    records = open_store(store).read("c3")
    tools = [(r["state"], r["entry"]["name"]) for r in records if r["kind"] == "tool"]
    assert tools == [("started", "refund"), ("done", "refund")]
    answers = [r for r in records if r["kind"] == "answer"]
    assert answers[0]["by"] == "manager" and answers[0]["allow"] is True


def test_a_tool_that_started_but_never_finished_is_not_run_again(shop, tmp_path, durable_store):
    store = durable_store
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]))
    chat = shop.support.conversation("c4", store=store, approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    info.value.turn.approve()
    # Resume in a process that dies inside the tool (after "started" is recorded).
    run_python(f'''
        import os, functai, shop
        from functai.testing import ScriptedLM
        functai.configure(client=ScriptedLM([]))
        def crash(order):
            os._exit(0)
        shop.refund.fn = crash
        chat = shop.support.conversation("c4", store={store!r}, approve="changes")
        chat.head.resume()
    ''', tmp_path)
    records = open_store(store).read("c4")
    assert [r["state"] for r in records if r["kind"] == "tool"] == ["started"]
    # The process is gone: opening the conversation marks the turn interrupted, and a resume
    # tells the model the tool's result is unknown instead of running it again.
    lm = ScriptedLM(["It may not have gone through."])
    functai.configure(client=lm)
    view = shop.support.conversation("c4", store=store, approve="changes")
    assert view.head.state == "interrupted" and "is gone" in view.head.why
    assert view.head.resume() == "It may not have gone through."
    assert ledger(tmp_path) == []
    (tool_message,) = [m for m in lm.requests[-1].messages if m["role"] == "tool"]
    assert tool_message["content"] == (
        "The tool was started but its result is unknown; it may or may not have taken effect.")


def test_four_processes_sending_100_turns_each_lose_nothing(shop, tmp_path, durable_store):
    store = durable_store
    code = f'''
        import sys, functai, shop
        from functai.testing import ScriptedLM
        functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
        chat = shop.echo.conversation("shared", store={store!r}, context=functai.last_turns(3))
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(100):
            chat(f"{{sys.argv[1]}}-{{i}}")
    '''
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), tag], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in "pqrs"]
    for proc in procs:  # all four running before any sends
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.close()
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    if not store.startswith(("sqlite:", "postgresql:")):  # the folder store: every line well-formed
        lines = (tmp_path / "store" / "shared.jsonl").read_text().splitlines()
        assert [json.loads(line) for line in lines] == open_store(store).read("shared")
    records = open_store(store).read("shared")
    turns = [r for r in records if r["kind"] == "turn"]
    assert sorted(t["inputs"]["text"] for t in turns) == sorted(f"{p}-{i}" for p in "pqrs" for i in range(100))
    ends = {r["turn"]: r["state"] for r in records if r["kind"] == "end"}
    assert len(ends) == 400 and set(ends.values()) == {"done"}
    view = shop.echo.conversation("shared", store=store)
    assert len(view.all_turns()) == 400


def functai_cli(args, tmp_path, script=None):
    env = {**os.environ, "SHOP_LEDGER": str(tmp_path / "ledger.txt"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    if script is not None:
        env["SHOP_SCRIPT"] = json.dumps(script)
    return subprocess.run([sys.executable, "-m", "functai", *args], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path))


def test_the_cli_shows_the_tree_and_approves_from_another_process(shop, tmp_path, durable_store):
    store = durable_store
    functai.configure(client=ScriptedLM(["A1", tool_call("refund", {"order": "A1"})]))
    chat = shop.support.conversation("c5", store=store, approve="changes")
    chat("hello")
    chat.remember("notes", "mode", "careful")
    with pytest.raises(Waiting):
        chat("Refund A1")
    shown = functai_cli(["conversation", store, "c5"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "conversation c5 (shop:support, 2 turns)"
    assert " done " in lines[1] and "→ A1" in lines[1]
    assert " waiting " in lines[2] and "waits for: refund" in lines[2] and "(approval)" in lines[2]
    assert 'notes/mode (every branch): careful' in shown.stdout

    done = functai_cli(["approve", store, "c5", "--deny", "no receipt", "--by", "ops"], tmp_path,
                       script=["Sorry, no refund without a receipt."])
    assert done.returncode == 0, done.stderr
    assert "refund" in done.stdout and "denied (no receipt)" in done.stdout
    assert "Sorry, no refund without a receipt." in done.stdout
    assert ledger(tmp_path) == []  # the denial held, though the CLI's process sets no approve rule
    assert chat.head.state == "done"


def test_a_wait_inside_a_nested_ai_function_tool_resumes_it(shop, tmp_path, install):
    import functai_approval

    from functai import ai

    install(functai_approval.plugin)

    @ai(tools=[shop.support])
    def desk(request: str) -> str:
        """Desk: hand requests to support."""

    def reply(request):
        system, last = request.messages[0]["content"], request.messages[-1]
        if system.startswith("Desk"):
            return "desk: " + last["content"] if last["role"] == "tool" else tool_call("support", {"request": "A1"})
        return "support: " + last["content"] if last["role"] == "tool" else tool_call("refund", {"order": "A1"})

    functai.configure(client=ScriptedLM(reply=reply))
    chat = desk.conversation("nested", approve=["refund"])
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    info.value.turn.approve()
    assert info.value.turn.resume() == "desk: support: refunded A1"
    assert ledger(tmp_path) == ["A1"]


def test_resuming_where_the_approve_rule_is_not_set_keeps_the_turns_rule(shop, tmp_path):
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), tool_call("refund", {"order": "B2"}),
                                         "done"]))
    chat = shop.support.conversation("rule", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("refund A1 and B2")
    info.value.turn.approve()
    bare = shop.support.conversation("rule")  # a process that knows nothing of approve="changes"
    with pytest.raises(Waiting) as again:
        bare.head.resume()
    assert [a["input"] for a in again.value.approvals] == [{"order": "B2"}]
    assert ledger(tmp_path) == ["A1"]  # B2 was never approved, so it never ran


def test_a_turn_that_waited_with_plugins_is_not_resumed_without_them(shop):
    from functai import Plugin

    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"})]))
    guard = Plugin("guard", tool_call=lambda t: None)
    chat = shop.support.conversation("plugins", approve="changes", plugins=[guard])
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    info.value.turn.approve()
    with pytest.raises(FunctAIError) as refused:
        shop.support.conversation("plugins", approve="changes").head.resume()
    assert refused.value.code == "resume-settings" and "guard" in refused.value.message


def test_conversation_busy_holds_for_every_view(shop):
    functai.configure(client=ScriptedLM(["hello", tool_call("refund", {"order": "A1"})]))
    first = shop.support.conversation("busy")
    first("hi")
    second = shop.support.conversation("busy", approve="changes")
    with pytest.raises(Waiting):
        second("refund A1")
    with pytest.raises(FunctAIError) as info:
        first("something else")
    assert info.value.code == "conversation-busy"


def test_a_conversation_id_belongs_to_one_function(shop, tmp_path):
    functai.configure(client=ScriptedLM(["ok"]))
    shop.echo.conversation("mine", store=str(tmp_path / "s"))("hello")
    with pytest.raises(FunctAIError) as info:
        shop.support.conversation("mine", store=str(tmp_path / "s"))
    assert info.value.code == "conversation-function" and "shop:echo" in info.value.message


def test_a_turn_resumed_with_a_narrower_rule_keeps_the_care_it_started_with(shop, tmp_path):
    """Started under approve="all", resumed where approve=["order_status"]: refund is still asked about."""
    functai.configure(client=ScriptedLM([tool_call("order_status", {"order": "A1"}),
                                         tool_call("refund", {"order": "A1"}), "Refunded."]))
    chat = shop.support.conversation("care", approve="all")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    assert [a["name"] for a in info.value.approvals] == ["order_status"]
    info.value.turn.approve()
    narrower = shop.support.conversation("care", approve=["order_status"])
    with pytest.raises(Waiting) as again:
        narrower.head.resume()
    assert [a["name"] for a in again.value.approvals] == ["refund"]  # the recorded "all" selects it
    assert ledger(tmp_path) == []
    again.value.turn.approve()
    assert narrower.head.resume() == "Refunded."
    assert ledger(tmp_path) == ["A1"]


def test_a_resumed_turn_runs_a_tool_only_when_both_rules_allow_it(shop, tmp_path):
    """Started under approve="all" (a person asks), resumed under an approve function that
    allows everything: refund is put to the function *and* still waits for a person."""
    functai.configure(client=ScriptedLM([tool_call("order_status", {"order": "A1"}),
                                         tool_call("refund", {"order": "A1"}), "Done."]))
    chat = shop.support.conversation("both", approve="all")
    with pytest.raises(Waiting) as info:
        chat("refund A1")
    info.value.turn.approve()
    asked = []

    def decide(tool):
        asked.append(tool.name)
        return True

    view = shop.support.conversation("both", approve=decide)
    with pytest.raises(Waiting) as again:
        view.head.resume()
    assert asked == ["refund"]  # the function decides what it selects (order_status only reads)
    assert [a["name"] for a in again.value.approvals] == ["refund"]  # and the recorded rule asks a person
    assert ledger(tmp_path) == []
    again.value.turn.deny(reason="no")
    assert view.head.resume() == "Done."
    assert ledger(tmp_path) == []


def test_an_interrupted_turn_is_not_resumed_without_the_plugins_it_started_with(shop, tmp_path):
    store = str(tmp_path / "store")
    run_python(f'''
        import os, functai, shop
        from functai import Plugin
        from functai.testing import ScriptedLM, tool_call
        functai.configure(client=ScriptedLM([tool_call("refund", {{"order": "A1"}})]))
        shop.refund.fn = lambda order: os._exit(0)   # the process dies inside the tool
        guard = Plugin("guard", tool_call=lambda t: None)
        shop.support.conversation("guarded", store={store!r}, plugins=[guard])("refund A1")
    ''', tmp_path)
    view = shop.support.conversation("guarded", store=store)
    assert view.head.state == "interrupted"
    with pytest.raises(FunctAIError) as refused:
        view.head.resume()
    assert refused.value.code == "resume-settings" and "guard" in refused.value.message
    assert view.head.state == "interrupted"  # nothing was claimed


def test_a_turn_that_waits_and_resumes_has_one_call_record(shop, tmp_path):
    log = tmp_path / "calls"
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded A1."]),
                      log_calls=str(log))
    chat = shop.support.conversation("one-record", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    assert list(functai.read_calls(str(log))) == []  # nothing yet: the turn has not ended
    info.value.turn.approve(by="manager")
    assert info.value.turn.resume() == "Refunded A1."
    (record,) = functai.read_calls(str(log))
    assert record.id == chat.head.call and record.error is None and record.output == "Refunded A1."
    (waited,) = record.conversation["waited"]
    assert [a["name"] for a in waited["approvals"]] == ["refund"]
    key = waited["approvals"][0]["key"]
    assert waited["answers"][key]["allow"] is True and waited["answers"][key]["by"] == "manager"
    assert [(t["name"], t["output"]) for t in record.tool_calls] == [("refund", "refunded A1")]
    assert record.attempts == 2 and record.started <= waited["at"]


def test_a_resumed_turn_keeps_the_reasoning_of_the_replies_it_reuses(shop, tmp_path):
    from functai import Reply

    log = tmp_path / "calls"
    first = Reply(tool_calls=tool_call("refund", {"order": "A1"}).tool_calls, reasoning="A1 is late: refund it.")
    functai.configure(client=ScriptedLM([first, Reply(text="Refunded A1.", reasoning="It went through.")]),
                      log_calls=str(log))
    chat = shop.support.conversation("thinking", approve="changes")
    with pytest.raises(Waiting) as info:
        chat("Refund A1")
    info.value.turn.approve(by="manager")
    assert info.value.turn.resume() == "Refunded A1."
    (record,) = functai.read_calls(str(log))
    assert record.reasoning == "A1 is late: refund it.\n\nIt went through."  # the reused reply's too
    (saved,) = [r["reply"] for r in open_store(None).read("thinking") if r.get("kind") == "reply" and r["n"] == 1]
    assert saved["reasoning"] == "A1 is late: refund it." and "refusal" not in saved
