"""A turn takes the records it writes into its view without reading them back (built-in stores):
the view must hold what a fresh read of the store gives, damage and all, and be told of it once."""

from __future__ import annotations

import copy
import threading

import functai_approval
import pytest

import functai
from functai import Reply, Waiting, ai, tool
from functai._stores.protocol import StoreConflict
from functai.testing import ScriptedLM, log_events, tool_call

ran: list[str] = []


@tool(effects="changes")
def act(x: str) -> str:
    """Act."""
    ran.append(x)
    return "did " + x


@ai(tools=[act])
def agent(q: str) -> str:
    """Agent."""


def nan_usage() -> Reply:
    """A reply whose usage a store can keep only as the text "NaN": its record is damage to every reader."""
    return Reply(tool_calls=tool_call("act", {"x": "a"}).tool_calls, finish_reason="tool_calls",
                 usage={"input_tokens": 1, "cost": float("nan")})


def same_as_a_fresh_read(chat) -> None:
    fresh = agent.conversation(chat.id, store=chat.store)
    mine, theirs = chat._history, fresh._history
    assert mine.count == theirs.count and mine.damage == theirs.damage
    assert {t: (d.state, d._replies, d.tools) for t, d in mine.turns.items()} == {
        t: (d.state, d._replies, d.tools) for t, d in theirs.turns.items()}


@pytest.mark.parametrize("store", ["memory", "folder"])
def test_a_damaged_record_the_turn_writes_is_reported_to_its_writer_once(store, tmp_path):
    functai.configure(client=ScriptedLM([nan_usage(), "ok"]))
    chat = agent.conversation("c", store=functai.MemoryStore() if store == "memory" else str(tmp_path))
    with log_events() as caught:
        chat("hi")
    assert sum("non-finite" in m for m in caught.messages) == 1, caught.messages  # as the store wrote it, once
    assert sum("record skipped" in m and "not a model reply" in m for m in caught.messages) == 1, caught.messages
    same_as_a_fresh_read(chat)


class DictStore:
    """A store of one's own (docs/stores.md, "Writing a store") keeping records as copied dicts: a NaN
    stays a float in it, so what it reads back is not what a JSON line would give."""

    def __init__(self) -> None:
        self.data: dict[str, list[dict]] = {}
        self.lock = threading.Lock()

    def read(self, conversation, start=0):
        with self.lock:
            return copy.deepcopy(self.data.get(conversation, [])[start:])

    def count(self, conversation):
        with self.lock:
            return len(self.data.get(conversation, []))

    def append(self, conversation, records, *, expect=None, sync=False):
        with self.lock:
            lines = self.data.setdefault(conversation, [])
            if expect is not None and expect != len(lines):
                raise StoreConflict(count=len(lines), conversation=conversation)
            lines.extend(copy.deepcopy(list(records)))
            return len(lines)

    def sync(self, conversation):
        pass

    def conversations(self):
        return sorted(self.data)


def test_a_store_of_ones_own_is_read_back_and_a_resumed_turn_replays_what_it_holds(install):
    install(functai_approval.plugin)
    ran.clear()
    lm = ScriptedLM([nan_usage(), "final", "asked again"])
    functai.configure(client=lm)
    chat = agent.conversation("c", store=DictStore(), approve="changes")
    with pytest.raises(Waiting) as waiting:
        chat("hi")
    same_as_a_fresh_read(chat)
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "final"
    assert ran == ["a"] and len(lm.requests) == 2  # the paid reply was read back, not asked again
