"""A scripted model for tests and the offline demo.

`ScriptedLM` answers from a list or a function and keeps every request it
received. It is only ever used when given explicitly (``client=ScriptedLM(...)``);
it is never a default for real calls.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

from .errors import FunctAIError
from .models.request import Reply, Request, ToolCall

Scripted = Union[str, Reply, BaseException]

_ids = itertools.count(1)


def tool_calls(calls: Iterable[tuple[str, Mapping[str, Any]]]) -> Reply:
    """A reply asking for several tools at once, in order."""
    return Reply(
        tool_calls=tuple(ToolCall(id=f"call_{next(_ids)}", name=name, input=dict(input)) for name, input in calls),
        finish_reason="tool_calls",
    )


def tool_call(name: str, input: Mapping[str, Any] | None = None) -> Reply:
    """A reply asking for one tool."""
    return tool_calls([(name, input or {})])


class ScriptedLM:
    """A model client that answers from a script.

    ``ScriptedLM(["Paris", "42"])`` answers each request with the next item
    (a string, a `Reply` such as `tool_call(...)`, or an exception to raise);
    ``ScriptedLM(reply=fn)`` answers with ``fn(request)``. Every request
    received is kept in ``.requests``.
    """

    name = "scripted"

    def __init__(
        self,
        replies: Sequence[Scripted] | None = None,
        *,
        reply: Callable[[Request], Scripted] | None = None,
    ) -> None:
        if (replies is None) == (reply is None):
            raise TypeError("ScriptedLM takes a list of replies or reply=callable, exactly one")
        if isinstance(replies, (str, Reply)):
            raise TypeError("ScriptedLM(replies) takes a list; wrap a single reply in [...]")
        self._replies = list(replies) if replies is not None else None
        self._reply = reply
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[Request] = []

    def complete(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies is not None:
                if self._next >= len(self._replies):
                    raise FunctAIError(
                        f"ScriptedLM ran out of replies: it was given {len(self._replies)} and was asked again "
                        f"(request {len(self.requests)}); add replies to the script",
                        code="scripted-exhausted",
                    )
                item = self._replies[self._next]
                self._next += 1
        if self._reply is not None:
            item = self._reply(request)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Reply):
            return item
        if isinstance(item, str):
            return Reply(text=item, finish_reason="stop")
        raise TypeError(f"ScriptedLM: a reply must be a string, a Reply or an exception, not {type(item).__name__}")

    def __repr__(self) -> str:
        return f"ScriptedLM({len(self.requests)} requests)"


__all__ = ["ScriptedLM", "tool_call", "tool_calls"]
