"""functai's fallback plugin, written with functai's public API only.

Its ``model_error`` handler asks another model when the one asked fails: a
provider that is down should cost a call one more request, not the answer.
Which model answered, and why, is in the record as the handler's change.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from functai import Change, FunctAIError, Plugin

__version__ = "0.1.0"

#: What an error code looks like (``model-http``): a typo such as ``model_http`` would never match.
_CODE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")

#: The longest note a change may carry.
_NOTE = 200


def _models(models: Any) -> tuple[str, ...]:
    if isinstance(models, (str, bytes)) or not isinstance(models, (list, tuple)):
        raise TypeError(
            f"fallback(models) takes a list of model names such as ['openai/gpt-4.1', 'anthropic/claude-sonnet-4'], "
            f"not {type(models).__name__} (wrap a single name in a list)"
        )
    for model in models:
        if not isinstance(model, str):
            raise TypeError(f"fallback(models): each model is a name (a string), not {type(model).__name__}")
        if not model.strip():
            raise FunctAIError("fallback(models): a model name is blank; write each as lm= takes it",
                               code="fallback-models")
    if not models:
        raise FunctAIError("fallback(models): the list is empty; name at least one model to fall back to",
                           code="fallback-models")
    repeated = sorted({m for m in models if models.count(m) > 1})
    if repeated:
        raise FunctAIError(f"fallback(models): {', '.join(map(repr, repeated))} named twice; each model is "
                           "asked once, in order, so name each once", code="fallback-models")
    return tuple(models)


def _codes(on: Any) -> frozenset[str]:
    if isinstance(on, (str, bytes)) or not isinstance(on, (list, tuple)):
        raise TypeError(f"fallback(on=...) takes a list or tuple of error codes such as ('model-http',), "
                        f"not {type(on).__name__} (wrap a single code in a tuple)")
    for code in on:
        if not isinstance(code, str):
            raise TypeError(f"fallback(on=...): each code is a string, not {type(code).__name__}")
        if not _CODE.fullmatch(code):
            raise FunctAIError(f"fallback(on=...): {code!r} is not an error code; codes are lower-case words "
                               "joined by '-', such as 'model-http' or 'model-unreachable'", code="fallback-on")
    if not on:
        raise FunctAIError("fallback(on=...) is empty, so the plugin would never act; name the error codes "
                           "to fall back on, such as ('model-unreachable', 'model-http')", code="fallback-on")
    return frozenset(on)


def _short(text: str) -> str:
    return text if len(text) <= _NOTE else text[: _NOTE - 1] + "…"


def fallback(
    models: Sequence[str],
    *,
    on: Sequence[str] = ("model-unreachable", "model-http"),
    name: str = "fallback",
) -> Plugin:
    """A plugin that asks the next model in ``models`` when a request fails with a code in ``on``.

    The next model is the one after the model that failed, or the first when
    the failed model is not in the list; past the last one the error stands.
    The model chosen answers the rest of the call.
    """
    order = _models(models)
    codes = _codes(on)
    plugin = Plugin(name, version=__version__, description=f"fallback({list(order)!r}, on={sorted(codes)!r})")

    @plugin.model_error
    def ask_the_next_model(failure: Any) -> Change | None:
        code = getattr(failure.error, "code", None)
        if code not in codes:
            return None
        failed = failure.lm
        step = order.index(failed) + 1 if failed in order else 0
        if step >= len(order):
            return None  # every model was asked: the error stands
        following = order[step]
        return Change(lm=following, note=_short(f"{failed} failed ({code}); asked {following}, "
                                                f"{step + 1} of {len(order)}"))

    return plugin
