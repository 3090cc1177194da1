"""API keys set as settings, kept out of the values that flow through a call.

``configure(api_key="sk-…")`` stores a `Key` in the settings layer: an opaque
handle whose repr shows nothing secret. The key itself stays in this module
until a client is built from it, so no frame of a failing call holds it
(tracebacks that print locals, debuggers, crash reporters).
"""

from __future__ import annotations

import threading

__all__ = ["Key", "hide_key", "reveal", "MIN_SCRUB"]

#: Secrets shorter than this are not scrubbed from text: replacing ``"k"``
#: everywhere would mangle messages, and so short a key is no secret.
MIN_SCRUB = 8

_lock = threading.Lock()
_keys: dict[str, str] = {}


class Key:
    """A handle for an API key; equal handles name the same key."""

    __slots__ = ("_id",)

    def __init__(self, ident: str) -> None:
        self._id = ident

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other._id == self._id

    def __hash__(self) -> int:
        return hash(("functai.Key", self._id))

    def __lt__(self, other: object) -> bool:  # settings are sorted into cache keys
        return isinstance(other, Key) and self._id < other._id

    def __repr__(self) -> str:
        return "<api key>"

    __str__ = __repr__


def hide_key(value: str | Key) -> Key:
    """A handle for ``value`` (the same handle for the same key)."""
    if isinstance(value, Key):
        return value
    from ..digest import sha256_hex

    ident = sha256_hex(value.encode())[:32]
    with _lock:
        _keys.setdefault(ident, value)
    return Key(ident)


def reveal(value: str | Key | None) -> str | None:
    """The key a handle stands for (a plain string is returned as is)."""
    if isinstance(value, Key):
        return _keys[value._id]
    return value
