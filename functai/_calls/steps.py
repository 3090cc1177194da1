"""The call as a sans-I/O state machine, and the drivers that run it.

The pipeline (`functai._calls.run`, `functai._calls.toolrun`) is a generator that
*yields* effects (send a request, run a tool, await a handler, ask a person,
note a stream event) and is *sent* their results. `drive` performs them
plainly, `adrive` with ``await``, `functai._calls.streaming` for a consumer:
records, changes and replay cannot differ by driver.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Generator, TypeVar

from . import limits

if TYPE_CHECKING:
    from .scope import TurnScope

T = TypeVar("T")

#: What the pipeline's generators are: they yield effects and return a value.
Steps = Generator["Effect", Any, T]


class Effect:
    """Something the pipeline needs done; ``run`` does it in a plain call (by default, nothing)."""

    __slots__ = ()

    def run(self) -> Any:
        return None

    async def arun(self) -> Any:
        return self.run()


class Send(Effect):
    """Send a request to the model client (through the turn, when there is one)."""

    __slots__ = ("client", "request", "scope")

    def __init__(self, client: Any, request: Any, scope: TurnScope | None) -> None:
        self.client = client
        self.request = request
        self.scope = scope

    def run(self) -> Any:
        if self.scope is None:
            return self.client.complete(self.request)
        return self.scope.complete(self.client, self.request)

    async def arun(self) -> Any:
        scope = self.scope
        if scope is not None and not scope.records:  # only the plain path: keep the loop free
            return await in_thread(scope.complete, self.client, self.request)
        reply = scope.replay(self.request) if scope is not None else None
        if reply is None:
            method = getattr(self.client, "acomplete", None)
            if method is not None:
                asked = await method(self.request)
            else:  # a client without it: complete, in a worker thread
                asked = await in_thread(self.client.complete, self.request)
            if scope is not None:
                scope.keep(asked)
            return asked
        return reply


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``asyncio.to_thread``: ``fn`` in a worker thread, with this context."""
    import asyncio  # here, not at import: ``import functai`` leaves asyncio out

    return await asyncio.to_thread(fn, *args)


class Await(Effect):
    """Await what an ``async def`` handler returned."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Any) -> None:
        self.awaitable = awaitable

    def run(self) -> Any:
        return run_awaitable(self.awaitable)

    async def arun(self) -> Any:
        return await self.awaitable


def run_awaitable(awaitable: Any) -> Any:
    """Run an ``async def`` handler's coroutine to its end from a plain call: in a new loop, or,
    inside a running loop (which cannot be re-entered), in a loop on a helper thread."""
    import asyncio  # here, not at import: ``import functai`` leaves asyncio out

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    import concurrent.futures
    import contextvars

    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, asyncio.run, wait()).result()


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


class Pause(Effect):
    """Wait ``seconds`` before asking again (a ``model_error`` handler's ``retry``)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self) -> None:
        time.sleep(self.seconds)

    async def arun(self) -> None:
        import asyncio  # here, not at import: ``import functai`` leaves asyncio out

        await asyncio.sleep(self.seconds)


class Ask(Effect):
    """Ask the person at the stream whether a tool call may run, or a question a plugin asked before a
    request: ``(allow, reason, given)`` — ``given`` the edited inputs of a tool call, the extension
    granted for a request — or None when nobody answered (then the call goes on as it would without a
    stream). ``takes``: the tool's inputs (`functai._calls.toolinputs.ToolInputs`), which an edit on
    approving may change; None for a request's question."""

    __slots__ = ("approval", "takes")

    def __init__(self, approval: dict[str, Any], takes: Any) -> None:
        self.approval = approval
        self.takes = takes


class Note(Effect):
    """An event for the stream's consumer (a tool call, a tool result): a `StreamEvent`'s kind and fields."""

    __slots__ = ("kind", "fields")

    def __init__(self, kind: str, **fields: Any) -> None:
        self.kind = kind
        self.fields = fields


def drive(steps: Steps[T]) -> T:
    """Run the pipeline in a plain call: each effect done where it is asked for."""
    return run_now(_drive(steps, False))


def adrive(steps: Steps[T]) -> Coroutine[Any, Any, T]:
    """Run the pipeline in a coroutine: each effect awaited, the event loop free meanwhile."""
    return _drive(steps, True)


async def _drive(steps: Steps[T], awaits: bool) -> T:
    """The one driver loop; ``awaits`` False runs each effect plainly, so nothing is ever awaited."""
    try:
        effect = steps.send(None)
        while True:
            try:
                result = (await effect.arun()) if awaits else effect.run()
            except BaseException as error:
                effect = steps.throw(error)
            else:
                effect = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]  # a generator's return value, typed by Steps[T]


def run_now(coroutine: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that awaits nothing (a driver run plainly), without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a plain driver awaited something")  # pragma: no cover
