"""The bounds on nested calls, whichever thread a nested call runs on.

A call finds the call it is nested in through a contextvar, so a thread that
runs in a copy of the context is counted (`Budget` is shared by the whole tree).
A thread started without a copy carries nothing: counting its call as a new
outermost one would give every such hop a fresh budget, so while any tool runs
such a call is refused (`placeless`). The main thread is never a tool's.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import TYPE_CHECKING

from .._errors import FunctAIError

if TYPE_CHECKING:
    from .program import Program


class Budget:
    """The model requests an outermost call and every call nested in it may make (one lock for
    every budget: making one costs nothing more)."""

    __slots__ = ("used", "limit", "function", "call")

    def __init__(self, limit: int, function: str, call: str | None = None) -> None:
        self.used = 0
        self.limit = limit
        self.function = function
        #: The outermost call's record id: the calls nested in it share this budget.
        self.call = call

    def spend(self, fn: Program) -> None:
        """Count one model request; refuse ``max-requests`` past the limit."""
        with _spend_lock:
            self.used = used = self.used + 1
        if used > self.limit:
            inside = "" if fn.name == self.function else f" (the last asked by {fn.name}, nested in it)"
            raise FunctAIError(
                f"{self.function} made max_requests={self.limit} model requests, counting every AI function "
                f"called inside it{inside}, and needed another; raise max_requests, or check why the calls keep "
                "asking (an AI function that calls itself as a tool?)",
                code="max-requests",
            )


_spend_lock = threading.Lock()

#: Tool bodies running in this process now (any thread, any call).
running = 0
_running_lock = threading.Lock()


def tool_started() -> None:
    global running
    with _running_lock:
        running += 1


def tool_ended() -> None:
    global running
    with _running_lock:
        running -= 1


#: True in the main thread's context (and every copy of it): calls there are never a tool's by accident.
_main: ContextVar[bool] = ContextVar("functai_main_context", default=False)
if threading.current_thread() is threading.main_thread():
    _main.set(True)


def placeless(path: str) -> FunctAIError | None:
    """The refusal of an outermost call that may be nested where functai cannot count it, or None."""
    if _main.get() or threading.current_thread() is threading.main_thread():
        return None
    return FunctAIError(
        f"{path} was called on a thread that does not carry functai's context while a tool is running in "
        "this process, so functai cannot tell whether a tool started it and cannot count it against "
        "max_depth and max_requests; start the thread's work in a copy of the context "
        "(pool.submit(contextvars.copy_context().run, fn, ...), asyncio.to_thread), or, for a call that "
        "belongs to no running call, in a copy made on the main thread",
        code="thread-context",
    )
