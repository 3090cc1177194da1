"""A call record as one line of the call log, encoded without building its dict.

A plain record's values go positionally into a msgspec ``Struct`` whose keys are
encoded once: half the cost of encoding `CallRecord.to_dict`, the same bytes (a test
compares them). msgspec would write a non-finite float as ``null``, so a record with
nested data or a float not plainly finite goes through the codec, which writes it as text.
`functai._calls.records` makes the encoder with `CallRecord`'s fields, so this module needs
nothing of it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import msgspec

from .. import _codec as codec
from .outputs.jsonable import PLAIN

_UNSET = msgspec.UNSET
_encode = codec.encoder()  # the codec's own encoder: the same rules for what is not JSON data


def _finite(value: Any) -> bool:
    """Whether a value is JSON as it is, with no non-finite float: a scalar, or a flat dict of them."""
    t = type(value)
    if t is float:
        return not value - value  # nan for NaN and ±Infinity, 0.0 otherwise
    if t is dict:
        for key, item in value.items():
            t = type(item)
            if type(key) is not str or t not in PLAIN or (t is float and item - item):
                return False
        return True
    return t in PLAIN


def line_encoder(fields: Sequence[str]) -> Callable[[Any], bytes]:
    """The encoder of a record with these fields (`CallRecord`'s, in ``to_dict`` order): a record's line,
    without its newline, what ``codec.dumps(record.to_dict(), non_finite="text")`` gives."""
    # A call log line; never tracked by the garbage collector (it lives for one encoding).
    line_of = msgspec.defstruct("_Line", fields, gc=False)

    def encode(r: Any) -> bytes:
        if r.tool_calls or r.changes or r.heard or r.conversation is not None or r.rating is not None or not (
            _finite(r.inputs) and _finite(r.output) and _finite(r.seconds)
            and _finite(r.error) and _finite(r.settings) and _finite(r.usage)
        ):
            return codec.dumps(r.to_dict(), non_finite="text")
        line = line_of(
            r.id, r.function, r.version, r.inputs, r.started, r.parent, r.path, r.module, r.output, r.error,
            r.instruction, r.model, r.settings, r.usage, r.finish_reason, r.reasoning, r.seconds, [],
            None, [], r.sections, _UNSET if r.replayable else False, r.attempts, _UNSET, _UNSET,
        )
        try:
            return _encode(line)
        except Exception:  # a lone surrogate, a cycle …: the codec's own ways (escape, or a clear error)
            return codec.dumps(r.to_dict(), non_finite="text")

    return encode
