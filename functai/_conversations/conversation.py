"""Conversations: turns of one AI function, in a tree, kept in a store.

``chat = fn.conversation("alex", store="tutoring/")`` is a *view*: it sends
turns (``chat(...)``) and continues its own branch. A turn whose tool call
needs a person's answer **waits**: it is saved, the caller gets
`functai.Waiting`, and any process that opens the conversation can answer
and resume it; replies and tool results already recorded are reused.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .._calls.outputs import to_jsonable
from .._calls.run import call_steps, now_text
from .._calls.scope import current_turn as current_scope
from .._calls.steps import Steps, adrive, drive
from .._errors import FunctAIError, Waiting
from .._hooks.events import TurnEndEvent, set_field
from .._hooks.hear import hear
from .._layers import Layer, pop_block, push_block, resolve
from .._log import warn
from . import context as shown_context
from . import held, leases
from .context import ShownTurn, outputs_of, record_place
from .history import DONE, FAILED, FORMAT, HELD, STOPPED, WAITING, History, TurnData
from .rules import all_turns, last_turns
from .scope import Memory, TurnScope, current_turn, waits_of
from .._stores.memory import MemoryStore
from .._stores.opening import open_store, store_reference
from .._stores.protocol import Store, StoreConflict, check_conversation_id
from .turn import Turn

if TYPE_CHECKING:
    from .._calls.function import AIFunction

__all__ = [
    "Conversation", "ShownTurn", "Turn", "all_turns", "current_turn", "last_turns",
    "outputs_of", "record_place", "waits_of",
]


def _new_id() -> str:
    return os.urandom(6).hex()


class Conversation:
    """A view of one conversation: sends turns and continues its branch."""

    def __init__(
        self,
        program: "AIFunction | None",
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
        self.program: "AIFunction" = program  # type: ignore[assignment]
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
        """The conversation's function as its first record names it (``module:qualname``)."""
        if self._history.header is None:  # the first record never changes: read the store only until it is there
            self._refresh()
        return (self._history.header or {}).get("function")

    def all_entries(self) -> list[dict[str, Any]]:
        """Every entry of every plugin and branch, oldest first: ``{"plugin", "kind", "turn", "data", "at"}``."""
        self._read_all()
        self._refresh()
        return [dict(entry) for entry in self._history.entries]

    def _program(self, doing: str) -> "AIFunction":
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
        return self._history.entries_on(self._history.entry_turns(self._tip), plugin, kind)

    def _append(self, record: dict[str, Any], *, sync: bool = False, refresh: bool = True) -> None:
        record = {"functai_conversation": FORMAT, **record}
        self.store.append(self.id, [record], sync=sync)
        if refresh:
            self._refresh()

    def _append_entries(self, plugin: str, kept: list[tuple[str, Any]], turn: str, expect: int) -> None:
        """Write ``plugin``'s entries ``(kind, data)`` at ``turn`` in one append, only while the
        conversation holds ``expect`` records (else `StoreConflict`)."""
        records = [{"functai_conversation": FORMAT, **self._entry(plugin, kind, data, turn)} for kind, data in kept]
        self.store.append(self.id, records, expect=expect)
        self._refresh()

    def _header(self) -> dict[str, Any]:
        return {"functai_conversation": FORMAT, "kind": "conversation", "id": self.id,
                "function": f"{self.program.module}:{self.program.fn.__qualname__}",
                "version": self.program.version, "at": now_text()}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Send one turn; returns its answer. Threads sharing a view run its turns one at a time."""
        inputs = self._inputs(args, kwargs)
        with self._lock:
            return drive(self._send(inputs)).value

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        """Send one turn from async code; tasks sharing a view run its turns one at a time."""
        inputs = self._inputs(args, kwargs)
        return (await self._alocked(self._send(inputs))).value

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

    def _send(self, inputs: dict[str, Any], listen: bool = False) -> Steps[Any]:
        turn_id = _new_id()

        def records(expect: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
            history = self._history
            newest = history.newest_below(self._tip, done=False) if self._follow else self._tip
            if newest is not None and history.turns[newest].state in HELD:
                raise FunctAIError(held.held_message(self.id, history.turns[newest]), code="conversation-busy")
            record, live_inputs = shown_context.prepare(self, inputs, self._parent(), turn_id)
            if not self._follow and not self._forked:
                record["fork"] = True
            return ([record] if expect else [self._header(), record]), live_inputs

        claim, live_inputs = self._claim(turn_id, "send a turn", records)
        self._tip = turn_id
        self._forked = True
        return (yield from self._run(self._history.turns[turn_id], live_inputs, claim, listen=listen))

    def _claim(self, turn_id: str, what: str, records: Callable[[int], tuple[list[dict[str, Any]], Any]]) -> Any:
        """Append the records that claim ``turn_id`` for this process, a compare-and-set decided
        again (``records(count)``) after each conflict; the claim, and what ``records`` gave beside."""
        lease = leases.new_lease()
        # Held before the record exists, so no reader here takes it for dead; a memory store dies
        # with this process, so its leases need no renewing.
        leases.hold(lease["claim"], None if isinstance(self.store, MemoryStore) else self.store, self.id, turn_id)
        try:
            for _ in held.attempts(what, self.id):
                self._refresh()
                held.reap(self._history, self.store, self.id)
                expect = self._history.count  # before deciding: a record another thread adds meanwhile conflicts
                written, extra = records(expect)
                lease["t"] = round(time.time(), 3)  # the hooks may have taken a while: the lease starts now
                written[-1].update(lease)
                try:
                    self.store.append(self.id, written, expect=expect)
                except StoreConflict:
                    continue
                break
            leases.claimed(lease["claim"], lease["t"])  # renewals only after the claiming record
            self._refresh()
        except BaseException:
            leases.release(lease["claim"])
            raise
        return lease["claim"], extra

    def _parent(self) -> str | None:
        """The turn a new turn continues: this view's newest done turn (following the branch forward)."""
        history = self._history
        tip = self._tip
        while tip is not None and history.turns[tip].state != DONE:  # failed and stopped turns are never parents
            tip = history.turns[tip].parent
        if self._follow:
            tip = history.newest_below(tip)
        return tip

    def _run(self, data: TurnData, inputs: Mapping[str, Any] | None, claim: str,
             also_approve: tuple[Any, ...] = (), rerun: tuple[str, ...] = (), listen: bool = False) -> Steps[Any]:
        """Run a turn's call (a resumed one with its recorded inputs); ``claim`` is released once
        the turn waits or ends."""
        scope = TurnScope(self, data, also_approve, rerun)
        token = current_scope.set(scope)  # turn_end runs inside the turn too: its calls are the turn's
        try:
            try:
                result = yield from call_steps(self.program, (), dict(inputs if inputs is not None else data.inputs),
                                               listen)
                value = result.value
            except Waiting as waiting:
                self._append({"kind": "wait", "turn": data.id, "approvals": waiting.approvals, **self._ran_with(),
                              "started": scope.call_started, "at": now_text()}, sync=True)
                waiting.turn = self._turn(data.id)
                raise
            except FunctAIError as error:
                if error.code == "reconcile-failed":  # nothing is guessed and nothing ends: resume asks again
                    self._append({"kind": "interrupt", "turn": data.id, "claim": claim,
                                  "why": error.details.get("why") or f"{error.code}: {error.message[:200]}",
                                  "at": now_text()}, sync=True)
                else:
                    self._end(data, FAILED, {}, error)
                raise
            except Exception as error:
                self._end(data, FAILED, {}, error)
                raise
            except BaseException as error:
                self._end(data, STOPPED, {}, error)
                raise
            self._end(data, DONE, outputs_of(value), None)
            return result
        finally:
            current_scope.reset(token)
            leases.release(claim)

    def _end(self, data: TurnData, state: str, outputs: dict[str, Any], error: BaseException | None) -> None:
        """Run turn_end (it only hears), then record the end, fsync'ed before it is reported."""
        plan = resolve(self.program.own, self.layer).plan
        handlers = plan.handlers["turn_end"]
        if handlers:
            history = self._history

            def branch_turns() -> list[Turn]:
                done = history.done_ancestors(data.parent)
                if state == DONE:
                    done.append(data.id)
                return [self._turn(t) for t in done]

            event = TurnEndEvent(turn=data.id, state=state, inputs=MappingProxyType(data.inputs),
                                 outputs=MappingProxyType(outputs), conversation=self.id, parent=data.parent,
                                 branch_turns=branch_turns)
            set_field(event, "_memory", Memory(self, data.id))
            block = push_block(self.layer)  # what turn_end handlers call runs with the conversation's settings
            try:  # turn_end hears: a failure is reported, the turn stays as it is
                hear("turn_end", handlers, event, conversation=self.id, turn=data.id)
            finally:
                pop_block(block)
        record: dict[str, Any] = {"kind": "end", "turn": data.id, "state": state, "outputs": outputs, "at": now_text()}
        if isinstance(error, GeneratorExit):  # steps end so only when a stream is closed (or collected) early
            record["error"] = {"code": "stream-closed", "message": "the stream was closed before the turn ended"}
        elif error is not None:
            record["error"] = {"code": getattr(error, "code", type(error).__name__), "message": str(error)}
        self._append(record, sync=True)

    def _ran_with(self) -> dict[str, Any]:
        """The approve rule and plugins a turn of this view runs with (kept when it starts and waits)."""
        resolved = resolve(self.program.own, self.layer)
        return {
            "approve": held.describe_rule(resolved.values.get("approve")),
            "plugins": [plugin.name for plugin in resolved.plan.plugins],
        }

    def _abandon(self, turn_id: str, reason: str | None, by: str | None) -> None:
        with self._lock:
            held.abandon(self._history, self.store, self.id, turn_id, reason=reason, by=by)
        if self.program is None:  # no settings, so no call log to write the abandoned call to
            return
        resolved = resolve(self.program.own, self.layer)
        folder = resolved.values.get("log_calls")
        data = self._history.turns[turn_id]
        if not folder or data.call is None:
            return
        from .._calls import records

        program = self.program
        record = records.CallRecord(
            id=data.call, function=program.name, module=program.module, version=program.version,
            inputs=dict(data.inputs), path=program.name,
            started=next((w["started"] for w in data.waits if w.get("started")), None) or data.at or now_text(),
            error={"code": "turn-abandoned",
                   "message": f"turn {turn_id!r} was abandoned" + (f": {reason}" if reason else "")},
            conversation={"id": self.id, "turn": turn_id, "parent": data.parent, "store": store_reference(self.store),
                          "waited": waits_of(self._history, data)},
            changes=list(data.changes), sections=list(data.sections),
        )
        if not resolved.values["log_content"]:
            records.without_content(record)
        records.append(folder, record)

    def _resume(self, turn_id: str, rerun: tuple[str, ...] = ()) -> Steps[Any]:
        self._program("resume a turn")

        def records(expect: int) -> tuple[list[dict[str, Any]], tuple[Any, tuple[Any, ...]]]:
            data = self._history.turns.get(turn_id)
            if data is None or data.state not in HELD:
                raise held.not_held(turn_id, data, "resumed")
            unanswered = [a["key"] for a in data.approvals if a["key"] not in data.answers]
            if data.state == WAITING and unanswered:
                raise FunctAIError(f"turn {turn_id!r} still waits for {unanswered}; approve or deny them first",
                                   code="turn-waiting")
            care = held.resume_care(data, turn_id, self._ran_with())
            return [{"functai_conversation": FORMAT, "kind": "resume", "turn": turn_id, "was": data.state,
                     "rerun": list(rerun), "at": now_text()}], care

        with self._lock:
            claim, (approve, also) = self._claim(turn_id, "resume the turn", records)
            self._tip = turn_id
            layer = self.layer if approve is None else Layer.make(f"conversation {self.id!r}", self.layer,
                                                                  approve=approve)
            view = self if layer is self.layer else self._pinned(turn_id, layer)  # carries the turn's approve rule
            return (yield from view._run(self._history.turns[turn_id], None, claim, also, rerun))

    def __repr__(self) -> str:
        name = self.function if self.program is None else self.program.name
        return f"<conversation {self.id!r} of {name}, head={self._tip!r}>"
