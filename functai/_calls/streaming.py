"""Streamed calls: the pipeline's drivers that hand events to a consumer.

``fn.stream(...)`` and ``fn.astream(...)`` run the same steps as ``fn.run``
(`functai._calls.steps`), sending requests with the client's ``stream``/``astream``
and turning notes and approvals into events. The steps run in a copy of the
caller's context, so what a call sets while it runs is never seen by the
consumer's code between events.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, Callable, Generic, Mapping, TypeVar

from .._errors import FunctAIError, approval_answered
from .approvals import check_extension, named_key
from .toolinputs import ToolInputs, check_edit
from .guards import Guarding, Pending
from .run import now_text
from .steps import Ask, Note, Send, Steps, run_awaitable, run_now

KINDS = ("text", "tool_call", "tool_result", "waiting", "done")


class StreamEvent:
    """One event of a streamed call; ``kind`` says which fields are set.

    - ``"text"``: ``text``, a piece of the reply's text as it arrives;
    - ``"tool_call"``: ``name``, ``input``, ``path`` — a tool about to run;
    - ``"tool_result"``: ``name``, ``output``, ``path`` — what the model is shown;
    - ``"waiting"``: ``approvals`` — answer with ``stream.approve()``/``deny()``;
    - ``"done"``: ``value``, ``record``.
    """

    __slots__ = ("kind", "text", "name", "input", "path", "output", "approvals", "value", "record")

    def __init__(self, kind: str, **fields: Any) -> None:
        if kind not in KINDS:
            raise ValueError(f"a stream event's kind is one of {KINDS}, not {kind!r}")
        self.kind = kind
        for name in self.__slots__[1:]:
            setattr(self, name, fields.pop(name, None))
        if fields:
            raise TypeError(f"StreamEvent has no field {sorted(fields)[0]!r}")

    def __repr__(self) -> str:
        shown = {name: getattr(self, name) for name in self.__slots__[1:] if getattr(self, name) is not None}
        if "record" in shown:
            shown["record"] = "<record>"
        return f"StreamEvent({self.kind!r}, " + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


_END = object()  # what reading the reply's chunks gives at their end


if TYPE_CHECKING:
    from .records import CallRecord

#: The value a stream ends with: the function's output type.
V = TypeVar("V")


class _Stream(Generic[V]):
    """The stream, sync or async: one loop (`_next`) whose I/O steps (`_call`) are awaited only
    when ``_awaits``; run plainly, it never awaits (see `functai._calls.steps.run_now`)."""

    _awaits = False

    def __init__(self, steps: Steps[Any]) -> None:
        self._steps = steps
        self._ctx = contextvars.copy_context()
        self._resume: tuple[bool, Any] = (False, None)
        self._asking: Mapping[str, Any] | None = None
        self._takes: ToolInputs | None = None  # the inputs of the tool the stream asks about
        self._answer: tuple[bool, str | None, Any, str | None] | None = None
        self._answered_at: str | None = None
        self._finished = False
        self._keep: Any = None  # the turn that keeps a streamed reply
        self._chunks: Any = None  # the reply being streamed: text deltas, then the reply
        self._guarding: Guarding | None = None  # the guards over the reply being streamed, if the call has any
        self._pull: Any = None  # its ``pull``, made once per reply
        #: Set when the stream ends with its "done" event (None until then).
        self.value: V | None = None
        self.record: CallRecord | None = None

    def __del__(self) -> None:
        if not getattr(self, "_finished", True):  # dropped mid-call: end it in its own context
            try:
                self._finished = True
                self._ctx.run(self._steps.close)
            except Exception:  # noqa: BLE001 - nothing can be reported from a finalizer
                pass

    def approve(self, approval: Mapping[str, Any] | str | None = None, *,
                inputs: Mapping[str, Any] | None = None, extend: float | None = None, by: str | None = None) -> None:
        """Allow what the last ``"waiting"`` event asks about (before asking for the next event): a tool
        call — with ``inputs``, with these inputs changed (the handlers and the rule see the edit) — or
        a question a plugin asked before a request — with ``extend``, that much more than it offered.
        ``by`` names who answered: kept with an edit, and given to the plugin that asked."""
        asking = self._asking or {}
        if asking.get("kind") == "request":
            if inputs is not None:
                raise FunctAIError("approving with inputs= edits a tool call; the stream waits for a question "
                                   "asked before a request: answer it with extend= instead", code="input-invalid")
            if extend is not None:
                check_extension(extend)
            self._give(approval, (True, None, extend, by))
            return
        if extend is not None:
            raise FunctAIError("approve(extend=...) answers a question a plugin asked before a request (a "
                               "budget's); the stream waits for a tool call", code="input-invalid")
        self._give(approval, (True, None, inputs, by))

    def deny(self, approval: Mapping[str, Any] | str | None = None, *, reason: str | None = None,
             by: str | None = None) -> None:
        """Refuse what the last ``"waiting"`` event asks about: a tool call (the model is shown
        ``reason``), or a question asked before a request (the plugin is given ``reason`` and ``by``)."""
        self._give(approval, (False, reason, None, by))

    def _give(self, approval: Mapping[str, Any] | str | None,
              answer: tuple[bool, str | None, Any, str | None]) -> None:
        asking = self._asking
        if asking is None:
            raise FunctAIError("nothing in this stream waits for an answer: approve or deny right after a "
                               "'waiting' event, before asking for the next event", code="turn-not-waiting")
        if approval is not None:
            key = named_key(approval)
            if key != asking["key"]:
                raise FunctAIError(f"the stream waits for {asking['key']!r}, not {key!r}", code="turn-not-waiting")
        # an edit names the tool's own inputs: refused here, the stream still waiting
        if answer[2] is not None and asking.get("kind") != "request":
            answer = (True, None, check_edit(answer[2], self._takes, asking["name"]), answer[3])
        given = self._answer
        if given is not None and given[0] != answer[0]:
            first = {"allow": given[0], "reason": given[1], "at": self._answered_at}
            raise approval_answered(asking["key"], first, answer[0], who="at this stream")
        if given is None:  # answering again the same way changes nothing: the first answer (and reason) holds
            self._answer, self._answered_at = answer, now_text()

    async def _call(self, make: Callable[[], Any]) -> Any:
        """``make()`` in the stream's context; an async stream awaits what it makes."""
        if not self._awaits:
            return self._ctx.run(make)
        import asyncio  # loaded already: an async stream runs in an event loop

        # A task made inside the stream's context runs in a copy of it (any Python 3.10+).
        return await self._ctx.run(asyncio.ensure_future, _awaited(make()))

    async def _perform(self, effect: Any) -> Any:
        """An effect done in the stream's context: awaited in an async stream, plainly in a sync one."""
        return await self._call(effect.arun if self._awaits else effect.run)

    async def _next(self) -> StreamEvent | None:
        """The next event, or None when the stream has ended."""
        if self._finished:
            return None
        if self._asking is not None:  # what the consumer answered (or None) goes to the pipeline
            self._resume = (False, self._answer)
            self._asking = self._answer = None
        while True:
            if self._chunks is not None:
                event = await self._read_chunk()
            else:
                effect = self._step()
                event = self._event(effect)
                if event is None and isinstance(effect, Send):
                    event = await self._send(effect)
                elif event is None:
                    try:
                        self._resume = (False, await self._perform(effect))
                    except BaseException as error:
                        self._failed(error)
            if event is not None:
                return event

    def _step(self) -> Any:
        """Advance the steps in the stream's context: the next effect, or a "done" event at the end."""
        throw, value = self._resume
        try:
            if throw:
                return self._ctx.run(self._steps.throw, value)
            return self._ctx.run(self._steps.send, value)
        except StopIteration as done:
            self._finished = True
            result = done.value
            self.value, self.record = result.value, result.record
            return StreamEvent("done", value=result.value, record=result.record)
        except BaseException:
            self._finished = True
            raise

    def _event(self, effect: Any) -> StreamEvent | None:
        """The event an effect is for the consumer (a note, a question), or None to perform it."""
        kind = type(effect)
        if kind is StreamEvent:
            return effect  # type: ignore[no-any-return]
        if kind is Note:
            self._resume = (False, None)
            return StreamEvent(effect.kind, **effect.fields)
        if kind is Ask:
            self._asking, self._takes = effect.approval, effect.takes
            return StreamEvent("waiting", approvals=[dict(effect.approval)])
        return None

    async def _send(self, effect: Send) -> StreamEvent | None:
        """Start sending a request: the chunks to read next, or the whole reply as one text event."""
        guards = getattr(effect, "guards", None)  # a `GuardedSend`: the call has stream guards
        try:
            scope = effect.scope
            if scope is not None and not scope.records:  # a turn that records nothing: asked as it is
                reply = await self._perform(effect)
            else:
                reply = scope.replay(effect.request) if scope is not None else None
                if reply is None:
                    self._keep = scope
                    method = getattr(effect.client, "astream" if self._awaits else "stream", None)
                    if method is not None:
                        chunks = self._ctx.run(method, effect.request)
                        self._chunks = chunks.__aiter__() if self._awaits else iter(chunks)
                        if guards is not None:
                            self._guarding = Guarding(guards)
                            self._pull = self._guarding.pull
                        return None
                    reply = await self._perform(Send(effect.client, effect.request, None))
            if guards is not None and reply.text:  # the whole reply, guarded as one final piece
                guarding = Guarding(guards)
                await self._guarded(guarding, reply.text, True)
                reply = guarding.reply(reply)
            if guards is not None:  # the pipeline guards the reply's other parts, then keeps it
                guards.unkept, self._keep = self._keep, None
        except BaseException as error:
            self._failed(error)
            return None
        self._got(reply)
        return StreamEvent("text", text=reply.text) if reply.text else None

    async def _read_chunk(self) -> StreamEvent | None:
        """The next text delta's event; at the stream's end, none: the reply goes to the pipeline.
        With guards, the text they release (none while they hold it), and at the end what they
        release last."""
        chunks = self._chunks
        guarding = self._guarding
        try:
            if guarding is None:
                if self._awaits:
                    item = await self._call(chunks.__anext__)
                else:
                    item = self._ctx.run(next, chunks, _END)
            elif self._awaits:  # the next piece, and what the guards release of it, in one step
                item = await self._call(lambda: _guarded_anext(chunks, guarding))
            else:
                item = self._ctx.run(self._pull, chunks, _END)
                if item.__class__ is Pending:
                    item = await self._resumed(guarding, item)
        except StopAsyncIteration:
            item = _END
        except BaseException as error:
            self._chunks = self._guarding = self._pull = None
            self._failed(error)
            if guarding is not None:  # a guard may have stopped the reply: its connection is closed now
                try:
                    await self._close_chunks(chunks)
                except Exception:  # noqa: BLE001 - the error that ended the reply is the one to report
                    pass
            return None
        if isinstance(item, str):
            return StreamEvent("text", text=item) if item else None
        self._chunks = self._guarding = self._pull = None
        if item is _END:
            self._failed(FunctAIError("the model's stream ended before its reply was complete (no reply at its end)",
                                      code="model-unreachable"))
            return None
        released = ""
        if guarding is not None:
            try:
                released = await self._guarded(guarding, None, True)
                item = guarding.reply(item)
            except BaseException as error:
                self._failed(error)
                return None
            guarding.guards.unkept, self._keep = self._keep, None  # kept once its other parts are guarded
        self._got(item)
        return StreamEvent("text", text=released) if released else None

    async def _guarded(self, guarding: Guarding, piece: str | None, final: bool) -> str:
        """What the guards release of ``piece`` (None: the reply ended), awaiting ``async def`` handlers."""
        out = self._ctx.run(guarding.end) if piece is None else self._ctx.run(guarding.feed, piece, final)
        return out if out.__class__ is str else await self._resumed(guarding, out)

    async def _resumed(self, guarding: Guarding, out: Any) -> str:
        """Await each pending handler (plainly in a sync stream) and run the ones after it."""
        while out.__class__ is Pending:
            awaitable = out.awaitable
            try:
                if self._awaits:
                    result = await self._call(_returning(awaitable))
                else:
                    result = self._ctx.run(run_awaitable, awaitable)
            except Exception as error:
                raise guarding.failed(error) from error
            out = self._ctx.run(guarding.resumed, result)
        return out  # type: ignore[no-any-return]

    def _got(self, reply: Any) -> None:
        if self._keep is not None:
            keep, self._keep = self._keep, None
            keep.keep(reply)
        self._resume = (False, reply)

    def _failed(self, error: BaseException) -> None:
        self._keep = None
        self._resume = (True, error)

    async def _close_chunks(self, chunks: Any) -> None:
        close = getattr(chunks, "aclose" if self._awaits else "close", None)
        if close is not None:
            await self._call(close)

    async def _close(self) -> None:
        if not self._finished:
            self._finished = True
            chunks, self._chunks = self._chunks, None
            try:
                await self._close_chunks(chunks)
            finally:
                self._ctx.run(self._steps.close)


