"""A turn sent with a key is made once: sent again under the key — by a retried step of an engine,
another thread, another process — the turn already made answers, and no model or tool is asked twice."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import threading

import functai_approval
import pytest

import functai
from functai import FunctAIError, ai, tool
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")


@dataclasses.dataclass
class Verdict:
    approved: bool
    reason: str


@ai
def review(claim: str) -> Verdict:
    """Review the claim."""


@ai
def lookup(key: str) -> str:
    """Look the key up."""


def verdicts() -> ScriptedLM:
    return ScriptedLM(['{"approved": true, "reason": "receipt attached"}', '{"approved": false, "reason": "late"}'])


@pytest.mark.parametrize("way", ["send", "call", "acall"])
def test_a_turn_sent_again_under_its_key_is_answered_by_the_turn_made(way, tmp_path):
    lm = verdicts()
    chat = review.conversation("claims", store=str(tmp_path / "store"), client=lm)

    def send(claim: str, key: str) -> Verdict:
        if way == "send":
            return chat.send({"claim": claim}, key=key)
        if way == "call":
            return chat(claim, key=key)
        return asyncio.run(chat.acall(claim, key=key))

    first = send("refund A1", "claim-A1")
    assert send("refund A1", "claim-A1") == first == Verdict(True, "receipt attached")
    assert len(lm.requests) == 1 and len(chat.all_turns()) == 1
    assert send("refund B2", "claim-B2") == Verdict(False, "late")  # another key: another turn
    assert len(lm.requests) == 2


def test_another_process_sees_the_key_and_a_bad_key_is_refused(tmp_path):
    store = str(tmp_path / "store")
    review.conversation("claims", store=store, client=verdicts()).send({"claim": "refund A1"}, key="k1")
    elsewhere = ScriptedLM([])  # a second view over the same folder, as another process opens it
    answer = review.conversation("claims", store=store, client=elsewhere).send({"claim": "refund A1"}, key="k1")
    assert answer == Verdict(True, "receipt attached") and elsewhere.requests == []
    for bad in ("", 7, "x" * 201):
        with pytest.raises(TypeError):
            review.conversation("claims", store=store, client=elsewhere).send({"claim": "c"}, key=bad)


def test_an_input_named_key_stays_an_input(tmp_path):
    lm = ScriptedLM(["found", "found again", "found once"])
    chat = lookup.conversation("keys", store=functai.MemoryStore(), client=lm)
    assert chat(key="A1") == "found" and chat(key="A1") == "found again"  # the input, not a turn key
    assert chat.send({"key": "A1"}, key="once") == chat.send({"key": "A1"}, key="once")
    assert len(lm.requests) == 3


def test_a_failed_turn_sent_again_under_its_key_gives_its_error_and_asks_nothing(tmp_path):
    lm = ScriptedLM(["not JSON at all", "still not JSON"])
    chat = review.conversation("claims", store=str(tmp_path / "store"), client=lm, retries=0)
    with pytest.raises(FunctAIError) as first:
        chat.send({"claim": "refund A1"}, key="k")
    asked = len(lm.requests)
    with pytest.raises(FunctAIError) as again:
        chat.send({"claim": "refund A1"}, key="k")
    assert again.value.code == first.value.code == "output-invalid" and len(lm.requests) == asked
    assert "made under the key 'k'" in again.value.message


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@ai(tools=[refund])
def desk(request: str) -> str:
    """Help the customer."""


def test_a_waiting_turn_waits_again_and_once_answered_goes_on(install):
    install(functai_approval.plugin)
    lm = ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."])
    chat = desk.conversation("w", store=functai.MemoryStore(), client=lm, approve="changes")
    with pytest.raises(functai.Waiting) as first:
        chat.send({"request": "refund A1"}, key="t1")
    with pytest.raises(functai.Waiting) as again:
        chat.send({"request": "refund A1"}, key="t1")
    assert again.value.turn.id == first.value.turn.id and "made under the key 't1'" in str(again.value)
    first.value.turn.approve()
    assert chat.send({"request": "refund A1"}, key="t1") == "Refunded."  # resumed: the answered turn goes on
    assert chat.send({"request": "refund A1"}, key="t1") == "Refunded." and len(lm.requests) == 2


def test_an_answered_turn_another_view_resumes_first_gives_its_answer_when_sent_again(install, tmp_path, monkeypatch):
    """Between reading the answered turn and claiming it, another process resumes it to its end:
    the send looks again and gives the turn's answer, neither refused nor sent twice."""
    from functai._conversations import leases

    install(functai_approval.plugin)
    store = str(tmp_path / "store")
    lm = ScriptedLM([tool_call("refund", {"order": "A1"}), "Refunded."])
    chat = desk.conversation("w", store=store, client=lm, approve="changes")
    with pytest.raises(functai.Waiting) as waiting:
        chat.send({"request": "refund A1"}, key="t1")
    waiting.value.turn.approve()
    other = desk.conversation("w", store=store, client=lm, approve="changes")
    hold, claims = leases.hold, []

    def first_the_other(*args):
        claims.append(args)
        if len(claims) == 2:  # the send's claim found the key; before its resume claims the turn, the other does
            assert other.head.resume() == "Refunded."
        hold(*args)

    monkeypatch.setattr(leases, "hold", first_the_other)
    assert chat.send({"request": "refund A1"}, key="t1") == "Refunded." and len(claims) == 3
    assert len(lm.requests) == 2 and [t.state for t in chat.all_turns()] == ["done"]


