"""What functai's attrs classes need to write their methods out by hand.

attrs generates ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` as
source text and compiles it when the class is created: about a millisecond
per class, paid by every ``import functai``. The classes the import builds
(`Request`, `Reply`, `ToolCall`, `Template`, `CallRecord`) are declared with
``init=False, repr=False, eq=False`` and carry those methods in their own
module's bytecode instead, written as attrs writes them; they stay attrs
classes (``attrs.fields``, ``attrs.evolve``, ``attrs.asdict`` work as
before). tests/test_attrs_methods.py checks each against the class attrs
generates from the same fields, so the two cannot drift apart.
"""

from __future__ import annotations

import _thread
from typing import Any

_shown = _thread._local()  # the objects whose repr is being made, per thread (as attrs keeps them)


def fields_repr(self: Any, names: tuple[str, ...]) -> str:
    """attrs' repr: ``Name(field=value, ...)``, and ``...`` for an object inside its own repr."""
    try:
        shown = _shown.ids
    except AttributeError:
        shown = _shown.ids = set()
    key = id(self)
    if key in shown:
        return "..."
    shown.add(key)
    try:
        inner = ", ".join([f"{name}={getattr(self, name)!r}" for name in names])
        return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({inner})"
    finally:
        shown.remove(key)


def type_hash(cls: type) -> int:
    """A number mixed into the hash of each instance, so equal fields of two classes hash apart."""
    return hash(f"<attrs generated hash {cls.__module__}.{cls.__qualname__}>")
