"""What functai survived and went on from — a line skipped, a hook that failed where failing is
heard past, a request retried — as log events, the way a library should.

An event goes to structlog when the application configured structlog (its processors then
render it), else to the standard library's ``functai`` logger, which is silent until the
application configures logging (it has a ``NullHandler``). Never both, and never a Python
warning: warnings are for what a developer must change (deprecations), and an application run
with ``-W error`` must not fail a call over a survived event. functai never configures logging,
and imports neither structlog nor ``logging`` until there is an event (``import functai`` stays
light).
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import logging

WARNING, INFO = 30, 20  # the standard library's levels, without importing it

_logger: logging.Logger | None = None


def logger() -> logging.Logger:
    """The standard library's ``functai`` logger (with its ``NullHandler``)."""
    global _logger
    if _logger is None:
        import logging

        found = logging.getLogger("functai")
        found.addHandler(logging.NullHandler())
        _logger = found
    return _logger


def _configured() -> Any:
    """The structlog module when the application imported and configured it, else None."""
    structlog = sys.modules.get("structlog")
    if structlog is None:
        return None
    try:
        return structlog if structlog.is_configured() else None
    except AttributeError:  # a half-imported or stand-in module
        return None


def _emit(level: int, event: str, fields: dict[str, Any]) -> None:
    structlog = _configured()
    if structlog is not None:
        getattr(structlog.get_logger("functai"), "warning" if level >= WARNING else "info")(event, **fields)
        return
    found = logger()
    if found.isEnabledFor(level):
        where = " ".join(f"{k}={v}" for k, v in fields.items())
        # ``functai_event`` and ``functai_fields``: the event as data, for a handler or a test to read
        found.log(level, "%s: %s", event, where, extra={"functai_event": event, "functai_fields": fields},
                  stacklevel=3)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No events from inside the block through the ``functai`` logger: a command that lists what
    it skipped itself (``functai conversation``, ``functai plugins``)."""
    found = logger()
    before, found.disabled = found.disabled, True
    try:
        yield
    finally:
        found.disabled = before


def warn(event: str, **fields: Any) -> None:
    """Something failed, and functai went on (the event names what, the fields where and why)."""
    _emit(WARNING, event, fields)


def info(event: str, **fields: Any) -> None:
    """Something a person running the program may want to know (a plugin loaded, say)."""
    _emit(INFO, event, fields)
