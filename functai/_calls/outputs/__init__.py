"""Typed outputs: ``str`` is the reply as-is; any other type is read from the reply as JSON,
strictly, so a wrong reply fails with a reason the model can act on (``expected an integer
at $.count, got "three"``). `kinds` says what shape a type stands for; `schema` and `readers`
are built from it once per type; `jsonable` turns values into JSON data for records.
"""

from __future__ import annotations

from .jsonable import to_jsonable
from .kinds import describe
from .readers import read_output, read_value
from .schema import output_schema, parameters_schema

__all__ = ["describe", "output_schema", "parameters_schema", "read_output", "read_value", "to_jsonable"]
