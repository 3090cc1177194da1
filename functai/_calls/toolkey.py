"""The idempotency key of the tool call running now (`functai.tool_key`).

A tool that pays, mails or opens a ticket passes it to the service as that
service's idempotency key, so a tool run again after a crash does not do it
twice. It names the tool call, not the attempt: the turn's id (outside a
conversation turn, the asking call's record id), then the tool call's place
in it — the asking call's ordinal in the turn and the invocation in that call
(``"3f9a0c12d4e5:1.2"``). A resumed turn, ``--rerun`` and a ``tool_error``
retry run the call at the same place, so they see the same key; two calls of
one tool in one turn are at two places.
"""

from __future__ import annotations

from contextvars import ContextVar

from .._errors import FunctAIError

__all__ = ["tool_key"]

#: The key of the tool call running in this context (a worker thread or task gets a copy).
running: ContextVar[str | None] = ContextVar("functai_tool_key", default=None)


def call_key(owner: str, site: str) -> str:
    """The key of the tool call at ``site`` (``"<call ordinal>.<invocation>"``) of ``owner``
    (the turn's id, or the asking call's record id outside a turn)."""
    return f"{owner}:{site}"


def tool_key() -> str:
    """The idempotency key of the tool call running now: the same across retries, resumes,
    processes and ``--rerun``; different for every other tool call."""
    key = running.get()
    if key is None:
        raise FunctAIError(
            "functai.tool_key() was called outside a running tool: call it in the body of a @functai.tool "
            "function while the model's tool call runs (or in its reconcile function, which is given the key)",
            code="tool-key-outside",
        )
    return key
