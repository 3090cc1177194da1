"""A call record as one line of the call log, encoded without building its dict.

On every logged call. `CallRecord.to_dict` builds a dict of 25 keys that
msgspec then walks, key by key; here the record's values go into a msgspec
``Struct`` made positionally (its keys are encoded once, when the class is
made), which is about four times cheaper. The bytes are the same as
``codec.dumps(record.to_dict(), non_finite="text")`` (a test compares them
over many kinds of records): the same keys in the same order, ``replayable``
only when false, ``heard`` and ``rating`` only when set (msgspec leaves a
field out when its value is ``UNSET``).

JSON stays strict as `functai.codec.dumps` keeps it: msgspec writes a
non-finite float as ``null``, so when the line holds more ``null``\\ s than
the record holds ``None``\\ s (counted at the top level, then level by level
only while they fall short), the record goes through ``codec.dumps`` after
all, which finds the float, writes it as text and warns where it was. So
does a record msgspec cannot encode as it is (a lone surrogate, a cycle).

Imported on the first logged call (it imports msgspec), never by ``import functai``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import codec
from .outputs import to_jsonable
from .records import CallRecord, raw_changes


class _Line(msgspec.Struct):
    """The fields of a call log line, in `CallRecord.to_dict`'s order (all given, positionally)."""

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
_PLAIN = frozenset({str, int, float, bool, type(None)})
_plain_values = _PLAIN.issuperset
_text_keys = frozenset({str}).issuperset
_encode = codec._encode or codec._load()  # the codec's own encoder: the same rules for what is not JSON data
_may_hold_non_finite = codec._may_hold_non_finite
_raw_changes = raw_changes
_FIELDS = _Line.__struct_fields__


def encode(record: CallRecord) -> bytes:
    """The record's line (without its newline): what ``codec.dumps(record.to_dict(), non_finite="text")`` gives."""
    r = record
    inputs, output = r.inputs, r.output
    if type(inputs) is not dict or not _plain_values(map(type, inputs.values())) or not _text_keys(map(type, inputs)):
        inputs = to_jsonable(inputs)
    if type(output) not in _PLAIN:
        output = to_jsonable(output)
    parent, error, instruction, model, reason, reasoning, seconds, conversation = (
        r.parent, r.error, r.instruction, r.model, r.finish_reason, r.reasoning, r.seconds, r.conversation)
    changes = _raw_changes(r)
    if changes:
        changes = r.changes  # its entries made (see records: they may still be tuples)
    replayable, heard, rating = r.replayable, r.heard, r.rating
    line = _Line(
        r.id, r.function, r.version, inputs, r.started, parent, r.path, r.module, output, error,
        instruction, model, r.settings, r.usage, reason, reasoning, seconds, r.tool_calls,
        conversation, changes, r.sections, _UNSET if replayable else replayable, r.attempts,
        heard if heard else _UNSET, _UNSET if rating is None else rating,
    )
    try:
        out = _encode(line)
    except Exception:  # a lone surrogate, a cycle …: the codec's own ways (escape, or a clear error)
        return codec.dumps(record.to_dict(), non_finite="text")
    nulls = out.count(b"null")
    # The Nones of the fields that are None when unset: each is one null. (A None anywhere else is
    # not counted here: more nulls then, and the closer look below.)
    if nulls and nulls != (parent is None) + (output is None) + (error is None) + (instruction is None) \
            + (model is None) + (reason is None) + (reasoning is None) + (seconds is None) + (conversation is None) \
            and _may_hold_non_finite(tuple(getattr(line, name) for name in _FIELDS
                                           if getattr(line, name) is not _UNSET), nulls):
        return codec.dumps(record.to_dict(), non_finite="text")
    return out
