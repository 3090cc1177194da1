"""Stream guards: a call's ``chunk`` handlers see a reply's text before any of it is shown, and
may hold it back, redact it or stop the reply.

One `Guards` per call, made only when the call's plan has ``chunk`` handlers (a call without
them never reaches this module); one `Guarding` per text guarded. The stream driver feeds a
reply's pieces as they arrive; a reply that was not streamed is fed whole, once, as the final
piece. What a `Guarding` releases is all that is shown, and the reply's text becomes exactly
that. The rest of what a reply carries and a call keeps — its reasoning, a refusal's words, an
error's message — is guarded whole, each as its own ``part``, before anything keeps it.
"""

from __future__ import annotations

from os.path import commonprefix
from typing import Any, Callable

import attrs

from .._errors import FunctAIError, PluginError
from .._hooks.change import Change
from .._hooks.events import ChunkEvent
from .._hooks.fold import check_change, handler_error, record, refusal, refuse
from .._hooks.order import Handler
from .._hooks.plugin import Plugin
from .._models.request import Reply
from .._models.thinking import split_reasoning
from .scope import TurnScope
from .steps import Await, Send, Steps, in_thread

#: The code of a call whose reply a ``chunk`` handler stopped.
STOPPED = "plugin-refused"

#: What a reply carries besides its text that a call shows or keeps: guarded whole, in this order.
PARTS = ("reasoning", "refusal")

_HOLD = {"hold": True}  # what a plain hold's fields are


class Pending:
    """A handler returned an awaitable: await it, then give its result to `Guarding.resumed`."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Any) -> None:
        self.awaitable = awaitable


class Guards:
    """One call's ``chunk`` handlers, in order, and where their changes are recorded."""

    __slots__ = ("handlers", "changes", "function", "path", "call", "guarded", "unkept", "made")

    def __init__(self, handlers: tuple[Handler, ...], changes: list[dict[str, Any]], function: str, path: str,
                 call: str) -> None:
        self.handlers = handlers
        self.changes = changes
        self.function = function
        self.path = path
        self.call = call
        #: The last reply a stream driver guarded as it streamed: the pipeline does not guard it again.
        self.guarded: Reply | None = None
        #: The turn that keeps the reply just received, once it is guarded (see `GuardedSend`).
        self.unkept: Any = None
        #: The redactions recorded for the reply being guarded (a turn keeps them with it).
        self.made: list[dict[str, Any]] = []

    def whole(self, reply: Reply) -> Steps[Reply]:
        """``reply`` with all it shows or keeps guarded: its text (fed whole, as the final piece,
        unless a stream driver guarded it as it streamed), then each of its `PARTS`; kept by the
        turn only then."""
        if reply is not self.guarded:
            self.made = []
            if reply.text:  # no text to show: the guards are not asked for it
                guarding = Guarding(self)
                yield from guarding.whole(reply.text)
                reply = guarding.reply(reply)
        self.guarded = None
        for part in PARTS:
            text = getattr(reply, part)
            if text:
                guarded = yield from self.text(text, part)
                if guarded != text:
                    reply = attrs.evolve(reply, **{part: guarded})  # type: ignore[arg-type]  # a str field
        scope, self.unkept = self.unkept, None
        if scope is not None:
            if self.made:  # a resumed turn reads this reply instead of asking: it records them again
                acts = scope.acts or {}
                scope.acts = {**acts, "acts": [*acts.get("acts", ()), *self.made]}
            scope.keep(reply)
        return reply

    def text(self, text: str, part: str) -> Steps[str]:
        """``text``, one whole `part` of what a call shows or keeps (not the reply's text), as the guards
        leave it. A stop refuses the call, as in the reply's text."""
        guarding = Guarding(self, part)
        yield from guarding.whole(text)
        return "".join(guarding.pieces)

    def error(self, error: FunctAIError) -> Steps[None]:
        """Guard ``error``'s message in place (part ``error``): the caller, the record and the store
        read it. A guard that stops it leaves a message that says so and quotes nothing."""
        try:
            message = yield from self.text(error.message, "error")
        except PluginError as stop:
            if stop.code != STOPPED:
                raise
            message = f"the error's message was withheld: plugin {stop.plugin!r} stopped it in chunk"
        if message != error.message:
            error.message = message
            error.args = (message,)


