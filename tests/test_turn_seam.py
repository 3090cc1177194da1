"""The turn a call runs in is one declared seam (`functai._calls.scope.TurnScope`): the pipeline
reads nothing of it that the Protocol does not name, and each turn implements all of it."""

from __future__ import annotations

import pathlib
import re

import functai
from functai import ai
from functai._calls.scope import TurnScope
from functai._conversations.scope import TurnScope as ConversationTurn
from functai._evaluation.replay import ReplayedTurn
from functai.testing import ScriptedLM

CALLS = pathlib.Path(functai.__file__).resolve().parent / "_calls"


def members() -> set[str]:
    declared = set(TurnScope.__annotations__)
    declared |= {name for name, value in vars(TurnScope).items() if callable(value) and not name.startswith("_")}
    return declared


def test_the_pipeline_reads_the_turn_only_through_the_protocol():
    loose = [f"{path.name}:{number}" for path in sorted(CALLS.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"getattr\((self\.)?scope\b|scope: Any", line)]
    assert loose == []


@ai
def answer(question: str) -> str:
    """Answer."""


def test_every_turn_implements_every_member_of_the_seam():
    replayed = ReplayedTurn(answer, [], [])
    chat = answer.conversation("seam", store=functai.MemoryStore(), client=ScriptedLM(["ok"]))
    seen: list[object] = []
    spy = functai.Plugin("spy", before_call=lambda call: seen.append(__import__(
        "functai._calls.scope", fromlist=["current_turn"]).current_turn.get()))
    with functai.settings(plugins=[spy]):
        chat("hi")
    [live] = seen
    assert isinstance(live, ConversationTurn)
    for turn in (replayed, live):
        missing = sorted(name for name in members() if not hasattr(turn, name))
        assert missing == [], (type(turn).__name__, missing)
    assert live.records is True and replayed.records is False
