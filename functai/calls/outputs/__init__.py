"""Reading a model's reply as the function's output type, and values as JSON data.

``str`` means "the reply text as-is"; every other type is read from the reply
as JSON and checked strictly, so a wrong reply fails with a short reason the
model can act on when asked again (``expected an integer at $.count, got "three"``).
Schemas and readers are built once per type. pydantic is recognised by duck
typing, never imported unless the caller uses it.

`kinds` says what shape a type stands for, `schema` and `readers` build from
it; `jsonable` turns values into JSON data for records.
"""

from __future__ import annotations

from .jsonable import to_jsonable
from .kinds import describe
from .readers import read_output, read_value
from .schema import output_schema

__all__ = ["describe", "output_schema", "read_output", "read_value", "to_jsonable"]
