"""functai-dbos: a conversation's turns as DBOS workflows, run on whichever worker takes them.

A turn is one workflow, and functai's store stays the journal of what happened inside it: the
workflow (its id ``<conversation>/<key>``) sends the turn under its key (``chat.send(..., key=...)``), so a
step DBOS runs again — after a worker died — gets the turn already made (resumed where it
stopped, never sent twice). A turn that waits for a person holds no queue slot: its workflow sleeps
on ``DBOS.recv`` and is woken by the installed plugin ``dbos``, which hears ``turn_answer`` in
whichever process recorded the answer (code, ``functai approve``, the console).

    functai_dbos.launch("sqlite:///functai-dbos.db")          # or a postgresql:// URL
    handle = functai_dbos.send(chat, {"request": "refund A1"}, key="ticket-81/step-2")
    handle.result(timeout=60)

Workers: ``FUNCTAI_DBOS_URL=... functai worker --runner dbos --import app``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import socket
import threading
import time
from typing import Any, Iterator, Mapping, Sequence, TextIO

import functai

__version__ = "0.1.0"
__all__ = ["ENV", "LEASE", "VERSION", "Handle", "Runner", "launch", "plugin", "send", "stop", "workflow_id"]

# dbos is imported with the first launch, send or wake-up, not with this package: the installed
# plugin is loaded at every program's first call, which should not pay for DBOS's import.

#: Where the system database is named for a worker and for a process that answers a turn.
ENV = "FUNCTAI_DBOS_URL"

#: Seconds a worker's lease lasts without a renewal (each worker renews it every sixth of that).
LEASE = 60.0
#: The application version DBOS runs the turns' workflow under: that of functai-dbos's workflow, not
#: of the program, so a turn left waiting goes on with a worker of the program's next version.
VERSION = f"functai-dbos-{__version__}"

#: The system database this process launched DBOS with, and this worker's lease (empty: not launched).
_launched: list[str] = []
_lease: list[Any] = []


def _url(url: str | None) -> str:
    found = url or os.environ.get(ENV)
    scheme = (found or "").partition("://")[0].lower().partition("+")[0]  # postgresql+psycopg:// too
    if not found or not (found.lower().startswith("sqlite:///") or scheme in ("postgresql", "postgres")):
        raise functai.FunctAIError(f"name DBOS's system database: launch(url) or the environment variable {ENV} "
                                   "(sqlite:///file.db on one machine, postgresql://... for many), not "
                                   f"{_hidden(found or '')!r}", code="dbos-url")
    return found


def _hidden(url: str, text: str | None = None) -> str:
    """``text`` (else ``url`` itself) as a message may show it: without ``url``'s password, in
    ``user:password@`` or in ``?password=`` or ``?sslpassword=`` (libpq reads them all), should a
    driver have repeated it."""
    from sqlalchemy.engine import make_url

    text = url if text is None else text
    try:
        made = make_url(url)
    except Exception:  # noqa: BLE001  # not a URL at all: where a password would be is unknown
        return text.replace(url, url.split("://", 1)[0] + "://…") if "://" in url else text
    secrets: list[Any] = [made.password]
    for name, values in made.query.items():
        if "password" in name.lower():
            secrets.extend((values,) if isinstance(values, str) else values)  # a repeated name gives a tuple
    for secret in filter(None, secrets):
        text = text.replace(str(secret), "***")
    return text


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"


def _check_send(key: object, answer_within: object) -> float | None:
    """``send``'s key and ``answer_within``, refused before anything is put on the queue."""
    if not isinstance(key, str) or not key or len(key) > 200:
        raise functai.FunctAIError(f"a turn's key is a non-empty string of at most 200 characters, not {key!r}",
                                   code="dbos-key")
    return None if answer_within is None else _positive(
        answer_within, "answer_within (None: wait as long as it takes)", "dbos-answer-within")


