"""Calls `mypy --strict` must refuse (test_typed_functions.py names each line's error)."""

from __future__ import annotations

import functai
from functai import ai


@ai
def capital(country: str) -> str:
    """Name the capital city of the country."""
    raise NotImplementedError


capital(3)
capital("Peru", extra=1)
wrong: int = capital("Peru")


def misread(event: functai.events.Request) -> None:
    print(event.requst)
