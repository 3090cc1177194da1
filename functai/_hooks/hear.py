"""Running a hook that only hears (``call_end``, ``turn_end``): what a handler
returns is ignored, and one that raises is reported as a warning, so a tracer's bug never fails a call.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from .._calls.steps import Await, Steps, drive
from .._log import warn
from .events import Event
from .order import Handler


def hear(
    hook: str,
    handlers: Sequence[Handler],
    event: Event,
    heard: list[dict[str, Any]] | None = None,
    **where: Any,
) -> None:
    """`hear_now` outside the pipeline (an ``async def`` handler runs on a private event loop)."""
    rest = hear_now(hook, handlers, event, heard, **where)
    if rest is not None:
        drive(rest)


def hear_now(
    hook: str,
    handlers: Sequence[Handler],
    event: Event,
    heard: list[dict[str, Any]] | None = None,
    **where: Any,
) -> Steps[None] | None:
    """Run each handler of ``hook`` on ``event``; ``heard`` (with ``record_timing``) gets each one's
    ``{"plugin", "version", "hook", "µs"}``. The steps left once a handler is ``async def``, else None."""
    data = event.__dict__
    for index, (plugin, handler) in enumerate(handlers):
        data["_plugin"] = plugin.name
        started = time.perf_counter_ns() if heard is not None else 0
        try:
            result = handler(event)
        except Exception as error:
            _failed(hook, plugin, error, where)
            result = None
        if result is not None and hasattr(result, "__await__"):
            return _awaiting(hook, handlers[index:], result, event, heard, started, where)
        if heard is not None:
            note_heard(heard, hook, plugin, started)
    data["_plugin"] = None
    return None


def _awaiting(hook: str, handlers: Sequence[Handler], result: Any, event: Event,
              heard: list[dict[str, Any]] | None, started: int, where: dict[str, Any]) -> Steps[None]:
    """Await the first handler's result, then hear the rest."""
    plugin = handlers[0][0]
    try:
        yield Await(result)
    except Exception as error:
        _failed(hook, plugin, error, where)
    if heard is not None:
        note_heard(heard, hook, plugin, started)
    rest = hear_now(hook, handlers[1:], event, heard, **where)
    if rest is not None:
        yield from rest


def _failed(hook: str, plugin: Any, error: Exception, where: dict[str, Any]) -> None:
    warn("hook failed", plugin=plugin.name, version=plugin.version, hook=hook,
         error=f"{type(error).__name__}: {error}", **where)


def note_heard(heard: list[dict[str, Any]], hook: str, plugin: Any, started: int) -> None:
    heard.append({"plugin": plugin.name, "version": plugin.version, "hook": hook,
                  "µs": round((time.perf_counter_ns() - started) / 1000, 1)})