def _positive(value: object, what: str, code: str) -> float:
    """``value`` as a positive, finite number of seconds, else refused with ``code``."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not 0 < seconds < float("inf"):
        raise functai.FunctAIError(f"{what} is a positive number of seconds, not {value!r}", code=code)
    return seconds


def launch(url: str | None = None, *, name: str = "functai", executor: str | None = None,
           lease: float | None = None) -> None:
    """Start DBOS in this process over the system database ``url`` (else ``$FUNCTAI_DBOS_URL``):
    this process runs turns from the queue, recovers those it was running under the same
    ``executor`` id, and moves those of workers whose lease lapsed.

    ``executor``: this worker's id (else ``$DBOS__VMID``, else one of its own): give a worker that
    restarts the id it had to take its turns back at once. ``lease``: seconds without a renewal after
    which a worker on another machine is gone and its turns move (else ``$FUNCTAI_DBOS_LEASE``, else
    60); on this machine a worker is gone when its process is."""
    if _launched:
        return
    url = _url(url)
    from dbos import DBOS

    from .workers import Leases
    from .workflow import BASE, QUEUE  # its workflow, registered before DBOS recovers this executor's

    executor = executor or os.environ.get("DBOS__VMID") or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
    seconds = _positive(lease if lease is not None else os.environ.get("FUNCTAI_DBOS_LEASE") or LEASE,
                        "a worker's lease (lease=, or FUNCTAI_DBOS_LEASE)", "dbos-lease")
    BASE[:] = [contextvars.copy_context()]
    try:
        DBOS(config={"name": name, "system_database_url": url, "executor_id": executor,
                     "application_version": VERSION})
        DBOS.launch()
        DBOS.register_queue(QUEUE, polling_interval_sec=0.2)
        held = Leases(url, executor, seconds)  # after launch: DBOS has made the system database
    except Exception as error:
        with contextlib.suppress(Exception):  # no worker runs turns without a lease: others would take them
            DBOS.destroy(destroy_registry=False)
        raise functai.FunctAIError(f"could not start DBOS on {_hidden(url)}: {_hidden(url, _first_line(error))}",
                                   code="dbos-url") from None
    held.start()
    _launched.append(url)
    _lease.append(held)


def stop() -> None:
    """Stop DBOS in this process and give up its worker lease (a live worker moves its waiting turns)."""
    from dbos import DBOS

    for held in _lease:
        held.stop()
    DBOS.destroy(destroy_registry=False)
    _lease.clear()
    _launched.clear()


class Handle:
    """A turn sent through DBOS: ``state()`` and ``result(timeout)``."""

    def __init__(self, workflow: Any, events: Any, chat: functai.Conversation, inputs: Mapping[str, Any],
                 key: str) -> None:
        self._workflow, self._events = workflow, events  # DBOS, or the client it was sent through
        self._chat, self._inputs, self._key = chat, inputs, key

    @property
    def id(self) -> str:
        """The workflow's id: ``<conversation>/<key>`` (a key is the conversation's, as in functai)."""
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
        return "waiting" if self._events.get_event(self.id, "state", timeout_seconds=0) == "waiting" else "running"

    def result(self, timeout: float | None = None) -> Any:
        """The turn's answer, once it is done, read from functai's store as the function's output type
        (the workflow's result holds only the turn's state); its error when it failed or was abandoned."""
        try:
            outcome = _ended(self._workflow, timeout)
        except functai.FunctAIError:
            raise
        except Exception as error:  # the workflow itself failed (not the turn): a bug, a function not found
            raise functai.FunctAIError(f"the workflow of turn {self.id!r} failed: {type(error).__name__}: {error}",
                                       code="dbos-workflow-failed") from error
        if outcome["state"] != "done":
            raise functai.FunctAIError(outcome["message"], code=outcome["code"])
        made = _keyed(self._chat, self._key)
        if made is None or made.state != "done":
            # Sending would make the turn here a second time: this store is not the one the workers wrote to.
            raise functai.FunctAIError(
                f"turn {self.id!r} is done, but this process's store holds no turn made under the key "
                f"{self._key!r}: the workers wrote to another one; give both the same folder or database URL",
                code="dbos-store")
        return self._chat.send(self._inputs, key=self._key)  # the turn made under the key answers, as it ended


def _ended(workflow: Any, timeout: float | None) -> Any:
    """A DBOS workflow's result, once it has ended: its status looked at more and more seldom, up to
    twice a second, with no thread of its own (``dbos-timeout`` after ``timeout`` seconds)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.01
    while workflow.get_status().status in ("ENQUEUED", "PENDING", "DELAYED"):
        if deadline is not None and time.monotonic() >= deadline:
            raise functai.FunctAIError(f"turn {workflow.get_workflow_id()!r} did not end within {timeout} s (it goes "
                                       "on)", code="dbos-timeout")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)
    return workflow.get_result()


def _keyed(chat: functai.Conversation, key: str) -> Any:
    """The turn of ``chat`` made under ``key``, or None (looked for among every turn)."""
    return next((turn for turn in chat.all_turns() if turn.key == key), None)


def workflow_id(conversation: str, key: str) -> str:
    """The id of the workflow of the turn sent under ``key`` in ``conversation`` (no conversation id
    holds a ``/``, so no two turns share one)."""
    return f"{conversation}/{key}"


