"""``event.latest``: the newest of a plugin's entries on a branch, on every branch, or at this turn,
always the last of what ``event.entries`` returns, through branches, failed turns and entries kept
at no turn."""

from __future__ import annotations

import pytest

import functai
from functai import ai
from functai.testing import ScriptedLM

pytestmark = pytest.mark.usefixtures("functai_isolated")


@ai
def talk(text: str) -> str:
    """Answer."""
    raise NotImplementedError


def reply(request):
    if "fail" in request.messages[-1]["content"]:
        raise functai.ModelError("refused", code="model-refused")
    return "ok"


def watcher(seen: list) -> functai.Plugin:
    plugin = functai.Plugin("watch")

    @plugin.request
    def compare(event):
        for where in ({}, {"all_branches": True}):
            entries = event.entries("mark", **where)
            seen.append((event.latest("mark", **where), entries[-1] if entries else None))
        mine = [e for e in event.entries("mark") if e["turn"] == event.turn]
        seen.append((event.latest("mark", this_turn=True), mine[-1] if mine else None))
        event.remember("mark", {"n": len(seen), "text": event.request.messages[-1]["content"]})
        just = event.latest("mark", this_turn=True)  # what this handler kept a moment ago
        seen.append((just["data"]["n"], len(seen)))

    return plugin


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_latest_is_the_last_entry_on_every_branch_and_turn(kind, tmp_path):
    store = functai.MemoryStore() if kind == "memory" else "sqlite:///" + str(tmp_path / "c.db")
    seen: list = []
    functai.configure(client=ScriptedLM(reply=reply), plugins=[watcher(seen)])
    chat = talk.conversation("c", store=store)
    chat("one")
    first = chat.head
    chat("two")
    chat.remember("watch", "mark", {"n": -1}, turn=None)  # on every branch
    with pytest.raises(functai.FunctAIError):
        chat("fail here")  # a failed turn: its entries are on its parent's branches
    side = chat.continue_from(first)
    side("three, on a branch from one")
    side("four")
    chat("five, on the first branch")
    with pytest.raises(functai.FunctAIError):
        side("fail again")
    side("six")
    assert len(seen) == 8 * 4  # four looks at each of eight requests
    for latest, last in seen:
        assert latest == last
    found = [latest for latest, _ in seen if isinstance(latest, dict)]
    assert any(latest["turn"] is None for latest in found)  # the entry kept at no turn
    assert any("fail" in latest["data"].get("text", "") for latest in found)  # a failed turn's, on its parent's branch


def test_latest_outside_a_conversation_is_none():
    found: list = []
    plugin = functai.Plugin("watch")

    @plugin.request
    def look(event):
        found.append(event.latest("mark"))

    with functai.settings(client=ScriptedLM(["ok"]), plugins=[plugin]):
        talk("hi")
    assert found == [None]


def test_a_turn_that_fails_off_the_branch_while_a_turn_runs_is_in_that_turns_entries(tmp_path):
    """A running turn walks its branch's turns once; a turn that failed off the branch meanwhile (its
    entries are the branch's) is read again at the next read."""
    seen: list = []
    plugin = functai.Plugin("watch")

    @plugin.request
    def note(event):
        seen.append(sorted(e["data"] for e in event.entries("mark")))
        event.remember("mark", [m for m in event.request.messages if m["role"] == "user"][-1]["content"])

    @functai.tool(effects="reads")
    def sidestep() -> str:
        """Meanwhile, a turn off the first one fails in another view."""
        with pytest.raises(functai.FunctAIError):
            talk_tools.conversation("c", store=store).continue_from(first)("fail here")
        return "done"

    @ai(tools=[sidestep])
    def talk_tools(text: str) -> str:
        """Answer."""
        raise NotImplementedError

    def answer(request):
        if "fail" in request.messages[-1]["content"]:
            raise functai.ModelError("refused", code="model-refused")
        if request.messages[-1]["role"] == "user" and "two" in request.messages[-1]["content"]:
            return functai.testing.tool_call("sidestep", {})
        return "ok"

    store = str(tmp_path)
    functai.configure(client=ScriptedLM(reply=answer), plugins=[plugin])
    chat = talk_tools.conversation("c", store=store)
    chat("one")
    first = chat.head
    chat("two")
    # the second request of turn two, after the tool: the failed turn's entry is the branch's now
    assert seen[-1] == sorted(["text: one", "text: two", "text: fail here"])
    assert seen[-2] == sorted(["text: one"])  # the failed turn's own request: its branch is the first turn
