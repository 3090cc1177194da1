"""A tool's inputs: the schema a model is offered, and the strict reading of what it gives.

The model's arguments and a person's edit on approving are read by the parameters' annotations
with the readers typed outputs use (pydantic for a pydantic type, so the tool receives the
model, not a dict): ``amount: int`` refuses ``"300 EUR"``, ``true``, ``3.5`` and NaN. They are
read before any ``tool_call`` handler or approval sees them, so what is approved is what runs.
"""

from __future__ import annotations

import enum
import inspect
import json
from typing import Any, Mapping

from .._errors import FunctAIError
from .outputs import describe, parameters_schema
from .outputs.jsonable import fields_of
from .outputs.kinds import Unsupported, is_pydantic
from .outputs.readers import Bad, reader_for
from .outputs.schemacheck import schema_problem

#: The most characters of JSON an edit on approving may hold (a tool's inputs are far smaller).
MAX_EDIT = 1_000_000


class ToolInputs:
    """The inputs a tool takes: their schema (``schema``) and their reading (`read`, `problems`)."""

    def __init__(self, signature: inspect.Signature, hints: Mapping[str, Any], name: str) -> None:
        self.name = name
        #: Each input: its type, its reader, and its default (``inspect.Parameter.empty`` if required).
        self.inputs: dict[str, tuple[Any, Any, Any]] = {}
        for param in signature.parameters.values():
            tp = hints.get(param.name, Any)
            try:
                reader = reader_for(tp)
            except Unsupported as exc:
                raise TypeError(f"tool {name}: input {param.name!r}: {exc}") from None
            self.inputs[param.name] = (tp, reader, param.default)
        self.schema = parameters_schema([(param.name, hints.get(param.name, str), param.default is param.empty)
                                         for param in signature.parameters.values()])

    def problems(self, given: Mapping[str, Any], *, partial: bool = False) -> list[str]:
        """Why ``given`` does not fit, one reason per input (``partial``: only the inputs given,
        as an edit changes some)."""
        found = [f"{self.name} takes no input {name!r} (its inputs: {', '.join(self.inputs) or 'none'})"
                 for name in given if name not in self.inputs]
        for name, (tp, reader, default) in self.inputs.items():
            if name not in given:
                if not partial and default is inspect.Parameter.empty:
                    found.append(f"input {name!r} ({describe(tp)}) is missing")
                continue
            value = given[name]
            if value is default or (default is None and value is None):
                continue  # a default is the author's choice (``x: int = None`` is common)
            try:
                reader(value)
                where = _non_finite(value)
            except Bad as bad:
                found.append(f"input {name!r} must be {describe(tp)}: {bad.render(name)}")
            except RecursionError:
                found.append(f"input {name!r} is nested too deeply to read")
            else:
                if where is not None:
                    found.append(f"input {name!r} must be {describe(tp)}: expected a finite number at {name}{where}")
        return found

    def read(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """``given`` (checked by `problems`) as the values the annotations name: a dict becomes its
        dataclass or pydantic model, a list its tuple or set; a value equal to what was given stays
        as given (``amount: float`` keeps the model's 5, as Python would pass it)."""
        typed = {}
        for name, value in given.items():
            tp, reader, default = self.inputs[name]
            if value is default or value is None and default is None:
                typed[name] = value
                continue
            read = reader(value)
            typed[name] = value if type(read) in (int, float, list) and read == value else read
        return typed


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def read_typed(text: str, name: str | None = None, parameters: Mapping[str, Any] | None = None) -> Any:
    """What a person typed for a tool's input ``name`` (a command-line option, a form's field): read
    as strict JSON (``NaN`` is text) when that is JSON the input takes, else the text as typed — so
    ``123`` for an order that is text (or ``str | None``, or one of some texts) is the text "123".
    ``parameters``: the tool's input schema, as an approval's question keeps it."""
    try:
        value = json.loads(text, parse_constant=_not_json)
    except ValueError:
        return text
    schema = ((parameters or {}).get("properties") or {}).get(name) if name is not None else None
    if isinstance(value, str) or not isinstance(schema, Mapping) or schema_problem(schema, value, parameters) is None:
        return value
    return text if schema_problem(schema, text, parameters) is None else value


def _data(value: Any) -> Any:
    """``value`` as the JSON data it stands for: a dataclass, attrs or pydantic object (pydantic's own
    JSON form), an enum, a tuple as its data; TypeError for anything else, which a record could keep
    only as its repr (an edit of a text input must not become ``"Decimal('12.50')"``)."""
    if isinstance(value, enum.Enum):
        return _data(value.value)
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("keys must be text")
        return {key: _data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_data(item) for item in value]
    if is_pydantic(type(value)):
        return value.model_dump(mode="json")
    fields = fields_of(value)
    if fields is None:
        raise TypeError(f"a {type(value).__name__} is not JSON data")
    return _data(fields)


def _non_finite(value: Any) -> str | None:
    """Where ``value`` holds NaN or an infinity (no JSON number, and no amount of anything), or None."""
    if isinstance(value, float):
        return "" if value - value != 0 else None
    items: Any = (value.items() if isinstance(value, Mapping)
                  else enumerate(value) if isinstance(value, (list, tuple)) else ())
    for key, item in items:
        found = _non_finite(item)
        if found is not None:
            return (f".{key}" if isinstance(key, str) else f"[{key}]") + found
    return None


def check_edit(inputs: Any, takes: ToolInputs | list[str] | None, name: str,
               schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An edit made on approving: a dict of the tool's inputs that fit them (``input-invalid``
    otherwise, the turn still waiting). ``takes``: the tool's inputs, or only their names where the
    function is not at hand, with the ``schema`` the question recorded."""
    if not isinstance(inputs, Mapping) or not inputs or not all(isinstance(k, str) for k in inputs):
        raise FunctAIError(f"inputs= on approving {name} must be a non-empty dict of the tool's inputs by name",
                           code="input-invalid")
    try:  # checked and kept as the JSON data a model would have written (a pydantic object as its dict)
        inputs = _data(dict(inputs))
        size = len(json.dumps(inputs, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as error:  # not JSON data, or nested too deeply
        why = str(error) if isinstance(error, TypeError) else "nested too deeply"
        raise FunctAIError(f"inputs= on approving {name} must be JSON data (text, numbers, lists, dicts; a "
                           f"dataclass, attrs or pydantic object of them) nested no deeper than it can be written: "
                           f"{why}", code="input-invalid") from None
    if size > MAX_EDIT:
        raise FunctAIError(f"inputs= on approving {name} holds {size:,} characters of JSON; an edit holds at most "
                           f"{MAX_EDIT:,}", code="input-invalid")
    if isinstance(takes, ToolInputs):
        problems = takes.problems(inputs, partial=True)
    elif takes is not None:
        unknown = sorted(set(inputs) - set(takes))
        problems = [f"{name} takes no input {', '.join(map(repr, unknown))} (its inputs: {', '.join(takes) or 'none'})"]
        if not unknown:
            properties = (schema or {}).get("properties") or {}
            try:
                problems = [why for why in (schema_problem(properties.get(key, {}), value, schema, key)
                                            for key, value in inputs.items()) if why]
            except RecursionError:
                problems = ["it is nested too deeply to check"]
    else:
        problems = []
    if problems:
        raise FunctAIError(f"the edit of {name} on approving does not fit the tool: {'; '.join(problems)}; the "
                           "call still waits for an answer", code="input-invalid")
    return dict(inputs)
