"""Streamed calls: the pipeline's drivers that hand events to a consumer.

``fn.stream(...)`` and ``fn.astream(...)`` run the same steps as ``fn.run``
(`functai.calls.steps`); they differ only in what they do with an effect: a
request is sent with the client's ``stream``/``astream`` (each text delta is
a ``"text"`` event), a tool call and its result are ``"tool_call"`` and
``"tool_result"`` events, and an approval the pipeline would otherwise wait
or refuse on is a ``"waiting"`` event the consumer may answer with
`Stream.approve` / `Stream.deny` before asking for the next event.

The steps run in a context of their own (a copy of the caller's), so what a
call sets while it runs — the call in progress, a turn's settings — is never
seen by the consumer's code between events.
"""

from __future__ import annotations

import contextvars
from typing import Any, AsyncIterator, Iterator, Mapping

from ..errors import FunctAIError, approval_answered
from .run import now_text
from .steps import Ask, Note, Send, Steps

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


def _cut(where: str) -> FunctAIError:
    return FunctAIError(f"the model's stream ended before its reply was complete ({where})", code="model-unreachable")


class _Base:
    """What the sync and async streams share: the answers to approvals and the end."""

    _chunks: Any  # the reply being streamed (each stream sets its own kind): text deltas, then the reply

    def __init__(self, steps: Steps[Any]) -> None:
        self._steps = steps
        self._ctx = contextvars.copy_context()
        self._resume: tuple[bool, Any] = (False, None)
        self._asking: Mapping[str, Any] | None = None
        self._answer: tuple[bool, str | None] | None = None
        self._answered_at: str | None = None
        self._finished = False
        self._keep: Any = None  # the turn that keeps a streamed reply
        #: Set when the stream ends with its "done" event.
        self.value: Any = None
        self.record: Any = None

    def __del__(self) -> None:
        if not getattr(self, "_finished", True):  # dropped mid-call: end it in its own context
            try:
                self._finished = True
                self._ctx.run(self._steps.close)
            except Exception:  # noqa: BLE001 - nothing can be reported from a finalizer
                pass

    def approve(self, approval: Mapping[str, Any] | str | None = None) -> None:
        """Allow the tool call the last ``"waiting"`` event is about (before asking for the next event)."""
        self._give(approval, (True, None))

    def deny(self, approval: Mapping[str, Any] | str | None = None, *, reason: str | None = None) -> None:
        """Refuse the tool call the last ``"waiting"`` event is about; the model is shown ``reason``."""
        self._give(approval, (False, reason))

    def _give(self, approval: Mapping[str, Any] | str | None, answer: tuple[bool, str | None]) -> None:
        asking = self._asking
        if asking is None:
            raise FunctAIError("nothing in this stream waits for an answer: approve or deny right after a "
                               "'waiting' event, before asking for the next event", code="turn-not-waiting")
        if approval is not None:
            key = approval if isinstance(approval, str) else approval.get("key")
            if key != asking["key"]:
                raise FunctAIError(f"the stream waits for {asking['key']!r}, not {key!r}", code="turn-not-waiting")
        given = self._answer
        if given is not None and given[0] != answer[0]:
            first = {"allow": given[0], "reason": given[1], "at": self._answered_at}
            raise approval_answered(asking["key"], first, answer[0], who="at this stream")
        if given is None:  # answering again the same way changes nothing: the first answer (and reason) holds
            self._answer, self._answered_at = answer, now_text()

    def _answered(self) -> None:
        """The consumer asks for the next event: what it answered (or None) goes to the pipeline."""
        self._resume = (False, self._answer)
        self._asking = self._answer = None

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
            return effect
        if kind is Note:
            self._resume = (False, None)
            return effect.event
        if kind is Ask:
            self._asking = effect.approval
            return StreamEvent("waiting", approvals=[dict(effect.approval)])
        return None

    def _replayed(self, effect: Send) -> Any:
        """A reply the turn recorded before (None to ask the model); notes the turn that keeps a new one."""
        scope = effect.scope
        if scope is None:
            return None
        if getattr(scope, "replay", None) is None:
            return False  # a scope without the streaming seam: the plain path
        reply = scope.replay(effect.request)
        if reply is None:
            self._keep = scope
        return reply

    def _got(self, reply: Any) -> None:
        if self._keep is not None:
            keep, self._keep = self._keep, None
            keep.keep(reply)
        self._resume = (False, reply)

    def _failed(self, error: BaseException) -> None:
        self._keep = None
        self._resume = (True, error)

    def _chunk(self, item: Any) -> StreamEvent | None:
        """A text delta's event, or (the reply at the stream's end) none: the chunks are done."""
        if isinstance(item, str):
            return StreamEvent("text", text=item) if item else None
        self._chunks = None
        self._got(item)
        return None


