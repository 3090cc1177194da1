"""The DBOS workflow a turn runs as (imported by `functai_dbos.launch` and `send`, with dbos)."""

from __future__ import annotations

import contextvars
import sys
import time
from typing import Any, Callable, TypeVar

import attrs
import functai
import functai.evaluation
from dbos import DBOS

from . import _keyed

QUEUE = "functai.turns"
WORKFLOW = "functai.turn"
#: An evaluation's row, asked on a queue of the evaluation's own (``functai.rows.<id>``).
ROW = "functai.row"
#: The topic an answered turn's workflow is woken on.
TOPIC = "functai.answered"
#: The longest a workflow sleeps between looks at a turn another process runs (functai approve, say).
BUSY_SLEEP = 5.0
#: Seconds a waiting turn's workflow sleeps before it looks at the turn itself, doubling up to
#: `RECHECK_MOST`: an answer whose wake-up was lost (recorded where no system database is named,
#: or while it was down) is found so, not only through the `TOPIC` message.
RECHECK = 60.0
RECHECK_MOST = 3600.0
#: The context `functai_dbos.launch` was called in (at start-up, on the main thread). DBOS runs
#: workflows on threads of its own, which carry no functai context: each turn runs in a copy of
#: this one, so it is an outermost call of its own, not taken for one a running tool started
#: (which functai refuses with ``thread-context``).
BASE: list[contextvars.Context] = []

T = TypeVar("T")


def _outermost(fn: Callable[..., T], *args: Any) -> T:
    return (BASE[0].copy() if BASE else contextvars.copy_context()).run(fn, *args)


@DBOS.step(retries_allowed=True, max_attempts=8, interval_seconds=1.0, backoff_rate=2.0)
def _attempt(function: str, conversation: str, store: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Send the turn under its key (a step run again gets the turn already made)."""
    key = str(DBOS.workflow_id).split("/", 1)[1]  # the workflow's id is <conversation>/<key>
    return _outermost(_send, function, conversation, store, inputs, key)


def program(function: str) -> Any:
    """The AI function ``module:qualname`` names, from a module this process has imported (a worker's
    ``--import``, or the program that launched DBOS): the system database never makes it import one."""
    module, _, name = function.partition(":")
    fn: Any = sys.modules.get(module)
    for part in name.split(".") if fn is not None else ():
        fn = getattr(fn, part, None)
    if not isinstance(fn, functai.AIFunction):
        raise functai.FunctAIError(f"{function!r} is not an AI function of a module this worker imported; start the "
                                   f"worker with --import {module}", code="dbos-function")
    return fn


#: What a failure to send that a step run again may get past: the store down, full or busy for a while.
PASSING = frozenset({"store-io", "store-unwritable", "store-conflict"})


class _StoreTrouble(Exception):
    """Raised out of the step so that DBOS runs it again (a failure of the turn itself is its outcome)."""


def _send(function: str, conversation: str, store: str, inputs: dict[str, Any], key: str) -> dict[str, Any]:
    try:
        chat = program(function).conversation(conversation, store=store)
        chat.send(inputs, key=key)
    except functai.Waiting as waiting:
        return {"state": "waiting", "turn": waiting.turn.id}
    except functai.FunctAIError as error:
        if error.code in PASSING:
            raise _StoreTrouble(f"{error.code}: {error.message}") from None
        if error.code == "conversation-busy" and _keyed(chat, key) is not None:  # resumed elsewhere (functai approve)
            return {"state": "busy"}  # else another turn holds the branch, and this one was never made
        return {"state": "failed", "code": error.code, "message": error.message}
    except Exception as error:  # noqa: BLE001  # inputs the function does not take, a tool's own error: the outcome
        return {"state": "failed", "code": type(error).__name__, "message": str(error)}
    return {"state": "done"}  # the answer stays in functai's store: `Handle.result` reads it there


@DBOS.step()
def _abandon(conversation: str, store: str, turn: str, seconds: float) -> dict[str, Any]:
    """Abandon the turn no one answered in time, unless it went on meanwhile (then look again)."""
    return _outermost(_give_up, conversation, store, turn, seconds)


def _give_up(conversation: str, store: str, turn_id: str, seconds: float) -> dict[str, Any]:
    turn = functai.Conversation.open(conversation, store).turn(turn_id)
    answered = all(asked["key"] in turn.answers for asked in turn.approvals)
    if turn.state in ("waiting", "interrupted") and not answered:
        try:
            turn.abandon(reason=f"no answer within {seconds:g} s", by="functai-dbos")
        except functai.FunctAIError as error:  # answered and taken on first
            if error.code != "turn-not-waiting":
                raise
    elif turn.state != "abandoned":  # answered (its wake-up lost or late), gone on, or a step run again
        return {"state": "went on"}
    return {"state": "abandoned", "code": "turn-answer-late",
            "message": f"turn {turn_id!r} was abandoned: no answer within {seconds:g} s"}


@DBOS.step()
def _clock() -> float:
    """The time, kept with the workflow (a workflow run again after a crash reads the same)."""
    return time.time()


@DBOS.workflow(name=WORKFLOW)
def turn(function: str, conversation: str, store: str, inputs: dict[str, Any],
         answer_within: float | None) -> dict[str, Any]:
    pause, recheck, deadline = 0.2, RECHECK, None
    while True:
        outcome = _attempt(function, conversation, store, inputs)
        if outcome["state"] == "busy":  # another process goes on with it (resumed where it was answered): look again
            DBOS.sleep(pause)
            pause = min(pause * 2, BUSY_SLEEP)
            continue
        if outcome["state"] != "waiting":
            return outcome
        DBOS.set_event("state", "waiting")
        now = _clock()
        if answer_within is not None:
            deadline = now + answer_within if deadline is None else deadline
            if now >= deadline:
                given_up = _abandon(conversation, store, outcome["turn"], answer_within)
                if given_up["state"] == "abandoned":
                    return given_up
                deadline = None  # it was answered meanwhile: go on with it
                continue
        woken = DBOS.recv(TOPIC, timeout_seconds=recheck if deadline is None else min(recheck, deadline - now))
        if woken is None:  # time to look at the turn itself
            recheck = min(recheck * 2, RECHECK_MOST)
            continue
        DBOS.set_event("state", "running")
        recheck, deadline = RECHECK, None  # an answer came: what it leaves waiting has its own time


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


