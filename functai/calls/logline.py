"""A call record as one line of the call log, encoded without building its dict.

On every logged call. `CallRecord.to_dict` builds a dict of 25 keys that
msgspec then walks, key by key; here the record's values go into a msgspec
``Struct`` made positionally (its keys are encoded once, when the class is
made), at half the cost (docs/performance.md, "The call log"). The bytes are the same as
``codec.dumps(record.to_dict(), non_finite="text")`` (a test compares them
over many kinds of records): the same keys in the same order, ``replayable``
only when false, ``heard`` and ``rating`` only when set (msgspec leaves a
field out when its value is ``UNSET``).

JSON stays strict as `functai.codec.dumps` keeps it, and a non-finite float is
still written as text with a warning naming where. msgspec writes one as
``null``, so it must be looked for, and mostly it need not be: the fields
that hold data — the inputs, the output, the seconds, the error, the settings
and the usage — are looked at as the record is read (their values' types, and
``x - x`` of each float, which is 0.0 unless it is NaN or infinite), and a
plain call whose tool calls, changes, conversation, timings and rating are
empty is done. (The text fields — id, names, instruction, model, finish
reason, reasoning, sections — are typed as text and not looked at.)
Any other record goes through ``codec.dumps(record.to_dict(), non_finite="text")``,
which finds a non-finite float (`functai.calls.outputs.jsonable.non_finite_as_text`),
writes it as text and warns; so does a record msgspec cannot encode as it is
(a lone surrogate, a cycle).

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
_encode = codec.encoder()  # the codec's own encoder: the same rules for what is not JSON data


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
    seconds = r.seconds
    if unsure or (seconds is not None and (type(seconds) is not float or seconds - seconds)) \
            or r.tool_calls or r.conversation is not None or r.changes or r.heard or r.rating is not None:
        unsure = True
    elif r.error is not None or r.settings or r.usage:
        unsure = not _flat_finite(r.error, r.settings, r.usage)
    if unsure:  # a non-finite float may be in it: the codec's line of its dict, which finds one
        return codec.dumps(record.to_dict(), non_finite="text")
    line = _Line(  # a plain record: no tool calls, changes, conversation, hearing or rating
        r.id, r.function, r.version, inputs, r.started, r.parent, r.path, r.module, output, r.error,
        r.instruction, r.model, r.settings, r.usage, r.finish_reason, r.reasoning, seconds, [],
        None, [], r.sections, _UNSET if r.replayable else False, r.attempts, _UNSET, _UNSET,
    )
    try:
        return _encode(line)
    except Exception:  # a lone surrogate, a cycle …: the codec's own ways (escape, or a clear error)
        return codec.dumps(record.to_dict(), non_finite="text")
