"""Logging through structlog, the way a library should: functai never configures logging.

An event goes through structlog only when the application imported and configured it
(functai never imports it just to ask: that is paid at ``import functai``).
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
    """A Python warning, and a structlog event when the application configured structlog
    (unconfigured, it prints to stdout, where a library must not write)."""
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
