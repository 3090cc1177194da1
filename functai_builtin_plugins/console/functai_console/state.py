"""What the console reads and answers: a store's conversations (opened by id, through the public
API) and a call log; the functions it may resume turns of (``--import``)."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from datetime import datetime, timezone
from typing import Any, Iterator

import functai
from functai.cli import CLIError
from functai.stores import open_store, redact


class Console:
    """One store and call log as the console serves them; views are kept between requests,
    so each request reads only what is new in the store."""

    def __init__(self, store: str, *, log: str | None = None, imports: list[str] | tuple[str, ...] = ()) -> None:
        self.store_name = store
        self.store = open_store(store)
        self.log = log
        self.imports = tuple(imports)
        self._views: dict[str, functai.Conversation] = {}
        self._lock = threading.Lock()
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        for module in self.imports:
            try:
                importlib.import_module(module)
            except ImportError as error:
                raise CLIError(f"--import {module}: {error}", code="import-failed", status=1) from None

    @property
    def where(self) -> str:
        return redact(self.store_name)

    @property
    def log_where(self) -> str:
        return redact(self.log or "")

    def view(self, conversation: str) -> functai.Conversation:
        """The conversation opened by id alone (no function needed), kept for the next request."""
        with self._lock:
            found = self._views.get(conversation)
        if found is None:
            found = functai.Conversation.open(conversation, store=self.store)
            with self._lock:
                found = self._views.setdefault(conversation, found)
        return found

    def warm(self) -> None:
        """Open and read every conversation once (run in the background at start), so the first
        inbox a person opens costs what every later one does: only what is new."""
        for conversation in self.conversations():
            try:
                self.view(conversation).all_turns()
            except (functai.FunctAIError, OSError):  # one that cannot be read now is read (and reported) when asked for
                continue

    def conversations(self) -> list[str]:
        return list(self.store.conversations())

    def readable(self) -> Iterator[tuple[str, functai.Conversation | None, str]]:
        """Each conversation with its view, or with None and why it cannot be read: one that another
        program wrote (an id outside functai's rules, a damaged record) is shown as unreadable, and
        the others stay usable."""
        for conversation in self.conversations():
            yield conversation, *self.read(conversation)

    def read(self, conversation: str) -> tuple[functai.Conversation | None, str]:
        """``conversation``'s view, read, and ""; or None and why it cannot be read."""
        try:
            view = self.view(conversation)
            view.all_turns()
        except functai.FunctAIError as error:
            return None, f"[{error.code}] {error.message}"
        except OSError as error:
            return None, f"{type(error).__name__}: {error.strerror or error}"
        return view, ""

    def turns(self, conversation: str) -> list[Any]:
        """Every turn, as the store says now."""
        return self.view(conversation).all_turns()

    def program(self, conversation: str) -> Any:
        """The conversation's function when a module named by ``--import`` (or one it imported) defines
        it, else None: then the program that made the turn resumes it."""
        reference = self.view(conversation).function or ""
        module_name, _, name = reference.partition(":")
        module = sys.modules.get(module_name) if self.imports else None
        found: Any = module
        for part in name.split("."):
            found = getattr(found, part, None)
        return found if isinstance(found, functai.AIFunction) else None

    def resume(self, conversation: str, turn_id: str) -> Any:
        """Resume a turn with its own function (which `program` found)."""
        program = self.program(conversation)
        if program is None:
            raise functai.FunctAIError(f"the console cannot import {self.view(conversation).function}; start it "
                                       "with --import MODULE to resume here", code="conversation-function")
        return program.conversation(conversation, store=self.store).turn(turn_id).resume()

    # -- the call log --------------------------------------------------------------------------

    def calls(self, filters: dict[str, Any], *, before: str | None = None, page: int = 100) -> tuple[list[Any], bool]:
        """A page of call records, newest first, that pass ``filters`` (`functai.read_calls`'s), each
        with its latest rating, and whether older ones follow; read through the log's index, so a page
        costs the same however long the log."""
        if not self.log:
            return [], False
        found = list(functai.read_calls(self.log, newest=page + 1, before=before, skipped=[], **filters))
        return found[:page], len(found) > page

    def call(self, call: str) -> Any:
        """One call record by id, with its latest rating, or None."""
        if not self.log:
            return None
        return next(iter(functai.read_calls(self.log, id=call, skipped=[])), None)

    def nested(self, call: str) -> Iterator[tuple[int, Any]]:
        """The calls made inside ``call`` (depth, record), depth first, in the order they started:
        one indexed read per call in the tree."""
        stack = [(1, record) for record in self._inside(call)]
        seen = {call}  # a log edited so that calls name each other as parent: each is shown once
        while stack:
            depth, record = stack.pop()
            if record.id in seen:
                continue
            seen.add(record.id)
            yield depth, record
            stack += [(depth + 1, child) for child in self._inside(record.id)]

    def _inside(self, call: str) -> list[Any]:
        inside = functai.read_calls(self.log or "", parent=call, skipped=[])
        return sorted(inside, key=lambda r: r.started, reverse=True)

    def rate(self, call: str, *, good: bool, correction: str | None, by: str | None) -> None:
        functai.rate(call, good=good, correction=correction, by=by, log=self.log)


def waited(at: Any, now: datetime | None = None) -> str:
    """How long ago ``at`` (ISO 8601; without an offset, UTC) was, as a person reads it: ``12 s``,
    ``5 min``, ``3 h``, ``2 d``; ``-`` for what is no time (a record edited by hand)."""
    if not at or not isinstance(at, str):
        return "-"
    try:
        then = datetime.fromisoformat(at)
    except ValueError:
        return "-"
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    seconds = max(0.0, ((now or datetime.now(timezone.utc)) - then).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"
