"""A store that holds fewer records than a live view read (records removed behind it, a backup put
back) is named at once as ``store-shrunk``: no retry can ever match, so none is made."""

from __future__ import annotations

import os
import time

import pytest

import functai
import functai_approval
from functai.testing import ScriptedLM, tool_call
from store_fixtures import raw_sql


def _cut(store: str, keep: int) -> None:
    """Keep only the first ``keep`` records of conversation 'c', as a person or a restore would."""
    if store.startswith(("sqlite:", "postgresql:")):
        raw_sql(store)(f"DELETE FROM functai_records WHERE conversation = 'c' AND position >= {keep}")
        return
    path = os.path.join(store, "c.jsonl")
    with open(path) as file:
        lines = file.readlines()
    with open(path, "w") as file:
        file.writelines(lines[:keep])


def test_each_write_of_a_live_view_names_a_shrunk_store(durable_store):
    @functai.ai(client=ScriptedLM(["A1", "A2", "A3"]))
    def tutor(question: str) -> str:
        """Teach."""

    chat = tutor.conversation("c", store=durable_store)
    chat("one")
    first = chat._history.count
    chat("two")
    _cut(durable_store, first)
    _refused(lambda: chat("three"))
    again = tutor.conversation("c", store=durable_store)
    assert [turn.inputs["question"] for turn in again.turns if turn.state == "done"] == ["one"]
    assert again("three") == "A3"  # a view opened again goes on from what the store holds


def _refused(write):
    started = time.perf_counter()
    with pytest.raises(functai.FunctAIError) as info:
        write()
    assert info.value.code == "store-shrunk", info.value
    assert "fewer than the" in str(info.value) and "open the conversation again" in str(info.value)
    assert time.perf_counter() - started < 2  # not 200 tries with backoff


@functai.tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@pytest.mark.parametrize("act", ["approve", "deny", "abandon"])
def test_answering_or_abandoning_a_waiting_turn_names_a_shrunk_store(durable_store, install, act):
    install(functai_approval.plugin)

    @functai.ai(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), tools=[refund])
    def support(question: str) -> str:
        """Help."""

    chat = support.conversation("c", store=durable_store, approve="changes")
    with pytest.raises(functai.Waiting) as waiting:
        chat("Refund A1")
    turn = waiting.value.turn
    _cut(durable_store, chat._history.count - 1)  # the wait record goes: the view still has it
    _refused(getattr(turn, act))
