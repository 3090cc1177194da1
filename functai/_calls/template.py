"""`Template`: a call's messages written by hand. Its own module, loaded at the first
``functai.Template``, so a program that uses the default layout never builds the class."""

from __future__ import annotations

from typing import Iterable

import attrs


def _slots(text: str | None) -> set[str]:
    if text is None:
        return set()
    import string

    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


@attrs.frozen(kw_only=True)
class Template:
    """Messages written by hand with ``{instruction}`` and ``{input_name}`` slots; ``user`` is required."""

    system: str | None = None
    user: str

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

