"""Stream events (filled in by the streaming drivers)."""

from __future__ import annotations

from typing import Any


class StreamEvent:
    """One event of a streamed call; ``kind`` says which fields are set."""

    __slots__ = ("kind", "text", "name", "input", "path", "output", "approvals", "value", "record")

    def __init__(self, kind: str, **fields: Any) -> None:
        self.kind = kind
        for name in self.__slots__[1:]:
            setattr(self, name, fields.pop(name, None))
        if fields:
            raise TypeError(f"StreamEvent has no field {sorted(fields)[0]!r}")
