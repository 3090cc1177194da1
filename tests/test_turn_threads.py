"""One conversation view shared by threads; every retry loop ends."""

import threading
import time

import pytest

import functai
from functai import FunctAIError, ai
from functai._conversations import held
from functai._stores import MemoryStore, StoreConflict
from functai.testing import ScriptedLM
from store_fixtures import DURABLE, store_url


@ai
def echo(text: str) -> str:
    """Echo."""


def run_threads(target, count):
    """Run ``target(i)`` in ``count`` daemon threads; the errors they raised. A thread
    still running after a minute counts as stuck (daemon: a stuck one never blocks pytest)."""
    errors = []

    def guarded(i):
        try:
            target(i)
        except BaseException as error:  # noqa: BLE001 - reported to the test
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    stuck = [thread for thread in threads if thread.is_alive()]
    assert not stuck, f"{len(stuck)} threads still running after a minute"
    return errors


@pytest.mark.parametrize("where", ["memory", *DURABLE])
def test_four_threads_send_fifty_turns_each_through_one_view(where, tmp_path, request):
    functai.configure(client=ScriptedLM(reply=lambda request: request.messages[-1]["content"]))
    store = None if where == "memory" else store_url(where, tmp_path, request)
    chat = echo.conversation("shared", store=store)

    def send(i):
        for n in range(50):
            chat(f"t{i}-{n}")

    assert run_threads(send, 4) == []
    turns = echo.conversation("shared", store=store).all_turns()
    assert sorted(t.inputs["text"] for t in turns) == sorted(f"t{i}-{n}" for i in range(4) for n in range(50))
    assert {t.state for t in turns} == {"done"}
    # The view's turns ran one at a time, each continuing the one before: one branch of 200.
    assert len(chat.turns) == 200 and [t.parent for t in chat.turns[1:]] == [t.id for t in chat.turns[:-1]]
    assert chat.turns[-1].id == turns[-1].id


def test_threads_reading_a_view_while_others_send_see_each_record_once(tmp_path):
    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
    chat = echo.conversation("readers", store=str(tmp_path / "store"))
    done = threading.Event()

    def work(i):
        if i < 2:
            for n in range(40):
                chat(f"{i}-{n}")
        else:
            while not done.is_set():
                chat.all_turns()
                chat.entries("x", "y")

    def senders_then_stop(i):
        try:
            work(i)
        finally:
            if i < 2:
                counts.append(i)
                if len(counts) == 2:
                    done.set()

    counts = []
    assert run_threads(senders_then_stop, 4) == []
    assert len(chat.all_turns()) == 80
    assert chat._history.count == len(chat.store.read("readers"))  # each record applied once


class AlwaysBehind(MemoryStore):
    """A store where another writer always got there first."""

    def append(self, conversation, records, *, expect=None, sync=False):
        if expect is not None:
            super().append(conversation, [{"functai_conversation": 1, "kind": "noise"}])
            raise StoreConflict(count=self.count(conversation), conversation=conversation)
        return super().append(conversation, records, sync=sync)


def test_a_retry_loop_that_never_wins_ends_in_a_coded_error(monkeypatch):
    monkeypatch.setattr(held, "MAX_TRIES", 5)
    functai.configure(client=ScriptedLM(["never asked"]))
    chat = echo.conversation("contended", store=AlwaysBehind())
    with pytest.raises(FunctAIError) as info:
        chat("hello")
    assert info.value.code == "store-conflict" and "5 times" in info.value.message
