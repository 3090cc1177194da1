"""A call record as one line of the call log, encoded without building its dict.

On every logged call: the record's values go into a msgspec ``Struct`` made
positionally (its keys are encoded once, when the class is made), at about half
the cost of ``codec.dumps(record.to_dict(), non_finite="text")``, whose bytes it
gives (``replayable`` only when false, ``heard`` and ``rating`` only when set:
msgspec leaves a field out when its value is ``UNSET``). msgspec writes a
non-finite float as ``null``: unless the fields that hold data are plainly
finite (looked at as the record is read), a line with more nulls than the
record has Nones goes through
``codec.dumps`` after all, which writes the float as text and warns. So does
a record msgspec cannot encode as it is (a lone surrogate, a cycle).

Imported on the first logged call (it imports msgspec), never by ``import functai``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import codec
from .outputs import to_jsonable
from .outputs.jsonable import PLAIN
from .records import CallRecord


class _Line(msgspec.Struct, gc=False):
    """The fields of a call log line, in `CallRecord.to_dict`'s order (all given, positionally;
    never tracked by the garbage collector: it lives for one encoding)."""

    id: Any
    function: Any
    version: Any
    inputs: Any
    started: Any
    parent: Any
    path: Any
    module: Any
    output: Any
    error: Any
    instruction: Any
    model: Any
    settings: Any
    usage: Any
    finish_reason: Any
    reasoning: Any
    seconds: Any
    tool_calls: Any
    conversation: Any
    changes: Any
    sections: Any
    replayable: Any
    attempts: Any
    heard: Any
    rating: Any


_UNSET = msgspec.UNSET
_encode = codec.load()  # the codec's own encoder: the same rules for what is not JSON data


def _flat_finite(*fields: Any) -> bool:
    """Whether each field is None or a dict whose values are all text, whole numbers, bools, None or
    finite floats (nothing nested to look into)."""
    for data in fields:
        if data is None:
            continue
        if type(data) is not dict:
            return False
        for value in data.values():
            t = type(value)
            if t is float:
                if value - value:  # nan for NaN and ±Infinity, 0.0 otherwise
                    return False
            elif t not in PLAIN:
                return False
    return True


def encode(record: CallRecord) -> bytes:
    """The record's line (without its newline): what ``codec.dumps(record.to_dict(), non_finite="text")`` gives."""
    r = record
    # Whether a non-finite float may be in the record: found true for anything not plainly finite in
    # the fields that hold data (the text fields — id, names, instruction, model … — hold text).
    unsure = False
    inputs = r.inputs
    if type(inputs) is dict:
        for key, value in inputs.items():
            t = type(value)
            if type(key) is not str or t not in PLAIN:
                inputs = to_jsonable(inputs)
                unsure = True
                break
            if t is float and value - value:  # nan for NaN and ±Infinity, 0.0 otherwise
                unsure = True
    else:
        inputs = to_jsonable(inputs)
        unsure = True
    output = r.output
    t = type(output)
    if t not in PLAIN:
        output = to_jsonable(output)
        unsure = True
    elif t is float and output - output:
        unsure = True
    changes = r._changes_raw
    if changes:
        changes = r.changes  # its entries made (see records: the engine may have left them as tuples)
    seconds = r.seconds
    if unsure or (seconds is not None and (type(seconds) is not float or seconds - seconds)) \
            or r.tool_calls or r.conversation is not None or changes or r.heard or r.rating is not None:
        unsure = True
    elif r.error is not None or r.settings or r.usage:
        unsure = not _flat_finite(r.error, r.settings, r.usage)
    line = _Line(
        r.id, r.function, r.version, inputs, r.started, r.parent, r.path, r.module, output, r.error,
        r.instruction, r.model, r.settings, r.usage, r.finish_reason, r.reasoning, seconds, r.tool_calls,
        r.conversation, changes, r.sections, _UNSET if r.replayable else False, r.attempts,
        r.heard or _UNSET, _UNSET if r.rating is None else r.rating,
    )
    try:
        out = _encode(line)
    except Exception:  # a lone surrogate, a cycle …: the codec's own ways (escape, or a clear error)
        return codec.dumps(record.to_dict(), non_finite="text")
    if not unsure:
        return out
    nulls = out.count(b"null")  # a non-finite float is one more null than the record has Nones
    fields = tuple(getattr(line, name) for name in _Line.__struct_fields__)
    if nulls > fields.count(None) and codec.may_hold_non_finite(fields, nulls):
        return codec.dumps(record.to_dict(), non_finite="text")
    return out
