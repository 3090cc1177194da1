"""Calls `mypy --strict` must refuse (test_typed_functions.py names each line's error)."""

from __future__ import annotations

from functai import ai


@ai
def capital(country: str) -> str:
    """Name the capital city of the country."""
    raise NotImplementedError


capital(3)
capital("Peru", extra=1)
wrong: int = capital("Peru")