class Stream(_Base):
    """``fn.stream(...)``: an iterator of `StreamEvent`; ``.value`` and ``.record`` when it ends.

    Use it as ``with fn.stream(...) as stream:``: leaving the block (a ``break``, an
    exception) ends the call at once. A loop left without it keeps the call — and a
    conversation turn, ``running`` — until the stream object is collected.
    """

    def __init__(self, steps: Steps[Any]) -> None:
        super().__init__(steps)
        self._chunks: Iterator[Any] | None = None

    def __iter__(self) -> "Stream":
        return self

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the call if it has not ended: the model's reply stops streaming (its connection
        is closed), the call's record says ``interrupted`` and a conversation turn ends ``stopped``."""
        if not self._finished:
            self._finished = True
            chunks, self._chunks = self._chunks, None
            try:
                if chunks is not None and hasattr(chunks, "close"):
                    self._ctx.run(chunks.close)
            finally:
                self._ctx.run(self._steps.close)

    def __next__(self) -> StreamEvent:
        if self._finished:
            raise StopIteration
        if self._asking is not None:
            self._answered()
        ctx = self._ctx
        while True:
            if self._chunks is not None:
                try:
                    item = ctx.run(next, self._chunks)
                except StopIteration:
                    self._chunks = None
                    self._failed(_cut("no reply at its end"))
                    continue
                except BaseException as error:
                    self._chunks = None
                    self._failed(error)
                    continue
                event = self._chunk(item)
                if event is not None:
                    return event
                continue
            effect = self._step()
            event = self._event(effect)
            if event is not None:
                return event
            if type(effect) is Send:
                text = self._send(effect)
                if text:
                    return StreamEvent("text", text=text)
                continue
            try:
                self._resume = (False, ctx.run(effect.run))
            except BaseException as error:
                self._failed(error)

    def _send(self, effect: Send) -> str | None:
        """Start sending a request: the chunks to read, or the whole reply (its text for one event)."""
        try:
            reply = self._replayed(effect)
            if reply is False:
                reply = self._ctx.run(effect.run)
            elif reply is None:
                method = getattr(effect.client, "stream", None)
                if method is not None:
                    self._chunks = iter(self._ctx.run(method, effect.request))
                    return None
                reply = self._ctx.run(effect.client.complete, effect.request)
        except BaseException as error:
            self._failed(error)
            return None
        self._got(reply)
        return reply.text  # a reply not streamed (recorded, or a client that cannot stream): one text event


class AStream(_Base):
    """``fn.astream(...)``: an async iterator of `StreamEvent`; ``.value`` and ``.record`` when it ends."""

    def __init__(self, steps: Steps[Any]) -> None:
        super().__init__(steps)
        self._chunks: AsyncIterator[Any] | None = None

    def __aiter__(self) -> "AStream":
        return self

    async def __aenter__(self) -> "AStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """`Stream.close` for async code: ``async with chat.astream(...) as stream`` calls it."""
        if not self._finished:
            self._finished = True
            chunks, self._chunks = self._chunks, None
            try:
                if chunks is not None and hasattr(chunks, "aclose"):
                    await self._in_context(chunks.aclose())
            finally:
                self._ctx.run(self._steps.close)

    async def _in_context(self, awaitable: Any) -> Any:
        import asyncio

        # A task made inside the stream's context runs in a copy of it (any Python 3.10+).
        return await self._ctx.run(asyncio.ensure_future, _awaited(awaitable))

    async def __anext__(self) -> StreamEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._asking is not None:
            self._answered()
        while True:
            if self._chunks is not None:
                try:
                    item = await self._in_context(self._chunks.__anext__())
                except StopAsyncIteration:
                    self._chunks = None
                    self._failed(_cut("no reply at its end"))
                    continue
                except BaseException as error:
                    self._chunks = None
                    self._failed(error)
                    continue
                event = self._chunk(item)
                if event is not None:
                    return event
                continue
            effect = self._step()
            event = self._event(effect)
            if event is not None:
                return event
            if type(effect) is Send:
                text = await self._send(effect)
                if text:
                    return StreamEvent("text", text=text)
                continue
            try:
                self._resume = (False, await self._in_context(effect.arun()))
            except BaseException as error:
                self._failed(error)

    async def _send(self, effect: Send) -> str | None:
        try:
            reply = self._replayed(effect)
            if reply is False:
                reply = await self._in_context(effect.arun())
            elif reply is None:
                method = getattr(effect.client, "astream", None)
                if method is not None:
                    self._chunks = self._ctx.run(method, effect.request).__aiter__()
                    return None
                from .steps import acomplete

                reply = await self._in_context(acomplete(effect.client, effect.request))
        except BaseException as error:
            self._failed(error)
            return None
        self._got(reply)
        return reply.text  # a reply not streamed (recorded, or a client that cannot stream): one text event


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
