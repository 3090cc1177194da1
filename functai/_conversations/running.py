"""Running a conversation's turn: claiming it in the store, running its call in the turn's scope,
recording how it ended (``turn_end`` heard first), and abandoning one that waits. A part of
`functai._conversations.conversation.Conversation`, kept apart for its size.
"""

from __future__ import annotations

import threading
import time
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, cast

from .._calls.run import call_steps, now_text
from .._calls.scope import current_turn as current_scope
from .._calls.steps import Steps
from .._errors import FunctAIError, Waiting
from .._hooks.events import TurnEndEvent, TurnWaitEvent, set_field
from .._hooks.hear import hear
from .._layers import Layer, pop_block, push_block, resolve
from .._models.keys import without_secrets
from .._stores.memory import MemoryStore
from .._stores.opening import store_reference
from .._stores.protocol import Store, StoreConflict
from . import held, leases
from .context import outputs_of, value_of
from .history import DONE, FAILED, INTERRUPTED, RUNNING, STOPPED, WAITING, History, TurnData
from .scope import Chat, Memory, TurnScope, waits_of

if TYPE_CHECKING:
    from .._calls.program import Program


class Made(Exception):
    """A turn is already made under the key a new one was sent with (raised before anything is written)."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(turn_id)
        self.turn_id = turn_id


class Answer(NamedTuple):
    """What a turn already made under a key answers (no call is made, so there is no new record)."""

    value: Any


class Running:
    """The turn-running part of `Conversation` (which sets these attributes)."""

    id: str
    store: Store
    program: Program  # set before a turn is sent or resumed (a view opened without it does neither)
    layer: Layer
    _history: History
    _lock: threading.RLock

    if TYPE_CHECKING:  # defined by `Conversation`
        def _refresh(self, branch: str | None = None) -> None: ...
        def _turn(self, turn_id: str) -> Any: ...
        def _resume(self, turn_id: str, rerun: tuple[str, ...] = ()) -> Steps[Any]: ...

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
                except StoreConflict as conflict:
                    held.check_shrunk(conflict, expect, self.id)
                    continue
                break
            leases.claimed(lease["claim"], lease["t"])  # renewals only after the claiming record
            self._refresh()
        except BaseException:
            leases.release(lease["claim"])
            raise
        return lease["claim"], extra

    def _run(self, data: TurnData, inputs: Mapping[str, Any] | None, claim: str,
             also_approve: tuple[Any, ...] = (), rerun: tuple[str, ...] = (), listen: bool = False,
             checked: bool = True) -> Steps[Any]:
        """Run a turn's call (a resumed one with its recorded inputs); ``claim`` is released once
        the turn waits or ends. ``checked``: its inputs were checked as they are (the call does not
        check them again)."""
        scope = TurnScope(cast(Chat, self), data, claim, also_approve, rerun)
        scope.inputs_checked = checked
        token = current_scope.set(scope)  # turn_end runs inside the turn too: its calls are the turn's
        try:
            try:
                result = yield from call_steps(self.program, (), dict(inputs if inputs is not None else data.inputs),
                                               listen)
                value = result.value
            except Waiting as waiting:
                scope.write({"kind": "wait", "turn": data.id, "approvals": waiting.approvals, **self._ran_with(),
                             "started": scope.call_started, "at": now_text()}, sync=True)
                waiting.turn = self._turn(data.id)
                questions = tuple(MappingProxyType(dict(asked)) for asked in waiting.approvals)
                self._hear("turn_wait", data, lambda: TurnWaitEvent(
                    conversation=self.id, turn=data.id, key=data.key, parent=data.parent,
                    inputs=MappingProxyType(data.inputs), questions=questions))
                raise
            except FunctAIError as error:
                if error.code == "turn-lost":  # another process holds it now: its end is not ours to write
                    raise
                if error.code == "reconcile-failed":  # nothing is guessed and nothing ends: resume asks again
                    scope.write({"kind": "interrupt", "turn": data.id, "claim": claim,
                                 "why": error.details.get("why") or f"{error.code}: {error.message[:200]}",
                                 "at": now_text()}, sync=True)
                else:
                    self._end(scope, data, FAILED, {}, error)
                raise
            except Exception as error:
                self._end(scope, data, FAILED, {}, error)
                raise
            except BaseException as error:
                self._end(scope, data, STOPPED, {}, error)
                raise
            self._end(scope, data, DONE, outputs_of(value), None)
            return result
        finally:
            current_scope.reset(token)
            leases.release(claim)

    def _end(self, scope: TurnScope, data: TurnData, state: str, outputs: dict[str, Any],
             error: BaseException | None) -> None:
        """Run turn_end (it only hears), then record the end, fsync'ed before it is reported; an owner
        that lost the turn (``turn-lost``) neither."""
        scope.check_held()
        history = self._history

        def branch_turns() -> list[Any]:
            done = history.done_ancestors(data.parent)
            if state == DONE:
                done.append(data.id)
            return [self._turn(t) for t in done]

        self._hear("turn_end", data, lambda: TurnEndEvent(
            turn=data.id, state=state, inputs=MappingProxyType(data.inputs), outputs=MappingProxyType(outputs),
            conversation=self.id, parent=data.parent, branch_turns=branch_turns))
        record: dict[str, Any] = {"kind": "end", "turn": data.id, "state": state, "outputs": outputs, "at": now_text()}
        if isinstance(error, GeneratorExit):  # steps end so only when a stream is closed (or collected) early
            record["error"] = {"code": "stream-closed", "message": "the stream was closed before the turn ended"}
        elif isinstance(error, FunctAIError):
            record["error"] = {"code": error.code, "message": str(error)}
        elif error is not None:  # a client's own exception may quote the key it was given
            values = resolve(self.program.own, self.layer).values
            record["error"] = {"code": type(error).__name__, "message": without_secrets(str(error), values)}
        scope.write(record, sync=True)

    def _made(self, turn_id: str, key: str) -> Steps[Any]:
        """What sending again under ``key`` gives, from the turn made under it: done, its answer;
        waiting, `Waiting` again (once answered, or interrupted, the turn is resumed); running,
        ``conversation-busy``; failed, stopped or abandoned, its error."""
        data = self._history.turns[turn_id]
        made = f"turn {turn_id!r} of conversation {self.id!r}, made under the key {key!r},"
        if data.state == DONE:
            return Answer(value_of(data.outputs, self.program.output_type))
        answered = all(asked["key"] in data.answers for asked in data.approvals)
        if data.state == WAITING and not answered:
            raise Waiting(f"{made} waits for a person's answer", approvals=list(data.approvals),
                          turn=self._turn(turn_id))
        if data.state in (WAITING, INTERRUPTED):  # answered, or its owner gone: it goes on here
            try:
                return (yield from self._resume(turn_id))
            except FunctAIError as refused:  # another process took it on first: what it is now
                if refused.code != "turn-not-waiting" or self._history.turns[turn_id].state in (WAITING, INTERRUPTED):
                    raise
                return (yield from self._made(turn_id, key))
        if data.state == RUNNING:
            raise FunctAIError(f"{made} is running in another process or thread; wait for it to end",
                               code="conversation-busy")
        error = data.error or {}
        raise FunctAIError(f"{made} ended {data.state}: {error.get('message') or 'no reason was recorded'}",
                           code=error.get("code") or f"turn-{data.state}")

    def _hear(self, hook: str, data: TurnData, event: Callable[[], Any]) -> None:
        """Run a turn's hearing hook, its event made only when a handler listens; what the handlers
        call runs with the conversation's settings, and can keep entries at the turn."""
        handlers = resolve(self.program.own, self.layer).plan.handlers[hook]
        if not handlers:
            return
        made = event()
        set_field(made, "_memory", Memory(cast(Chat, self), data.id))
        block = push_block(self.layer)
        try:  # it hears: a failure is reported, the turn stays as it is
            hear(hook, handlers, made, conversation=self.id, turn=data.id)
        finally:
            pop_block(block)

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
