"""`ToolCall`: one tool the model asked for.

Its own module, loaded when a reply first asks for a tool (or at the first
``functai.ToolCall``), so that a program whose calls use no tools never
builds the class. ``functai.models.request.ToolCall`` names it too.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs
from attrs import NOTHING

from ..attrsmethods import fields_repr, type_hash

_object_setattr = object.__setattr__


def _dict_of(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


@attrs.frozen(init=False, repr=False, eq=False)
class ToolCall:
    """One tool the model asked for."""

    id: str
    name: str
    input: dict[str, Any] = attrs.field(factory=dict, converter=_dict_of)

    # The methods attrs would generate, written out (see `functai.attrsmethods`).
    def __init__(self, id: str, name: str, input: Mapping[str, Any] = NOTHING) -> None:  # type: ignore[assignment]
        _setattr = _object_setattr.__get__(self)
        _setattr("id", id)
        _setattr("name", name)
        _setattr("input", {} if input is NOTHING else dict(input))

    def __repr__(self) -> str:
        return fields_repr(self, ("id", "name", "input"))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.id == other.id and self.name == other.name and self.input == other.input  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((_TOOL_CALL_HASH, self.id, self.name, self.input))


_TOOL_CALL_HASH = type_hash(ToolCall)
