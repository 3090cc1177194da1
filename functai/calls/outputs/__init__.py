"""Reading a model's reply as the function's output type.

An AI function's return annotation is its output type. ``str`` means "the
reply text as-is"; every other type is read from the reply as JSON and checked
strictly against the type, so a wrong reply fails with a short reason the model
can act on when asked again (``expected an integer at $.count, got "three"``).

This sits on every call, so the work per type is done once: the schema and a
reader closure are built on first use and kept in dicts keyed by the type.
Only the stdlib and attrs are imported here; pydantic models are recognised by
duck typing and pydantic is never imported unless the caller already uses it.

The work is split by concept: `kinds` (what shape a type stands for),
`schema` (the JSON schema), `readers` (strict readers of parsed JSON),
`replies` (reply text and tool input as values) and `jsonable` (values as
JSON data for records).
"""

from __future__ import annotations

from .jsonable import to_jsonable
from .kinds import describe
from .replies import read_output, read_value
from .schema import output_schema

__all__ = ["describe", "output_schema", "read_output", "read_value", "to_jsonable"]
