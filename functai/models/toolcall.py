"""`ToolCall`: one tool the model asked for.

Its own module, loaded when a reply first asks for a tool (or at the first
``functai.ToolCall``), so that a program whose calls use no tools never
builds the class. ``functai.models.request.ToolCall`` names it too.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs


def _dict_of(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


@attrs.frozen
class ToolCall:
    """One tool the model asked for."""

    id: str
    name: str
    input: dict[str, Any] = attrs.field(factory=dict, converter=_dict_of)
