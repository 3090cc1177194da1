"""functai-dbos: a conversation's turns as DBOS workflows, run on whichever worker takes them.

A turn is one workflow, and functai's store stays the journal of what happened inside it: the
workflow sends the turn under a key that is its own id (``chat.send(..., key=...)``), so a
step DBOS runs again — after a worker died — gets the turn already made (resumed where it
stopped, never sent twice). A turn that waits for a person holds no worker: its workflow sleeps
on ``DBOS.recv`` and is woken by the installed plugin ``dbos``, which hears ``turn_answer`` in
whichever process recorded the answer (code, ``functai approve``, the console).

    functai_dbos.launch("sqlite:///functai-dbos.db")          # or a postgresql:// URL
    handle = functai_dbos.send(chat, {"request": "refund A1"}, key="ticket-81/step-2")
    handle.result(timeout=60)

Workers: ``FUNCTAI_DBOS_URL=... functai worker --runner dbos --import app``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Mapping, Sequence, TextIO

import functai

__version__ = "0.1.0"
__all__ = ["ENV", "Handle", "Runner", "launch", "plugin", "send"]

# dbos is imported with the first launch, send or wake-up, not with this package: the installed
# plugin is loaded at every program's first call, which should not pay for DBOS's import.

#: Where the system database is named for a worker and for a process that answers a turn.
ENV = "FUNCTAI_DBOS_URL"

#: The system database this process launched DBOS with (None: not launched here).
_launched: list[str] = []


def _url(url: str | None) -> str:
    found = url or os.environ.get(ENV)
    if not found:
        raise functai.FunctAIError(f"name DBOS's system database: launch(url) or the environment variable {ENV} "
                                   "(sqlite:///file.db on one machine, postgresql://... for many)",
                                   code="dbos-url")
    return found


def launch(url: str | None = None, *, name: str = "functai") -> None:
    """Start DBOS in this process over the system database ``url`` (else ``$FUNCTAI_DBOS_URL``):
    this process runs turns from the queue, and recovers those it was running when it stopped."""
    if _launched:
        return
    url = _url(url)
    from dbos import DBOS

    from .workflow import QUEUE  # its workflow, registered before DBOS recovers this executor's

    DBOS(config={"name": name, "system_database_url": url})
    DBOS.launch()
    DBOS.register_queue(QUEUE, polling_interval_sec=0.2)
    _launched.append(url)


class Handle:
    """A turn sent through DBOS: ``state()`` and ``result(timeout)``."""

    def __init__(self, workflow: Any) -> None:
        self._workflow = workflow

    @property
    def id(self) -> str:
        """The workflow's id: the key the turn was sent with."""
        return str(self._workflow.get_workflow_id())

    def state(self) -> str:
        """``queued``, ``running``, ``waiting`` (for a person), ``done`` or ``failed``."""
        status = self._workflow.get_status().status
        if status == "ENQUEUED":
            return "queued"
        if status == "SUCCESS":
            return "done" if self._workflow.get_result()["state"] == "done" else "failed"
        if status in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            return "failed"
        from dbos import DBOS

        return "waiting" if DBOS.get_event(self.id, "state", timeout_seconds=0) == "waiting" else "running"

    def result(self, timeout: float | None = None) -> Any:
        """The turn's answer (as JSON data), once it is done; its error when it failed or was abandoned."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.01  # looks at the workflow's status, more and more seldom up to twice a second
        while self._workflow.get_status().status in ("ENQUEUED", "PENDING", "DELAYED"):
            if deadline is not None and time.monotonic() >= deadline:
                raise functai.FunctAIError(f"turn {self.id!r} did not end within {timeout} s (it goes on)",
                                           code="dbos-timeout")
            time.sleep(pause)
            pause = min(pause * 1.5, 0.5)
        outcome = self._workflow.get_result()
        if outcome["state"] != "done":
            raise functai.FunctAIError(outcome["message"], code=outcome["code"])
        return outcome["value"]


def send(chat: functai.Conversation, inputs: Mapping[str, Any], *, key: str,
         answer_within: float | None = None) -> Handle:
    """Put a turn of ``chat`` on the queue, made once under ``key`` (its workflow's id: sending the
    same key again gives the same turn); any worker runs it. ``answer_within``: seconds a waiting
    turn waits for a person before it is abandoned (``turn-answer-late``)."""
    if not _launched:
        raise functai.FunctAIError("launch DBOS first: functai_dbos.launch(url)", code="dbos-not-launched")
    from dbos import DBOS, SetWorkflowID

    from .workflow import QUEUE, turn

    store = getattr(chat.store, "url", None) or str(getattr(chat.store, "folder", "") or "")
    function, queue = chat.function, DBOS.retrieve_queue(QUEUE)
    if not store or function is None:
        raise functai.FunctAIError("a turn run by a worker needs its function and a store the worker can open: a "
                                   "folder or a database URL, not this process's memory", code="dbos-store")
    assert queue is not None  # registered by `launch`
    with SetWorkflowID(key):
        workflow = queue.enqueue(turn, function, chat.id, store, dict(inputs), answer_within)
    return Handle(workflow)


def _wake(event: Any) -> None:
    """An answer to a turn a workflow runs: wake the workflow, from whichever process answered."""
    if event.key is None:
        return
    url = _launched[0] if _launched else os.environ.get(ENV)
    if not url:
        return  # no system database named here: not a turn this process can know to be a workflow's
    from dbos import DBOSClient

    from .workflow import TOPIC, WORKFLOW

    client = DBOSClient(system_database_url=url)
    try:
        ours = client.list_workflows(workflow_ids=[event.key], name=WORKFLOW, load_input=False, load_output=False)
        if ours:  # else a key given by hand, not through functai_dbos.send
            client.send(event.key, {"turn": event.turn, "keys": list(event.keys)}, topic=TOPIC)
    finally:
        client.destroy()


#: The installed plugin (entry point ``dbos`` in the group ``functai``): wakes a waiting turn's workflow.
plugin = functai.Plugin("dbos", version=__version__, description="wakes the DBOS workflow of an answered turn",
                        turn_answer=_wake)


class Runner:
    """The runner ``dbos`` (``--runner dbos``): ``functai worker`` serves the queue."""

    def evaluate(self, program: Any, *, log: str, workers: int | None, progress_to: TextIO | None) -> Any:
        raise functai.FunctAIError("the dbos runner does not evaluate yet; run functai evaluate without --runner",
                                   code="runner-unsupported")

    def resume(self, chat: Any, turn_id: str, *, rerun: Sequence[str]) -> Any:
        return chat.turn(turn_id).resume(rerun=rerun)

    def worker(self, imports: Sequence[str]) -> int:
        launch()
        threading.Event().wait()  # DBOS's threads run the queue's turns until the process is stopped
        return 0
