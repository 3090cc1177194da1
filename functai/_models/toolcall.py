"""`ToolCall`, in its own module so that a program whose calls use no tools never builds the class."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class ToolCall:
    """One tool the model asked for."""

    id: str
    name: str
    input: dict[str, Any] = attrs.field(factory=dict, converter=dict)
