"""The DBOS workflow a turn runs as (imported by `functai_dbos.launch` and `send`, with dbos)."""

from __future__ import annotations

import importlib
from typing import Any

import functai
from dbos import DBOS

QUEUE = "functai.turns"
WORKFLOW = "functai.turn"
#: The topic an answered turn's workflow is woken on.
TOPIC = "functai.answered"
#: The longest a workflow sleeps between looks at a turn another process runs (functai approve, say).
BUSY_SLEEP = 5.0


@DBOS.step()
def _attempt(function: str, conversation: str, store: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Send the turn under the workflow's id (a step run again gets the turn already made)."""
    module, _, name = function.partition(":")
    fn = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    chat = fn.conversation(conversation, store=store)
    try:
        value = chat.send(inputs, key=DBOS.workflow_id)
    except functai.Waiting as waiting:
        return {"state": "waiting", "turn": waiting.turn.id}
    except functai.FunctAIError as error:
        if error.code == "conversation-busy":  # the turn (or one before it on the branch) runs elsewhere
            return {"state": "busy"}
        return {"state": "failed", "code": error.code, "message": error.message}
    return {"state": "done", "value": _data(value)}


@DBOS.step()
def _abandon(conversation: str, store: str, turn: str, seconds: float) -> dict[str, Any]:
    functai.Conversation.open(conversation, store).turn(turn).abandon(
        reason=f"no answer within {seconds:g} s", by="functai-dbos")
    return {"state": "abandoned", "code": "turn-answer-late",
            "message": f"turn {turn!r} was abandoned: no answer within {seconds:g} s"}


@DBOS.workflow(name=WORKFLOW)
def turn(function: str, conversation: str, store: str, inputs: dict[str, Any],
         answer_within: float | None) -> dict[str, Any]:
    pause = 0.2
    while True:
        outcome = _attempt(function, conversation, store, inputs)
        if outcome["state"] == "busy":  # another process goes on with it (resumed where it was answered): look again
            DBOS.sleep(pause)
            pause = min(pause * 2, BUSY_SLEEP)
            continue
        if outcome["state"] != "waiting":
            return outcome
        DBOS.set_event("state", "waiting")
        woken = DBOS.recv(TOPIC, timeout_seconds=answer_within or 365 * 24 * 3600)
        if woken is None and answer_within is not None:
            return _abandon(conversation, store, outcome["turn"], answer_within)
        DBOS.set_event("state", "running")


def _data(value: Any) -> Any:
    """A turn's answer as JSON data (what a workflow's result holds)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


