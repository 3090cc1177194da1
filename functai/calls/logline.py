"""A call record as one line of the call log, encoded without building its dict.

On every logged call: the record's values go into a msgspec ``Struct`` made
positionally (its keys are encoded once, when the class is made), at about half
the cost of ``codec.dumps(record.to_dict(), non_finite="text")``, whose bytes it
gives (``replayable`` only when false, ``heard`` and ``rating`` only when set:
msgspec leaves a field out when its value is ``UNSET``). msgspec writes a
non-finite float as ``null``: when the line holds more nulls than the record
holds Nones, the record goes through ``codec.dumps`` after all, which writes
the float as text and warns. So does a record msgspec cannot
encode as it is (a lone surrogate, a cycle).

Imported on the first logged call (it imports msgspec), never by ``import functai``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import codec
from .outputs import to_jsonable
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


def encode(record: CallRecord) -> bytes:
    """The record's line (without its newline): what ``codec.dumps(record.to_dict(), non_finite="text")`` gives."""
    r = record
    fields = (
        r.id, r.function, r.version, to_jsonable(r.inputs), r.started, r.parent, r.path, r.module,
        to_jsonable(r.output), r.error, r.instruction, r.model, r.settings, r.usage, r.finish_reason, r.reasoning,
        r.seconds, r.tool_calls, r.conversation, r.changes, r.sections, _UNSET if r.replayable else False,
        r.attempts, r.heard or _UNSET, _UNSET if r.rating is None else r.rating,
    )
    try:
        out = _encode(_Line(*fields))
    except Exception:  # a lone surrogate, a cycle …: the codec's own ways (escape, or a clear error)
        return codec.dumps(record.to_dict(), non_finite="text")
    nulls = out.count(b"null")
    if nulls > fields.count(None) and codec.may_hold_non_finite(fields, nulls):
        return codec.dumps(record.to_dict(), non_finite="text")
    return out
