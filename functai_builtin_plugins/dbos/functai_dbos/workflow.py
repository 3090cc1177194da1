"""The DBOS workflow a turn runs as (imported by `functai_dbos.launch` and `send`, with dbos)."""

from __future__ import annotations

import contextvars
import importlib
from typing import Any, Callable, TypeVar

import attrs
import functai
import functai.evaluation
from dbos import DBOS

QUEUE = "functai.turns"
WORKFLOW = "functai.turn"
#: An evaluation's row, asked on a queue of the evaluation's own (``functai.rows.<id>``).
ROW = "functai.row"
#: The topic an answered turn's workflow is woken on.
TOPIC = "functai.answered"
#: The longest a workflow sleeps between looks at a turn another process runs (functai approve, say).
BUSY_SLEEP = 5.0
#: The context `functai_dbos.launch` was called in (at start-up, on the main thread). DBOS runs
#: workflows on threads of its own, which carry no functai context: each turn runs in a copy of
#: this one, so it is an outermost call of its own, not taken for one a running tool started
#: (which functai refuses with ``thread-context``).
BASE: list[contextvars.Context] = []

T = TypeVar("T")


def _outermost(fn: Callable[..., T], *args: Any) -> T:
    return (BASE[0].copy() if BASE else contextvars.copy_context()).run(fn, *args)


@DBOS.step()
def _attempt(function: str, conversation: str, store: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Send the turn under its key (a step run again gets the turn already made)."""
    key = str(DBOS.workflow_id).split("/", 1)[1]  # the workflow's id is <conversation>/<key>
    return _outermost(_send, function, conversation, store, inputs, key)


def program(function: str) -> Any:
    """The AI function ``module:qualname`` names, imported here."""
    module, _, name = function.partition(":")
    fn: Any = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


def _send(function: str, conversation: str, store: str, inputs: dict[str, Any], key: str) -> dict[str, Any]:
    chat = program(function).conversation(conversation, store=store)
    try:
        chat.send(inputs, key=key)
    except functai.Waiting as waiting:
        return {"state": "waiting", "turn": waiting.turn.id}
    except functai.FunctAIError as error:
        if error.code == "conversation-busy":  # the turn (or one before it on the branch) runs elsewhere
            return {"state": "busy"}
        return {"state": "failed", "code": error.code, "message": error.message}
    return {"state": "done"}  # the answer stays in functai's store: `Handle.result` reads it there


@DBOS.step()
def _abandon(conversation: str, store: str, turn: str, seconds: float) -> dict[str, Any]:
    """Abandon the turn no one answered in time, unless it went on meanwhile (then look again)."""
    return _outermost(_give_up, conversation, store, turn, seconds)


def _give_up(conversation: str, store: str, turn_id: str, seconds: float) -> dict[str, Any]:
    turn = functai.Conversation.open(conversation, store).turn(turn_id)
    if turn.state in ("waiting", "interrupted"):
        try:
            turn.abandon(reason=f"no answer within {seconds:g} s", by="functai-dbos")
        except functai.FunctAIError as error:  # answered and taken on first
            if error.code != "turn-not-waiting":
                raise
    elif turn.state != "abandoned":  # the step runs again after a crash, or an answer came at the last moment
        return {"state": "went on"}
    return {"state": "abandoned", "code": "turn-answer-late",
            "message": f"turn {turn_id!r} was abandoned: no answer within {seconds:g} s"}


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
            given_up = _abandon(conversation, store, outcome["turn"], answer_within)
            if given_up["state"] == "abandoned":
                return given_up
        DBOS.set_event("state", "running")


@DBOS.step()
def _ask(function: str, row: dict[str, Any]) -> dict[str, Any]:
    """Ask the row (a step run again, after its worker died, asks it again)."""
    asked = _outermost(functai.evaluation.ask, program(function), functai.evaluation.Row(**row))
    return {**attrs.asdict(asked, recurse=False), "got": _data(asked.got)}


@DBOS.workflow(name=ROW)
def row(function: str, row: dict[str, Any]) -> dict[str, Any]:
    return _ask(function, row)


def _data(value: Any) -> Any:
    """A row's answer as JSON data (what its workflow's result holds)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