class Stream(_Stream[V]):
    """``fn.stream(...)``: an iterator of `StreamEvent`; ``.value`` and ``.record`` when it ends.

    Use it as ``with fn.stream(...) as stream:``: leaving the block ends the call at once;
    a loop left without it keeps the call (and its turn ``running``) until the stream is collected.
    """

    def __iter__(self) -> "Stream[V]":
        return self

    def __enter__(self) -> "Stream[V]":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the call if it has not ended: the reply's connection is closed, the record says
        ``interrupted`` and a conversation turn ends ``stopped``."""
        run_now(self._close())

    def __next__(self) -> StreamEvent:
        event = run_now(self._next())
        if event is None:
            raise StopIteration
        return event


class AStream(_Stream[V]):
    """``fn.astream(...)``: an async iterator of `StreamEvent`; ``.value`` and ``.record`` when it ends."""

    _awaits = True

    def __aiter__(self) -> "AStream[V]":
        return self

    async def __aenter__(self) -> "AStream[V]":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """`Stream.close` for async code: ``async with chat.astream(...) as stream`` calls it."""
        await self._close()

    async def __anext__(self) -> StreamEvent:
        event = await self._next()
        if event is None:
            raise StopAsyncIteration
        return event


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _returning(value: Any) -> Callable[[], Any]:
    return lambda: value


async def _guarded_anext(chunks: Any, guarding: Guarding) -> Any:
    """An async stream's next item: what the guards release of a piece (awaiting ``async def``
    handlers), or the reply."""
    item = await chunks.__anext__()
    if item.__class__ is not str:
        return item
    out = guarding.feed(item)
    while out.__class__ is Pending:
        try:
            result = await out.awaitable
        except Exception as error:
            raise guarding.failed(error) from error
        out = guarding.resumed(result)
    return out
