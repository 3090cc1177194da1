"""The errors functai raises: every one is a `FunctAIError` with a `code`.

Codes are stable strings (``plugin-change``, ``model-http`` …) so programs can
branch on them; messages are for people and say what to fix.
"""

from __future__ import annotations

from typing import Any, Mapping


#: Codes that end the outermost call wherever they are raised, never shown to the model as a failed
#: tool nor taken for a handler's refusal: nobody could be asked, the calls ran away, or a nested
#: call could not be counted.
RISING = frozenset({"approval-required", "max-steps", "max-depth", "max-requests", "thread-context",
                    "reconcile-failed", "budget-exceeded", "budget-price-unknown"})


class FunctAIError(Exception):
    """Base of every functai error; ``code`` names what went wrong."""

    code: str = "functai-error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        #: The call record of the failed call, when there is one.
        self.record: Any = details.pop("record", None)
        self.details = details

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class PluginError(FunctAIError):
    """A plugin could not be registered, loaded or run; ``plugin`` and ``hook`` name where, when known."""

    code = "plugin-failed"

    def __init__(self, message: str, *, code: str, plugin: str | None = None, hook: str | None = None,
                 field: str | None = None) -> None:
        super().__init__(message, code=code)
        self.plugin = plugin
        self.hook = hook
        self.field = field


class OutputError(FunctAIError):
    """The model's reply could not be read as the function's output type."""

    code = "output-invalid"

    def __init__(self, message: str, *, reply: str | None = None) -> None:
        super().__init__(message)
        #: The model's last reply, as text.
        self.reply = reply


class ModelConfigError(FunctAIError):
    """No model could be set up for the call, so nothing was sent: none is named (``no-model``),
    ``lm`` names no model (``model-name``) or no provider serves it (``model-provider``), or a
    base URL carries credentials (``base-url-credentials``). A setting to fix, not an answer."""

    code = "model-config"


class ModelError(FunctAIError):
    """A model client could not get a reply (HTTP status, network, protocol)."""

    code = "model-error"

    def __init__(self, message: str, *, code: str = "model-error", status: int | None = None) -> None:
        super().__init__(message, code=code)
        self.status = status


class NonAnswerError(ModelError):
    """The model replied, but not with an answer: it refused (``model-refused``), a content filter
    stopped it (``model-filtered``), it was cut at the token limit (``model-truncated``) or is empty
    (``model-empty``). The model could be used; the request or its limits need changing."""


class Waiting(FunctAIError):
    """A conversation turn waits for a person's answer to an approval: the turn is saved; answer it
    (``turn.approve()`` / ``turn.deny()``) and ``turn.resume()`` it, from any process."""

    code = "turn-waiting"

    def __init__(self, message: str, *, approvals: list[dict[str, Any]], turn: Any = None) -> None:
        super().__init__(message)
        #: What waits: each ``{"key", "name", "input", "effects", "path", "plugin", "question", "digest", "plugins"}``.
        self.approvals = approvals
        #: The waiting `Turn` (set by the conversation).
        self.turn = turn


def approval_answered(key: str, first: Mapping[str, Any], allow: bool, *, where: str = "", who: str,
                      after: str = "") -> FunctAIError:
    """The error for an answer contrary to ``first``, the answer to approval ``key`` that holds
    (``where`` the approval belongs, ``who`` gave ``first``, ``after``: what became of this one)."""
    held_as = "approved" if first["allow"] else "denied" + (f" ({first['reason']})" if first.get("reason") else "")
    if first.get("inputs"):
        held_as += f" with the inputs edited to {first['inputs']}"
    return FunctAIError(
        f"approval {key!r}{where} was already {held_as} {who} at {first.get('at')}; the first answer holds, "
        f"so this {'approval' if allow else 'denial'} is not applied{after}",
        code="approval-answered", answered=dict(first), key=key,
    )
