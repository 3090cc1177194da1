"""`Template`: a call's messages written by hand, with ``{instruction}`` and input slots.

Its own module, loaded at the first ``functai.Template``: a program that
uses the default layout never builds the class.
"""

from __future__ import annotations

from typing import Iterable

import attrs

from ..attrsmethods import fields_repr, type_hash

_object_setattr = object.__setattr__


def _slots(text: str | None) -> set[str]:
    if text is None:
        return set()
    import string

    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


@attrs.frozen(kw_only=True, init=False, repr=False, eq=False)
class Template:
    """Messages written by hand: ``{instruction}`` and ``{input_name}`` slots.

    ``Template(system=None, user=...)``: the user message is required.
    """

    system: str | None = None
    user: str

    # The methods attrs would generate, written out (see `functai.attrsmethods`).
    def __init__(self, *, system: str | None = None, user: str) -> None:
        _setattr = _object_setattr.__get__(self)
        _setattr("system", system)
        _setattr("user", user)

    def __repr__(self) -> str:
        return fields_repr(self, ("system", "user"))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.system == other.system and self.user == other.user  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((_TEMPLATE_HASH, self.system, self.user))

    def slots(self) -> set[str]:
        return _slots(self.system) | _slots(self.user)

    def writes_instruction(self) -> bool:
        return "instruction" in self.slots()

    def check(self, inputs: Iterable[str], function: str) -> None:
        """Refuse slots that name no input (at decoration time)."""
        known = set(inputs) | {"instruction"}
        unknown = self.slots() - known
        if unknown:
            raise TypeError(
                f"Template of {function} has slots {sorted(unknown)} that are not inputs; "
                f"known slots: {sorted(known)}"
            )


_TEMPLATE_HASH = type_hash(Template)
