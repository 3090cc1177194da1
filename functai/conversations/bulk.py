"""Reading many records at once without the cyclic garbage collector in the way.

Parsing a long conversation makes tens of thousands of small containers; each
allocation burst triggers a collection that walks them all again, which
doubles the cost of an open. None of them can form a cycle while they are
parsed, so collection is paused for the duration (and only resumed if it was
on before: an application that turned it off keeps it off).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

#: Below this many bytes or records a pause is not worth it.
BULK_BYTES = 1 << 16
BULK_RECORDS = 500


@contextmanager
def paused_gc(amount: int = 1, threshold: int = 0) -> Iterator[None]:
    """Pause the collector while ``amount`` (≥ ``threshold``) things are read (by default: always).

    What is read and dropped again in the pause is freed without ever being scanned; what is
    kept is scanned once, by the first collection after it.
    """
    if amount < threshold or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
