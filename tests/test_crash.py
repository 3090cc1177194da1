"""Crashes: a writer of turns, call records and ratings SIGKILLed at random moments.

After each kill: the conversation opens, nothing the writer was told was
written is missing, a turn left running is marked interrupted and can be
resumed (or abandoned), and a new turn can be sent.
"""

import os
import random
import select
import signal
import time

import pytest

import functai
from functai import ai, tool
from functai._stores import FolderStore
from functai._evaluation.ratings import read_ratings
from functai.testing import ScriptedLM, tool_call

KILLS = 20

BOOKED: list[str] = []  # where the tool writes (a file, set by the test)


@tool(effects="changes")
def book(slot: str) -> str:
    """Book a slot."""
    with open(BOOKED[0], "a") as ledger:
        ledger.write(slot + "\n")
    time.sleep(0.003)  # a tool that takes a moment: kills land inside it too
    return f"booked {slot}"


@ai(tools=[book])
def desk(request: str) -> str:
    """Book what is asked."""


def model():
    """Asks for the tool once per turn, then answers."""

    def reply(request):
        last = request.messages[-1]
        if last["role"] == "tool":
            return "done: " + last["content"]
        return tool_call("book", {"slot": last["content"][-12:]})

    return ScriptedLM(reply=reply)


def writer(store, log, ack, tag):
    """The child: turns, each logged and rated, acknowledging each once the call returned."""
    functai.configure(client=model(), log_calls=log)
    chat = desk.conversation("crash", store=FolderStore(store))
    os.write(ack, b"ready\n")
    for n in range(10_000):
        chat(f"{tag}-{n}")
        head = chat.head
        os.write(ack, f"turn {head.id}\ncall {head.call}\n".encode())
        functai.rate(head.call, good=n % 2 == 0, by="crash", log=log)
        os.write(ack, f"rating {head.call}\n".encode())


def run_writer(store, log, tag, rng):
    """Fork a writer, SIGKILL it at a random moment; what it acknowledged, and its pid."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        status = 0
        try:
            os.close(read_end)
            writer(store, log, write_end, tag)
        except BaseException:  # noqa: BLE001
            status = 1
        os._exit(status)
    os.close(write_end)
    data = b""
    deadline = time.monotonic() + 60
    while b"ready\n" not in data and time.monotonic() < deadline:
        ready, _, _ = select.select([read_end], [], [], 1)
        if ready:
            data += os.read(read_end, 65536)
    time.sleep(rng.uniform(0, 0.12))
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        data += chunk
    os.close(read_end)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "the writer ended by itself"
    acked: dict[str, set[str]] = {"turn": set(), "call": set(), "rating": set()}
    for line in data.decode().splitlines():
        if line != "ready" and line.endswith(tuple("0123456789abcdef")):
            kind, _, value = line.partition(" ")
            acked[kind].add(value)
    return acked, pid


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_twenty_sigkills_lose_nothing_acknowledged(tmp_path):
    BOOKED[:] = [str(tmp_path / "booked.txt")]
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    rng = random.Random(1234)
    acked: dict[str, set[str]] = {"turn": set(), "call": set(), "rating": set()}
    interrupted = resumed = abandoned = 0
    functai.configure(client=model())  # this process keeps no call log: the writers' log is theirs alone
    for kill in range(KILLS):
        got, pid = run_writer(store, log, f"w{kill}", rng)
        for kind in acked:
            acked[kind] |= got[kind]

        chat = desk.conversation("crash", store=FolderStore(store))  # opens, whatever the kill left
        turns = {turn.id: turn for turn in chat.all_turns()}
        missing = [t for t in acked["turn"] if t not in turns or turns[t].state != "done"]
        assert not missing, f"kill {kill}: acknowledged turns missing or not done: {missing}"
        calls = {record.id for record in functai.read_calls(log)}
        assert acked["call"] <= calls, f"kill {kill}: acknowledged call records missing"
        assert acked["rating"] <= set(read_ratings(log)), f"kill {kill}: acknowledged ratings missing"

        left = [turn for turn in turns.values() if turn.state in ("running", "interrupted")]
        assert all(turn.state == "interrupted" for turn in left), "a dead writer's turn still shows running"
        for turn in left:
            assert f"pid {pid}" in turn.why
            interrupted += 1
            if kill % 3 == 2:
                turn.abandon(reason="crash test")
                abandoned += 1
            else:
                assert turn.resume().startswith("done: ")
                resumed += 1
        assert chat(f"check-{kill}").startswith("done: booked")  # a new turn can be sent
        assert chat.head.state == "done"

    assert interrupted >= 3 and resumed >= 1  # the kills did land inside turns
    final = desk.conversation("crash", store=FolderStore(store)).all_turns()
    assert {turn.state for turn in final} <= {"done", "abandoned"}
    assert acked["turn"] and acked["rating"]
