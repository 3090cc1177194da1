"""Logging through structlog, the way a library should.

functai never configures logging; it emits events on the ``functai`` logger
and the application decides where they go. functai never imports structlog
for an event: an application that configured structlog has imported it
already, so an event goes through structlog only when it is in
``sys.modules`` and configured (importing it just to ask costs ~40 ms).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any


def _configured() -> Any:
    """The structlog module when the application imported and configured it, else None."""
    structlog = sys.modules.get("structlog")
    if structlog is None:
        return None
    try:
        return structlog if structlog.is_configured() else None
    except AttributeError:  # a half-imported or stand-in module
        return None


def warn(event: str, **fields: Any) -> None:
    """A Python warning, and a structlog warning event when the application configured structlog.

    Unconfigured structlog prints to stdout; a library must not write there.
    """
    structlog = _configured()
    if structlog is not None:
        structlog.get_logger("functai").warning(event, **fields)
    where = " ".join(f"{k}={v}" for k, v in fields.items())
    warnings.warn(f"functai: {event}: {where}", RuntimeWarning, stacklevel=3)


def info(event: str, **fields: Any) -> None:
    """An informational event, emitted only when the application configured structlog."""
    structlog = _configured()
    if structlog is not None:
        structlog.get_logger("functai").info(event, **fields)
