"""``event.atomically``: a check and the entry acting on it are one step against every other
writer — threads on other branches here; processes in the budget plugin's tests."""

from __future__ import annotations

import threading
import time

import pytest

import functai
from functai import ai
from functai.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("functai_isolated")

SEATS = 3


@ai
def book(who: str) -> str:
    """Book a seat."""


def seats_plugin() -> functai.Plugin:
    seats = functai.Plugin("seats")

    @seats.request
    def take_a_seat(event):
        def decide():
            taken = event.entries("taken", all_branches=True)
            time.sleep(0.005)  # another thread reads the same entries meanwhile
            if len(taken) >= SEATS:
                raise functai.FunctAIError("no seat left", code="no-seat")
            event.remember("taken", event.call)

        event.atomically(decide)

    return seats


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_threads_on_eight_branches_take_no_more_seats_than_there_are(kind, tmp_path):
    store = functai.MemoryStore() if kind == "memory" else "sqlite:///" + str(tmp_path / "c.db")
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def one(n: int) -> None:
        branch = book.conversation("seats", store=store, client=ScriptedLM(reply=lambda r: "booked"),
                                   plugins=[seats_plugin()], context=functai.last_turns(0))
        start.wait()
        try:
            outcomes.append(branch.continue_from(first)(f"guest {n}"))
        except functai.FunctAIError as error:
            outcomes.append(error.code)

    first_chat = book.conversation("seats", store=store, client=ScriptedLM(reply=lambda r: "booked"),
                                   context=functai.last_turns(0))
    first_chat("the host")
    first = first_chat.head
    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["booked"] * SEATS + ["no-seat"] * (8 - SEATS)
    taken = [e for e in functai.Conversation.open("seats", store).all_entries() if e["kind"] == "taken"]
    assert len(taken) == SEATS


def test_nothing_remembered_is_kept_when_decide_raises():
    plugin = functai.Plugin("p")

    @plugin.request
    def refuse_after_remembering(event):
        def decide():
            event.remember("note", 1)
            raise functai.FunctAIError("no", code="refused-here")

        event.atomically(decide)

    chat = book.conversation("raises", store=functai.MemoryStore(), client=ScriptedLM(reply=lambda r: "x"),
                             plugins=[plugin])
    with pytest.raises(functai.FunctAIError) as raised:
        chat("someone")
    assert raised.value.code == "refused-here"
    assert chat.entries("p", "note") == []


def test_outside_a_conversation_decide_just_runs():
    plugin = functai.Plugin("p")
    ran = []

    @plugin.request
    def note(event):
        ran.append(event.atomically(lambda: "decided"))

    with functai.settings(client=ScriptedLM(reply=lambda r: "x"), plugins=[plugin]):
        book("someone")
    assert ran == ["decided"]


@pytest.mark.parametrize("outcome", ["raises", "keeps nothing"])
def test_a_decision_made_on_records_another_writer_has_passed_is_made_again(outcome, tmp_path):
    """``decide`` first runs on what this view has read. When it keeps nothing (so no
    compare-and-set checks it) or raises, it stands only if nothing new was written meanwhile."""
    store = str(tmp_path / "store")
    plugin = functai.Plugin("gate")
    seen: list[int] = []
    decided: list[int] = []

    @plugin.request
    def wait_for_the_gate(event):
        def decide():
            if not seen:  # another process opens the gate just as this one decides
                functai.Conversation.open("gate", store).remember("gate", "opened", True)
            opened = event.entries("opened", all_branches=True)
            seen.append(len(opened))
            if not opened and outcome == "raises":
                raise functai.FunctAIError("the gate is shut", code="gate-shut")
            return len(opened)

        decided.append(event.atomically(decide))

    chat = book.conversation("gate", store=store, client=ScriptedLM(reply=lambda r: "through"), plugins=[plugin])
    assert chat("someone") == "through"
    assert seen == [0, 1]  # decided on the records it had, then again on the new one
    assert decided == [1]