def send(chat: functai.Conversation, inputs: Mapping[str, Any], *, key: str,
         answer_within: float | None = None) -> Handle:
    """Put a turn of ``chat`` on the queue, made once under ``key`` (its workflow's id is
    ``<conversation>/<key>``: sending the same key again gives the same turn, another conversation's
    same key another turn); any worker runs it. ``answer_within``: seconds a waiting
    turn waits for a person before it is abandoned (``turn-answer-late``).

    In a process that did not `launch` DBOS (a web server that only hands turns out), the turn is
    put on the queue of ``$FUNCTAI_DBOS_URL`` through a DBOS client."""
    answer_within = _check_send(key, answer_within)
    store = getattr(chat.store, "url", None) or str(getattr(chat.store, "folder", "") or "")
    function = chat.function
    if not store or function is None:
        raise functai.FunctAIError("a turn run by a worker needs its function and a store the worker can open: a "
                                   "folder or a database URL, not this process's memory", code="dbos-store")
    own = sorted(chat.layer.values) + (["plugins"] if chat.layer.plugins is not None else []) + (
        ["context"] if type(chat.context) is not functai.all_turns else [])
    if own:
        raise functai.FunctAIError(
            f"a worker runs the turn with its function's settings, its own configure() and the plugins installed "
            f"there; this view's own {', '.join(own)} would not reach it: set them on the function (@ai(...)) or "
            "in the workers' program, and send through a view without them", code="dbos-settings")
    if chat.program is not None:  # inputs the function does not take refuse here, as chat.send refuses them
        inputs = chat.program.bind((), dict(inputs))
    args = (function, chat.id, store, dict(inputs), answer_within)
    if not _launched:
        if not os.environ.get(ENV):
            raise functai.FunctAIError(f"launch DBOS first (functai_dbos.launch(url)), or name the workers' system "
                                       f"database in {ENV} to hand the turn to them", code="dbos-not-launched")
        from .workflow import QUEUE, WORKFLOW

        client = _client(os.environ[ENV])
        options = {"queue_name": QUEUE, "workflow_name": WORKFLOW, "workflow_id": workflow_id(chat.id, key),
                   "app_version": VERSION}
        with _set_up():
            return Handle(client.enqueue(options, *args), client, chat, inputs, key)
    from dbos import DBOS, SetWorkflowID

    from .workflow import QUEUE, turn

    queue = DBOS.retrieve_queue(QUEUE)
    assert queue is not None  # registered by `launch`
    with SetWorkflowID(workflow_id(chat.id, key)):
        return Handle(queue.enqueue(turn, *args), DBOS, chat, inputs, key)


@contextlib.contextmanager
def _set_up() -> Iterator[None]:
    """``dbos-not-set-up`` for a client's first write to a system database no worker has started on."""
    import sqlalchemy

    try:
        yield
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.ProgrammingError) as error:  # no tables yet
        raise functai.FunctAIError(f"the system database in {ENV} has no DBOS tables: start a worker on it first "
                                   f"(functai worker --runner dbos); {type(error.orig).__name__}",
                                   code="dbos-not-set-up") from None


#: DBOS clients of this process, by system database (a client keeps a connection pool).
_clients: dict[str, Any] = {}


def _client(url: str) -> Any:
    """A client that fails at once when the database is down (else an answer's wake-up would hang
    the process that recorded it: the workflow finds the answer itself later, see `workflow`)."""
    if url not in _clients:
        from dbos import DBOSClient

        _url(url)  # refused unless it names a system database
        try:
            _clients[url] = DBOSClient(system_database_url=url, retry_connection_errors=False)
        except Exception as error:
            raise functai.FunctAIError(f"cannot use DBOS's system database {_hidden(url)}: "
                                       f"{_hidden(url, _first_line(error))}", code="dbos-url") from None
    return _clients[url]


def _wake(event: Any) -> None:
    """An answer to a turn a workflow runs: wake the workflow, from whichever process answered."""
    if event.key is None:
        return
    url = _launched[0] if _launched else os.environ.get(ENV)
    if not url:
        return  # no system database named here: not a turn this process can know to be a workflow's
    from .workflow import TOPIC, WORKFLOW

    client = _client(url)
    workflow = workflow_id(event.conversation, event.key)
    ours = client.list_workflows(workflow_ids=[workflow], name=WORKFLOW, load_input=False, load_output=False)
    if ours:  # else a key given by hand, not through functai_dbos.send
        client.send(workflow, {"turn": event.turn, "keys": list(event.keys)}, topic=TOPIC)


#: The installed plugin (entry point ``dbos`` in the group ``functai``): wakes a waiting turn's workflow.
plugin = functai.Plugin("dbos", version=__version__, description="wakes the DBOS workflow of an answered turn",
                        turn_answer=_wake)


class Runner:
    """The runner ``dbos`` (``--runner dbos``): ``functai worker`` serves the queue."""

    def evaluate(self, program: Any, *, log: str, workers: int | None, progress_to: TextIO | None,
                 rate: tuple[int, float] | None = None) -> Any:
        """Each row a workflow on a queue of this evaluation's own — at most ``workers`` rows asked
        at once over every worker, and ``rate`` (N, seconds) — run by the workers; a row whose
        worker died is asked again by another, a row asked is never asked again."""
        from .rows import evaluate

        return evaluate(program, log=log, workers=workers, rate=rate, progress_to=progress_to)

    def resume(self, chat: Any, turn_id: str, *, rerun: Sequence[str]) -> Any:
        return chat.turn(turn_id).resume(rerun=rerun)

    def worker(self, imports: Sequence[str]) -> int:
        """Serve until SIGTERM or Ctrl-C, then stop: the lease is given up, so this worker's waiting
        turns move to a live one at once."""
        stopping = threading.Event()
        # before launching: a SIGTERM while it starts (its lease already taken) stops it cleanly too
        signal.signal(signal.SIGTERM, lambda number, frame: stopping.set())
        launch()
        try:
            stopping.wait()  # DBOS's threads run the queue's turns meanwhile
        except KeyboardInterrupt:
            pass
        stop()
        return 0
