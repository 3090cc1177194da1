"""Conversations: turns of one AI function, in a tree, kept in a store.

``chat = fn.conversation("alex", store="tutoring/")`` is a *view*: it sends
turns (``chat(...)``) and continues its own branch. A turn whose tool call
needs a person's answer **waits**: it is saved, the caller gets
`functai.Waiting`, and any process that opens the conversation can answer
and resume it; replies and tool results already recorded are reused. A `Turn` is one
turn as a view hands it out, read through the view it came from.
"""

from __future__ import annotations

import copy
import os
import threading
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .._calls.approvals import check_extension, named_key
from .._calls.outputs import to_jsonable
from .._calls.run import now_text
from .._calls.scope import current_turn as current_scope
from .._calls.steps import Steps, adrive, drive
from .._calls.toolinputs import check_edit
from .._calls.tools import tool_inputs
from .._codec import reread
from .._errors import FunctAIError
from .._hooks.events import TurnAnswerEvent
from .._hooks.hear import hear
from .._layers import EMPTY, Layer, resolve
from .._log import warn
from . import context as shown_context
from . import held, rows
from .context import ShownTurn, outputs_of, record_place
from .history import DONE, FORMAT, HELD, WAITING, History, TurnData
from .rules import all_turns, last_turns
from .running import Made, Running
from .scope import TurnScope, waits_of
from .._stores.opening import open_store
from .._stores.protocol import Store, check_conversation_id

if TYPE_CHECKING:
    from .._calls.program import Program

__all__ = [
    "Conversation", "ShownTurn", "Turn", "all_turns", "current_turn", "last_turns",
    "outputs_of", "record_place", "waits_of",
]


def _new_id() -> str:
    return os.urandom(6).hex()


def _checked_key(key: Any) -> str | None:
    if key is not None and (not isinstance(key, str) or not key or len(key) > 200):
        raise TypeError(f"a turn's key is a non-empty string of at most 200 characters (or None), not {key!r}")
    return key


