"""Logging through structlog, the way a library should.

functai never configures logging; it emits events on the ``functai`` logger
and the application decides where they go. structlog is imported on the
first event, not at ``import functai``.
"""

from __future__ import annotations

import warnings
from typing import Any


def logger() -> Any:
    import structlog

    return structlog.get_logger("functai")


def warn(event: str, **fields: Any) -> None:
    """A Python warning, and a structlog warning event when the application configured structlog.

    Unconfigured structlog prints to stdout; a library must not write there.
    """
    import structlog

    if structlog.is_configured():
        logger().warning(event, **fields)
    where = " ".join(f"{k}={v}" for k, v in fields.items())
    warnings.warn(f"functai: {event}: {where}", RuntimeWarning, stacklevel=3)


def info(event: str, **fields: Any) -> None:
    """An informational event, emitted only when the application configured structlog."""
    import structlog

    if structlog.is_configured():
        structlog.get_logger("functai").info(event, **fields)