def test_threads_sending_one_key_at_once_make_one_turn(tmp_path):
    lm = ScriptedLM(reply=lambda request: '{"approved": true, "reason": "ok"}', delay=0.2)
    store = str(tmp_path / "store")
    outcomes: list[object] = []
    start = threading.Barrier(4)

    def one() -> None:
        view = review.conversation("claims", store=store, client=lm)  # a view each, as separate processes have
        start.wait()
        try:
            outcomes.append(view.send({"claim": "refund A1"}, key="once"))
        except FunctAIError as error:
            outcomes.append(error.code)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(lm.requests) == 1
    assert len(functai.Conversation.open("claims", store).all_turns()) == 1
    assert all(o in (Verdict(True, "ok"), "conversation-busy") for o in outcomes) and Verdict(True, "ok") in outcomes


KILLED = textwrap.dedent('''
    import os, signal
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM, tool_call

    @tool(effects="changes")
    def cancel(order: str) -> str:
        """Cancel an order."""
        if os.environ.get("DIE_IN_TOOL"):
            os.kill(os.getpid(), signal.SIGKILL)
        return "cancelled"

    @ai(tools=[cancel])
    def desk(request: str) -> str:
        """Help the customer."""

    def main():
        chat = desk.conversation("k", store=os.environ["STORE"], client=ScriptedLM([tool_call("cancel", {"order": "A1"})]))
        chat.send({"request": "cancel A1"}, key="step-1")
''')


def test_a_turn_whose_process_died_is_resumed_when_sent_again_under_its_key(tmp_path, monkeypatch):
    (tmp_path / "killed_app.py").write_text(KILLED)
    store = str(tmp_path / "store")
    env = {**os.environ, "STORE": store, "DIE_IN_TOOL": "1", "FUNCTAI_LOAD_PLUGINS": "",  # none installed, as here
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    process = subprocess.run([sys.executable, "-c", "import killed_app; killed_app.main()"], env=env, timeout=120)
    assert process.returncode == -signal.SIGKILL
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("killed_app", None)
    import killed_app

    lm = ScriptedLM(["It may have been cancelled; please check."])
    chat = killed_app.desk.conversation("k", store=store, client=lm)
    assert chat.send({"request": "cancel A1"}, key="step-1") == "It may have been cancelled; please check."
    [turn] = chat.all_turns()  # the turn the dead process made, resumed: no second one
    assert turn.state == "done" and len(lm.requests) == 1
    [told] = [m["content"] for m in lm.requests[0].messages if m.get("role") == "tool"]
    assert "result is unknown" in told and "cancelled" != told  # the started tool was not run again
    sys.modules.pop("killed_app", None)