class Conversation(Running):
    """A view of one conversation: sends turns and continues its branch."""

    def __init__(
        self,
        program: "Program | None",
        id: str,
        *,
        store: None | str | os.PathLike[str] | Store = None,
        context: all_turns | None = None,
        plugins: Sequence[Any] | None = None,
        at: str | None = None,
        **settings: Any,
    ) -> None:
        """``at``: a view continuing exactly from that done turn, as `continue_from` makes."""
        #: None only in a view made by `open`: what needs the function asks `_program` first.
        self.program: "Program" = program  # type: ignore[assignment]
        self.id = check_conversation_id(id)
        self.store: Store = open_store(store)
        if context is not None and not isinstance(context, all_turns):
            raise TypeError("context must be functai.all_turns() or functai.last_turns(n)")
        self.context = context or all_turns()
        if plugins is not None:
            settings["plugins"] = plugins
        self.layer = Layer.make(f"conversation {id!r}", **settings)
        self._follow = at is None
        self._forked = False
        self._history = History()
        self._lock = threading.RLock()  # turns sent through one view run one at a time
        self._async_busy = False
        self._refresh(at if hasattr(self.store, "read_branch") else None)
        if at is not None and at not in self._history.turns:
            self._read_all()  # not a turn the store's index knows: read everything
        header = self._history.header
        mine = None if program is None else f"{program.module}:{program.fn.__qualname__}"
        if mine is not None and header is not None and header.get("function") != mine:
            raise FunctAIError(
                f"conversation {self.id!r} belongs to {header.get('function')}, not {mine}; "
                "a conversation is a series of turns of one function — use another id",
                code="conversation-function",
            )
        try:
            held.reap(self._history, self.store, self.id)
        except (OSError, FunctAIError) as error:  # a store this process may only read still opens
            warn("could not mark interrupted turns", conversation=self.id,
                 error=f"{type(error).__name__}: {error}")
        self._tip = self._done(at) if at is not None else self._history.newest_below(None, done=False)

    @classmethod
    def open(cls, id: str, store: None | str | os.PathLike[str] | Store = None) -> "Conversation":
        """A view of a conversation by its id alone, for a tool that cannot import its function
        (a console, a dashboard): it reads every turn, answers waiting approvals and abandons
        turns; sending and resuming need the function (``conversation-function``)."""
        return cls(None, id, store=store)

    @property
    def function(self) -> str | None:
        """The conversation's function as its first record names it (``module:qualname``); for a
        conversation with no turn yet, the function this view would record."""
        if self._history.header is None:  # the first record never changes: read the store only until it is there
            self._refresh()
        if self._history.header is None and self.program is not None:
            return f"{self.program.module}:{self.program.fn.__qualname__}"
        return (self._history.header or {}).get("function")

    def all_entries(self) -> list[dict[str, Any]]:
        """Every entry of every plugin and branch, oldest first: ``{"plugin", "kind", "turn", "data", "at"}``."""
        self._read_all()
        self._refresh()
        return [dict(entry) for entry in self._history.entries]

    def _program(self, doing: str) -> "Program":
        if self.program is None:
            raise FunctAIError(
                f"conversation {self.id!r} was opened without its function (Conversation.open), which cannot "
                f"{doing}; open it with fn.conversation({self.id!r}, store=...) where {self.function} imports",
                code="conversation-function",
            )
        return self.program

    def _refresh(self, branch: str | None = None) -> None:
        """Apply what is new in the store; with ``branch``, read only the branch ending at that turn
        (a store that indexes turns by parent)."""
        history = self._history
        with history.lock:
            seen = len(history.damage)
            if branch is None:
                held.refresh(history, self.store, self.id)
            else:
                history.load_branch(*self.store.read_branch(self.id, branch))  # type: ignore[attr-defined]
            damaged = history.damage[seen:]
        self._report(damaged)

    def _take_written(self, records: list[dict[str, Any]], expect: int) -> None:
        """Take records this view appended at ``expect`` into it as a read would give them back, without
        reading: while nothing else came in between and the store keeps records as their JSON lines
        (the built-in stores; any other store is read)."""
        history = self._history
        with history.lock:
            if history.count == expect and not history.partial and rows.row_reader(self.store) is not None:
                seen = len(history.damage)
                history.apply_all([reread(record) for record in records])
                damaged = history.damage[seen:]
            else:
                damaged = None
        if damaged is None:
            self._refresh()
        else:
            self._report(damaged)

    def _report(self, damaged: list[tuple[int, str]]) -> None:
        for index, reason in damaged:  # each damaged record is reported once per view
            warn("conversation record skipped", conversation=self.id, at=record_place(self.store, self.id, index),
                 reason=reason)

    def _read_all(self) -> None:
        """After reading one branch, read the whole conversation (for what asks about all of it)."""
        history = self._history
        if history.partial:
            with history.lock:
                history.reset()
            self._refresh()

    def _turn(self, turn_id: str) -> Turn:
        return Turn(self, self._history.turns[turn_id])

    @property
    def head(self) -> Turn | None:
        """The newest turn of this view's branch."""
        self._refresh()
        return None if self._tip is None else self._turn(self._tip)

    @property
    def turns(self) -> list[Turn]:
        """The turns of this view's branch, oldest first."""
        self._refresh()
        return [self._turn(t) for t in self._history.branch(self._tip)]

    def turn(self, turn_id: str) -> Turn:
        """Any turn of the conversation by id."""
        self._refresh()
        if turn_id not in self._history.turns:
            self._read_all()
        if turn_id not in self._history.turns:
            raise FunctAIError(f"conversation {self.id!r} has no turn {turn_id!r}", code="conversation-turn")
        return self._turn(turn_id)

    def all_turns(self) -> list[Turn]:
        """Every turn of the conversation, in the order they were sent."""
        self._read_all()
        self._refresh()
        held.reap(self._history, self.store, self.id)
        return [self._turn(t) for t in self._history.order]

    def continue_from(self, turn: Turn | str | None) -> "Conversation":
        """A view whose next turn continues exactly from ``turn`` (a branch);
        ``None`` starts a new tree in the same conversation."""
        turn_id = turn.id if isinstance(turn, Turn) else turn
        self._refresh()
        return self._pinned(None if turn_id is None else self._done(turn_id), self.layer)

    def _done(self, turn_id: str) -> str:
        """``turn_id``, refused unless it is a done turn of the conversation."""
        if turn_id not in self._history.turns:
            self._read_all()
        data = self._history.turns.get(turn_id)
        if data is None or data.state != DONE:
            raise FunctAIError(f"turn {turn_id!r} is {'missing' if data is None else data.state}; only a done "
                               "turn can be continued from", code="conversation-parent")
        return turn_id

    def _pinned(self, tip: str | None, layer: Layer) -> "Conversation":
        """A view sharing this one's history, staying on the branch at ``tip``."""
        view = copy.copy(self)
        view.layer, view._tip, view._follow, view._forked = layer, tip, False, False
        view._lock, view._async_busy = threading.RLock(), False
        return view

    def remember(self, plugin: str, kind: str, data: Any, turn: Turn | str | None = None) -> None:
        """Keep an entry for ``plugin`` at ``turn`` (or for every branch with no turn)."""
        self._append(self._entry(plugin, kind, data, turn.id if isinstance(turn, Turn) else turn))

    @staticmethod
    def _entry(plugin: str, kind: str, data: Any, turn: str | None) -> dict[str, Any]:
        """The record keeping a plugin's entry (without the format stamp `_append` adds)."""
        if not isinstance(kind, str) or not kind:
            raise ValueError("an entry's kind must be a non-empty string")
        return {"kind": "entry", "plugin": plugin, "entry": kind, "turn": turn, "data": to_jsonable(data),
                "at": now_text()}

    def entries(self, plugin: str, kind: str) -> list[dict[str, Any]]:
        """``plugin``'s entries of ``kind`` on this view's branch, oldest first."""
        self._refresh()
        history = self._history
        with history.lock:  # another thread of this view may be reading records into it
            return history.entries_on(history.entry_turns(self._tip), plugin, kind)

    def _append(self, record: dict[str, Any]) -> None:
        """Append a record that is no turn's own (a turn's go through `TurnScope.write`), and read it."""
        self.store.append(self.id, [{"functai_conversation": FORMAT, **record}])
        self._refresh()

    def _append_entries(self, plugin: str, kept: list[tuple[str, Any]], turn: str, expect: int) -> None:
        """Write ``plugin``'s entries ``(kind, data)`` at ``turn`` in one append, only while the
        conversation holds ``expect`` records (else `StoreConflict`)."""
        records = [{"functai_conversation": FORMAT, **self._entry(plugin, kind, data, turn)} for kind, data in kept]
        self.store.append(self.id, records, expect=expect)
        self._take_written(records, expect)

    def _header(self) -> dict[str, Any]:
        return {"functai_conversation": FORMAT, "kind": "conversation", "id": self.id,
                "function": f"{self.program.module}:{self.program.fn.__qualname__}",
                "version": self.program.version, "at": now_text()}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Send one turn; returns its answer. Threads sharing a view run its turns one at a time.
        ``key=`` (unless the function has an input of that name: then `send`) makes a turn once:
        sent again under the key, by any process, the turn already made answers (see `send`)."""
        key = self._key(kwargs)
        inputs = self._inputs(args, kwargs)
        with self._lock:
            return drive(self._send(inputs, key=key)).value

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        """Send one turn from async code; tasks sharing a view run its turns one at a time."""
        key = self._key(kwargs)
        inputs = self._inputs(args, kwargs)
        return (await self._alocked(self._send(inputs, key=key))).value

    def send(self, inputs: Mapping[str, Any], *, key: str | None = None) -> Any:
        """Send one turn with ``inputs`` by name; returns its answer. With ``key``, a turn is made
        once under it: sent again (a retried step of a workflow engine, another process), the
        turn already made answers — done, its answer; waiting, `functai.Waiting` again (once
        answered, or interrupted, it is resumed); running, ``conversation-busy``; failed, stopped
        or abandoned, its error."""
        checked = self._inputs((), dict(inputs))
        with self._lock:
            return drive(self._send(checked, key=_checked_key(key))).value

    def _key(self, kwargs: dict[str, Any]) -> str | None:
        """The turn's key among a call's keyword arguments, unless the function has an input named so."""
        if "key" not in kwargs or "key" in self._program("send a turn").input_names:
            return None
        return _checked_key(kwargs.pop("key"))

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        """Send one turn as a stream of `functai.StreamEvent`; a turn left waiting raises
        `functai.Waiting` at the stream's end."""
        from .._calls.streaming import Stream

        return Stream(self._locked(self._send(self._inputs(args, kwargs), listen=True)))

    def astream(self, *args: Any, **kwargs: Any) -> Any:
        """`stream` as an async iterator."""
        from .._calls.streaming import AStream

        return AStream(self._locked(self._send(self._inputs(args, kwargs), listen=True)))

    def _inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        inputs = self._program("send a turn").bind(args, kwargs)
        if resolve(self.program.own, self.layer).values["check_inputs"]:
            self.program.check_inputs(inputs)  # a wrong input refuses before a turn is written
        return inputs

    def _locked(self, steps: Steps[Any]) -> Steps[Any]:
        with self._lock:
            return (yield from steps)

    async def _alocked(self, steps: Steps[Any]) -> Any:
        """Run steps with the view's lock, waiting for it without blocking the event loop."""
        import asyncio

        while self._async_busy or not self._lock.acquire(blocking=False):
            await asyncio.sleep(0.002)
        self._async_busy = True  # the lock is reentrant: other tasks of this thread must see it taken
        try:
            return await adrive(steps)
        finally:
            self._async_busy = False
            self._lock.release()

    def _send(self, inputs: dict[str, Any], listen: bool = False, key: str | None = None) -> Steps[Any]:
        turn_id = _new_id()
        if key is not None:
            self._read_all()  # a key is the conversation's, whichever branch its turn is on

        def records(expect: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
            history = self._history
            if key is not None and key in history.keyed:  # decided on the newest records: a compare-and-set
                raise Made(history.keyed[key])
            newest = history.newest_below(self._tip, done=False) if self._follow else self._tip
            if newest is not None and history.turns[newest].state in HELD:
                raise FunctAIError(held.held_message(self.id, history.turns[newest]), code="conversation-busy")
            record, live_inputs = shown_context.prepare(self, inputs, self._parent(), turn_id)
            if not self._follow and not self._forked:
                record["fork"] = True
            if key is not None:
                record["key"] = key
            return ([record] if expect else [self._header(), record]), live_inputs

        try:
            claim, live_inputs = self._claim(turn_id, "send a turn", records)
        except Made as made:
            return (yield from self._made(made.turn_id, str(key)))
        self._tip = turn_id
        self._forked = True
        # checked when sent; turn_start handlers may have changed them since
        return (yield from self._run(self._history.turns[turn_id], live_inputs, claim, listen=listen,
                                     checked=live_inputs == inputs))

    def _parent(self) -> str | None:
        """The turn a new turn continues: this view's newest done turn (following the branch forward)."""
        history = self._history
        tip = self._tip
        while tip is not None and history.turns[tip].state != DONE:  # failed and stopped turns are never parents
            tip = history.turns[tip].parent
        if self._follow:
            tip = history.newest_below(tip)
        return tip

    def _resume(self, turn_id: str, rerun: tuple[str, ...] = ()) -> Steps[Any]:
        program = self._program("resume a turn")
        inputs: list[dict[str, Any]] = []

        def records(expect: int) -> tuple[list[dict[str, Any]], tuple[Any, tuple[Any, ...]]]:
            data = self._history.turns.get(turn_id)
            if data is None or data.state not in HELD:
                raise held.not_held(turn_id, data, "resumed")
            unanswered = [a["key"] for a in data.approvals if a["key"] not in data.answers]
            if data.state == WAITING and unanswered:
                raise FunctAIError(f"turn {turn_id!r} still waits for {unanswered}; approve or deny them first",
                                   code="turn-waiting")
            try:  # as first given (a model, a date); a record edited by hand, or inputs renamed since, do not fit
                check = resolve(program.own, self.layer).values["check_inputs"]
                inputs[:] = [program.read_inputs(data.inputs, check)]
            except (TypeError, ValueError) as error:
                raise FunctAIError(f"turn {turn_id!r} cannot be resumed: its recorded inputs do not fit the function "
                                   f"({error}); abandon it and send it again", code="resume-inputs") from None
            care = held.resume_care(data, turn_id, self._ran_with())
            return [{"functai_conversation": FORMAT, "kind": "resume", "turn": turn_id, "was": data.state,
                     "rerun": list(rerun), "at": now_text()}], care

        with self._lock:
            claim, (approve, also) = self._claim(turn_id, "resume the turn", records)
            self._tip = turn_id
            layer = self.layer if approve is None else Layer.make(f"conversation {self.id!r}", self.layer,
                                                                  approve=approve)
            view = self if layer is self.layer else self._pinned(turn_id, layer)  # carries the turn's approve rule
            return (yield from view._run(self._history.turns[turn_id], inputs[0], claim, also, rerun))

    def __repr__(self) -> str:
        name = self.function if self.program is None else self.program.name
        return f"<conversation {self.id!r} of {name}, head={self._tip!r}>"


class Turn:
    """One turn of a conversation: a call of its function."""

    def __init__(self, chat: "Conversation", data: TurnData) -> None:
        self._chat = chat
        self._data = data

    id = property(lambda self: self._data.id)
    parent = property(lambda self: self._data.parent)
    state = property(lambda self: self._data.state,
                     doc="done, failed, stopped, waiting, running, interrupted or abandoned")
    why = property(lambda self: self._data.why,
                   doc="why an interrupted turn was interrupted (its owner was gone, or a reconcile raised)")
    call = property(lambda self: self._data.call, doc="the id of the turn's call record")
    key = property(lambda self: self._data.key, doc="the key it was sent with (``send(..., key=...)``), or None")
    inputs = property(lambda self: MappingProxyType(self._data.inputs))
    outputs = property(lambda self: MappingProxyType(self._data.outputs))
    approvals = property(lambda self: list(self._data.approvals), doc="what a waiting turn waits for")
    at = property(lambda self: self._data.at, doc="when the turn started (ISO 8601)")
    shown = property(lambda self: copy.deepcopy(self._data.shown),
                     doc='what the turn was shown, as recorded: {"last": n}, with "drop": [ids], or [ids]')

    @property
    def waits(self) -> list[dict[str, Any]]:
        """Each time the turn waited: ``{"approvals", "at", "answers"}``, the answers that held by key
        with ``allow``, ``reason``, ``by`` and ``at`` (what its call record keeps as ``waited``)."""
        return waits_of(self._chat._history, self._data)

    @property
    def answers(self) -> dict[str, dict[str, Any]]:
        """The answers given to this turn's approvals, by key: ``{"allow": bool, "reason": str | None}``,
        and where given ``"inputs"`` (an approval's edit), ``"extend"`` (the extension an approval of a
        budget's question granted) and ``"by"`` (who answered)."""
        details = self._chat._history.answered.get(self.id, {})
        found: dict[str, dict[str, Any]] = {}
        for key, (allow, reason) in self._data.answers.items():
            found[key] = {"allow": allow, "reason": reason}
            detail = details.get(key, {})
            found[key].update((name, detail[name]) for name in ("inputs", "extend", "by")
                              if detail.get(name) is not None)
        return found

    def approve(self, approval: Mapping[str, Any] | str | None = None, *, inputs: Mapping[str, Any] | None = None,
                by: str | None = None, extend: float | None = None) -> "Turn":
        """Allow a waiting approval (all of them when none is named); the first recorded answer
        holds, so approving one already denied raises ``approval-answered``.

        ``inputs`` approves the named approval with these inputs changed: on resume every
        ``tool_call`` handler and the approve rule see the edited call, which may then need
        another answer (``by`` is kept as who made the edit). ``extend`` grants this much more
        to a question a plugin asked before a request (a budget's), instead of what it offered."""
        if inputs is not None:
            inputs = self._edit(approval, inputs)
        if extend is not None:
            self._check_extend(approval, extend)
        keys = held.answer(self._chat._history, self._chat.store, self._chat.id, self.id, approval, allow=True,
                           reason=None, by=by, inputs=inputs, extend=extend)
        self._answered(keys, True, by, None)
        return self

    def _answered(self, keys: list[str], allow: bool, by: str | None, reason: str | None) -> None:
        """``turn_answer`` for the answers just recorded, heard by the plugins this view runs with."""
        if not keys:
            return
        chat = self._chat
        handlers = resolve(EMPTY if chat.program is None else chat.program.own, chat.layer).plan.handlers["turn_answer"]
        if handlers:
            event = TurnAnswerEvent(conversation=chat.id, turn=self.id, key=self.key, keys=tuple(keys), allow=allow,
                                    by=by, reason=reason, pid=os.getpid())
            hear("turn_answer", handlers, event, conversation=chat.id, turn=self.id)

    def _check_extend(self, approval: Mapping[str, Any] | str | None, extend: Any) -> None:
        """``extend`` is a number from 0 up, for questions that offer an extension (``input-invalid``)."""
        check_extension(extend)
        key = named_key(approval)
        named = [a for a in self._data.approvals if key is None or a["key"] == key]
        if not any(a.get("kind") == "request" for a in named):
            raise FunctAIError(
                f"approve(extend=...) answers a question a plugin asked before a request (a budget's); turn "
                f"{self.id!r} waits for no such question{'' if key is None else ' at ' + repr(key)}",
                code="input-invalid")

    def _edit(self, approval: Mapping[str, Any] | str | None, inputs: Any) -> dict[str, Any]:
        """An edit on approving, checked against the tool it changes (``input-invalid``)."""
        key = named_key(approval)
        asked = next((a for a in self._data.approvals if a["key"] == key), None)
        if asked is not None and asked.get("kind") == "request":
            raise FunctAIError(f"approving with inputs= edits a tool call; {key!r} is a question asked before a "
                               "request (a budget's): answer it with extend= instead", code="input-invalid")
        if asked is None:
            keys = [a["key"] for a in self._data.approvals]
            raise FunctAIError(f"approving with inputs= names one approval of turn {self.id!r}: one of {keys}",
                               code="input-invalid" if key is None else "turn-not-waiting")
        program = self._chat.program
        found = None if program is None else tool_inputs(program, asked["path"])
        if found is not None:
            return check_edit(inputs, found, asked["name"])
        # Opened without its function (Conversation.open): the inputs and their schema the question kept.
        parameters = asked.get("parameters") or {}
        return check_edit(inputs, list(parameters.get("properties") or asked["input"]), asked["name"], parameters)

    def deny(
        self, approval: Mapping[str, Any] | str | None = None, *, reason: str | None = None, by: str | None = None
    ) -> "Turn":
        """Refuse a waiting approval (all of them when none is named); ``approval-answered``
        (naming who answered first) when it was already answered the other way."""
        keys = held.answer(self._chat._history, self._chat.store, self._chat.id, self.id, approval, allow=False,
                           reason=reason, by=by)
        self._answered(keys, False, by, reason)
        return self

    def resume(self, *, rerun: Sequence[str] | None = None) -> Any:
        """Go on with a waiting turn whose approvals are answered, or an interrupted one;
        returns the answer. A tool that started and never recorded a result is settled by
        its ``reconcile``, when it has one; else it is not run again (the model is told so)
        unless its name is in ``rerun``."""
        return drive(self._chat._resume(self.id, held.check_rerun(rerun))).value

    async def aresume(self, *, rerun: Sequence[str] | None = None) -> Any:
        """`resume` from async code."""
        return (await self._chat._alocked(self._chat._resume(self.id, held.check_rerun(rerun)))).value

    def abandon(self, *, reason: str | None = None, by: str | None = None) -> "Turn":
        """Give up on a waiting or interrupted turn: it ends ``abandoned`` and frees the branch
        (its call record, with the log set, is written now with error ``turn-abandoned``)."""
        self._chat._abandon(self.id, reason, by)
        return self

    @property
    def conversation(self) -> "Conversation":
        """The view this turn was read through (its store, entries, branches)."""
        return self._chat

    def __repr__(self) -> str:
        return f"Turn({self.id!r}, {self.state}, parent={self.parent!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Turn) and other.id == self.id and other._chat.id == self._chat.id

    def __hash__(self) -> int:
        return hash((self._chat.id, self.id))


def current_turn() -> Turn | None:
    """The conversation turn running now (in this thread or task), or None: for a tool that
    needs its conversation (``current_turn().conversation.entries(...)``)."""
    scope = current_scope.get()
    if not isinstance(scope, TurnScope) or not isinstance(scope.chat, Conversation):
        return None
    return scope.chat._turn(scope.data.id)