class GuardedSend(Send):
    """A request sent in a call with guards: a stream driver guards the reply's pieces as they come.
    Sent in a turn, the reply is kept for a resumed turn only once guarded: a redacted secret never
    reaches the store."""

    __slots__ = ("guards",)

    def __init__(self, client: Any, request: Any, scope: TurnScope | None, guards: Guards) -> None:
        super().__init__(client, request, scope)
        self.guards = guards

    def run(self) -> Any:
        scope = self.scope
        if scope is None or not scope.records:
            return super().run()
        reply = scope.replay(self.request)
        if reply is None:
            reply = self.client.complete(self.request)
            self.guards.unkept = scope
        return reply

    async def arun(self) -> Any:
        scope = self.scope
        if scope is None or not scope.records:
            return await super().arun()
        reply = scope.replay(self.request)
        if reply is None:
            method = getattr(self.client, "acomplete", None)
            asked = method(self.request) if method is not None else in_thread(self.client.complete, self.request)
            reply = await asked
            self.guards.unkept = scope
        return reply


class Guarding:
    """The guards over one text (a reply's, or one of its other `PARTS`): what is held back, what
    was shown, the handler awaited."""

    __slots__ = ("guards", "handlers", "event", "data", "pieces", "held", "shown", "window", "at", "redactions",
                 "part")

    def __init__(self, guards: Guards, part: str = "text") -> None:
        self.guards = guards
        self.handlers = guards.handlers
        self.part = part
        if part == "text":  # a new reply: the redactions a turn keeps with it start again
            guards.made = []
        #: What was shown, piece by piece (the event's ``shown`` joins them when a handler reads it).
        self.pieces: list[str] = []
        self.event = ChunkEvent(text="", shown=self.pieces, final=False, part=part, function=guards.function,
                                path=guards.path, call=guards.call)
        self.data = self.event.__dict__
        self.held = ""
        self.shown = 0  # characters shown so far
        self.window = -1  # the largest window of a handler that held this piece; -1: none held
        self.at = 0  # the handler awaited (`Pending`)
        self.redactions: list[dict[str, Any]] = []  # this text's, whose offsets later ones may move

    def whole(self, text: str) -> Steps[None]:
        """Feed ``text`` once, as the final piece, awaiting ``async def`` handlers."""
        out = self.feed(text, True)
        while out.__class__ is Pending:
            try:
                result = yield Await(out.awaitable)
            except Exception as error:
                raise self.failed(error) from error
            out = self.resumed(result)

    def feed(self, piece: str, final: bool = False) -> str | Pending:
        """Give the guards a piece: the text they release now (maybe ""), or a `Pending` to await.

        The usual piece, inline: every handler returns None or a plain hold, and what is released
        is all the text or what passes the window; anything else goes on in `_run`."""
        event = self.event
        data = self.data
        held = self.held
        text = data["text"] = held + piece if held else piece
        if final:
            data["final"] = True
        window = -1
        index = 0
        for plugin, handler in self.handlers:
            try:
                result = handler(event)
            except Exception as error:
                raise self._failed(plugin, handler, error) from error
            if result is not None:
                if result.__class__ is Change and plugin.chunk_window and result.__dict__ == _HOLD:
                    if plugin.chunk_window > window:
                        window = plugin.chunk_window
                else:
                    self.window = window
                    return self._run(index, result)
            index += 1
        if window >= 0 and not final:
            self.window = window
            return self._release()
        if held:
            self.held = ""
        if text:
            self.pieces.append(text)
            self.shown += len(text)
            if self.redactions:
                self.redactions = []  # all shown: none can move
        return text

    def pull(self, chunks: Any, end: Any) -> Any:
        """A sync stream's next item: what the guards release of a piece, the reply, or ``end``."""
        item = next(chunks, end)
        return self.feed(item) if item.__class__ is str else item

    def end(self) -> str | Pending:
        """The reply is complete: what is held goes through the guards once more, as final."""
        if not self.held and not self.shown:
            self.data["final"] = True
            return ""  # a reply without text: nothing to guard
        return self.feed("", True)

    def resumed(self, result: Any) -> str | Pending:
        """Fold in the awaited handler's result and run the handlers after it."""
        plugin, handler = self.handlers[self.at]
        if result is not None:
            self._apply(plugin, handler, result)
        return self._run(self.at + 1, None)

    def failed(self, error: Exception) -> Exception:
        """What to raise when the awaited handler raised."""
        return self._failed(*self.handlers[self.at], error)

    def _failed(self, plugin: Plugin, handler: Callable[[Any], Any], error: Exception) -> Exception:
        """A handler's refusal (a `FunctAIError` it raised) stops the reply; anything else is its error."""
        refused = refusal(error)
        if refused is None:
            return handler_error(plugin, "chunk", error)
        return self._stop(plugin, handler, refused.message, None, refused.code)

    def _stop(self, plugin: Plugin, handler: Callable[[Any], Any], reason: str, note: str | None,
              code: str | None) -> PluginError:
        """Record that the handler stopped the reply here; the error the call fails with."""
        data: dict[str, Any] = {"stop": reason, "at": self.shown}
        if code is not None:
            data["code"] = code
        if self.part != "text":
            data["part"] = self.part
        self.guards.changes.append(record(plugin, "chunk", data, handler, self.event, note))
        return stopped(plugin, reason, self.shown, code)

    def reply(self, reply: Reply) -> Reply:
        """``reply`` with its text as shown; `Guards.whole` will not guard that text again. A leading
        reasoning block the stream showed (``<think>…</think>``) is not the answer: the reply's
        reasoning, guarded as its own part, holds it, as when the reply is not streamed."""
        text = split_reasoning("".join(self.pieces))[0]
        if text != (reply.text or ""):
            reply = attrs.evolve(reply, text=text)
        self.guards.guarded = reply
        return reply

    def _run(self, index: int, result: Any) -> str | Pending:
        """Fold in handler ``index``'s result (None: call it first) and run the handlers after it."""
        handlers = self.handlers
        event = self.event
        while index < len(handlers):
            plugin, handler = handlers[index]
            if result is None:
                try:
                    result = handler(event)
                except Exception as error:
                    raise self._failed(plugin, handler, error) from error
            if result is not None:
                if result.__class__ is not Change and hasattr(result, "__await__"):
                    self.at = index
                    return Pending(result)
                self._apply(plugin, handler, result)
            result = None
            index += 1
        return self._release()

    def _apply(self, plugin: Plugin, handler: Callable[[Any], Any], result: Any) -> None:
        change = check_change(plugin, "chunk", result, handler)
        if change is None:
            return
        if change.stop is not None:
            raise self._stop(plugin, handler, change.stop, change.note, None)
        if change.text is not None:
            self._redact(plugin, handler, change)
        if change.hold:
            if not plugin.chunk_window:
                raise refuse(plugin, "chunk", "hold", "the plugin may hold no text back: give it a window, "
                                                      "Plugin(..., chunk_window=64), the most characters it holds")
            if plugin.chunk_window > self.window:
                self.window = plugin.chunk_window

    def _redact(self, plugin: Plugin, handler: Callable[[Any], Any], change: Change) -> None:
        """Show ``change.text`` instead of what is held, recording the span it changed as offsets
        in the reply's shown text: ``{"text", "at": [start, end], "replaced": n}``."""
        data = self.data
        old, new = data["text"], change.text
        assert new is not None
        if new == old:
            return
        same = len(commonprefix((old, new)))
        rest = min(len(old), len(new)) - same
        tail = len(commonprefix((old[::-1][:rest], new[::-1][:rest])))
        start, end = self.shown + same, self.shown + len(new) - tail
        moved = len(new) - len(old)
        for earlier in self.redactions:  # later in the text than this one's span: shifted by it
            if earlier["at"][0] >= self.shown + len(old) - tail:
                earlier["at"] = [earlier["at"][0] + moved, earlier["at"][1] + moved]
        data_change = {"text": new[same:len(new) - tail], "at": [start, end], "replaced": len(old) - tail - same}
        if self.part != "text":
            data_change["part"] = self.part
        self.redactions.append(data_change)
        entry = record(plugin, "chunk", data_change, handler, self.event, change.note)
        self.guards.changes.append(entry)
        if self.part != "error":  # an error is not kept with the reply
            self.guards.made.append(entry)
        data["text"] = new

    def _release(self) -> str:
        data = self.data
        text: str = data["text"]
        window = self.window
        if window < 0 or data["final"]:
            released, self.held = text, ""
        elif len(text) > window:
            cut = len(text) - window
            released, self.held = text[:cut], text[cut:]
        else:
            self.held = text
            return ""
        if released:
            self.pieces.append(released)
            self.shown += len(released)
            if self.redactions:  # only those still held can move
                self.redactions = [r for r in self.redactions if r["at"][1] > self.shown]
        return released


def stopped(plugin: Plugin, reason: str, shown: int, code: str | None = None) -> PluginError:
    """The error of a call whose reply a ``chunk`` handler stopped: a refusal, with the reason (and
    the code of the error the handler raised, ``details["refused"]``)."""
    error = PluginError(
        f"plugin {plugin.name!r} {plugin.version} stopped the reply in chunk: {reason}. The {shown} characters "
        "shown before stay shown; the rest was not, and the call failed as a refusal (asking again the same way "
        "is stopped again: change the request, or the guard)",
        code=STOPPED, plugin=plugin.name, hook="chunk",
    )
    error.details["reason"] = reason
    if code is not None:
        error.details["refused"] = code
    return error
