"""Per-handler timing for ``record_timing=True``: a call runs with a copy of its plan whose
changing hooks' handlers are wrapped in `Timed`; with the setting off nothing is wrapped.
"""

from __future__ import annotations

import time
from copy import copy as copy_of
from typing import Any, Callable

from .order import Plan

#: Hooks whose handlers are timed by the code that runs them, not wrapped.
HEARING = frozenset({"reply", "call_end", "turn_end", "turn_wait", "turn_answer"})


class Timed:
    """A handler that notes on the event how long it took, in µs."""

    __slots__ = ("fn", "__wrapped__")

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.__wrapped__ = fn

    def __call__(self, event: Any) -> Any:
        started = time.perf_counter_ns()
        try:
            result = self.fn(event)
        finally:
            _note(event, started)
        if result is not None and hasattr(result, "__await__"):  # async def: timed until awaited
            return _until_done(result, event, started)
        return result


def _note(event: Any, started: int) -> None:
    object.__setattr__(event, "_us", round((time.perf_counter_ns() - started) / 1000, 1))


async def _until_done(awaitable: Any, event: Any, started: int) -> Any:
    try:
        return await awaitable
    finally:
        _note(event, started)


def timed(plan: Plan) -> Plan:
    """The plan with every changing hook's handler wrapped in `Timed` (made once per plan)."""
    if plan.timed is None:
        copy = copy_of(plan)
        copy.handlers = {
            hook: handlers if hook in HEARING else tuple((plugin, Timed(fn)) for plugin, fn in handlers)
            for hook, handlers in plan.handlers.items()
        }
        plan.timed = copy
    return plan.timed
