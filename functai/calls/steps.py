"""The call as a sans-I/O state machine, and the drivers that run it.

The pipeline (`functai.calls.run`, `functai.calls.tools`) is written once, as
a generator that never does I/O itself: it *yields* an effect — send this
request, run this tool, await this handler's coroutine, ask a person, note
a stream event — and is *sent* the result (or has the failure thrown into
it). A driver performs the effects: `drive` plainly, `adrive` with ``await``,
and the streams of `functai.calls.streaming` while handing events to a
consumer. So records, changes, waiting turns and replay cannot differ by
driver: there is only one pipeline.
"""

from __future__ import annotations

from typing import Any, Generator, TypeVar

from . import limits

T = TypeVar("T")

#: What the pipeline's generators are: they yield effects and return a value.
Steps = Generator["Effect", Any, T]


class Effect:
    """Something the pipeline needs done; ``run`` does it in a plain call."""

    __slots__ = ()

    def run(self) -> Any:
        raise NotImplementedError

    async def arun(self) -> Any:
        return self.run()


class Send(Effect):
    """Send a request to the model client (through the turn, when there is one)."""

    __slots__ = ("client", "request", "scope")

    def __init__(self, client: Any, request: Any, scope: Any) -> None:
        self.client = client
        self.request = request
        self.scope = scope

    def run(self) -> Any:
        if self.scope is None:
            return self.client.complete(self.request)
        return self.scope.complete(self.client, self.request)

    async def arun(self) -> Any:
        scope = self.scope
        if scope is None:
            method = getattr(self.client, "acomplete", None)
            if method is not None:  # awaited here, not through `acomplete`: one coroutine less per request
                return await method(self.request)
            return await acomplete(self.client, self.request)
        replay = getattr(scope, "replay", None)
        if replay is None:  # a scope that only offers the plain path: keep the loop free
            import asyncio

            return await asyncio.to_thread(scope.complete, self.client, self.request)
        reply = replay(self.request)
        if reply is None:
            reply = await acomplete(self.client, self.request)
            scope.keep(reply)
        return reply


async def acomplete(client: Any, request: Any) -> Any:
    """``client.acomplete(request)``, or ``complete`` in a worker thread for a client without it."""
    method = getattr(client, "acomplete", None)
    if method is not None:
        return await method(request)
    import asyncio

    return await asyncio.to_thread(client.complete, request)


class Await(Effect):
    """Await what an ``async def`` handler returned."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Any) -> None:
        self.awaitable = awaitable

    def run(self) -> Any:
        from ..hooks.hear import run_awaitable

        return run_awaitable(self.awaitable)

    async def arun(self) -> Any:
        return await self.awaitable


class Invoke(Effect):
    """Run a tool with its input (an ``async def`` tool is awaited)."""

    __slots__ = ("tool", "input")

    def __init__(self, tool: Any, input: dict[str, Any]) -> None:
        self.tool = tool
        self.input = input

    def run(self) -> Any:
        limits.tool_started()  # while it runs, a call on a thread without the context is refused
        try:
            value = self.tool.invoke(self.input)
            if value is not None and hasattr(value, "__await__"):
                from ..hooks.hear import run_awaitable

                value = run_awaitable(value)
            return value
        finally:
            limits.tool_ended()

    async def arun(self) -> Any:
        limits.tool_started()
        try:
            return await self.tool.ainvoke(self.input)
        finally:
            limits.tool_ended()


class Ask(Effect):
    """Ask the person at the stream whether a tool call may run: ``(allow, reason)``, or
    None when nobody answered (then the call goes on as it would without a stream)."""

    __slots__ = ("approval",)

    def __init__(self, approval: dict[str, Any]) -> None:
        self.approval = approval

    def run(self) -> Any:
        return None


class Note(Effect):
    """An event for the stream's consumer (a tool call, a tool result)."""

    __slots__ = ("event",)

    def __init__(self, event: Any) -> None:
        self.event = event

    def run(self) -> Any:
        return None


def drive(steps: Steps[T]) -> T:
    """Run the pipeline in a plain call: each effect done where it is asked for."""
    send = steps.send
    try:
        effect = send(None)
        while True:
            try:
                result = effect.run()
            except BaseException as error:
                effect = steps.throw(error)
            else:
                effect = send(result)
    except StopIteration as done:
        return done.value


async def adrive(steps: Steps[T]) -> T:
    """Run the pipeline in a coroutine: each effect awaited, the event loop free meanwhile."""
    send = steps.send
    try:
        effect = send(None)
        while True:
            try:
                result = await effect.arun()
            except BaseException as error:
                effect = steps.throw(error)
            else:
                effect = send(result)
    except StopIteration as done:
        return done.value


def settle(result: Any) -> Steps[Any]:
    """``result = yield from settle(handler(event))``: awaited when a handler was ``async def``."""
    if result is not None and hasattr(result, "__await__"):
        result = yield Await(result)
    return result
