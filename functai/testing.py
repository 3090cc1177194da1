"""Offline models for tests, docs and the demo, used only when named (never a default).

`ScriptedLM` answers from a list or a function and keeps every request;
`TestModel` (``lm="test"``) makes up a valid answer for any call.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import re
import threading
import time
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence, Union

from ._errors import FunctAIError
from ._models.catalog import SCRIPTED_MODEL
from ._models.request import Reply, Request
from ._models.samples import sample, sample_input

Scripted = Union[str, Reply, BaseException]

_ids = itertools.count(1)


def tool_calls(calls: Iterable[tuple[str, Mapping[str, Any]]]) -> Reply:
    """A reply asking for several tools at once, in order."""
    from ._models.toolcall import ToolCall  # built with the first tool call, not at import

    asked = tuple(ToolCall(id=f"call_{next(_ids)}", name=name, input=dict(input)) for name, input in calls)
    return Reply(tool_calls=asked, finish_reason="tool_calls")


def tool_call(name: str, input: Mapping[str, Any] | None = None) -> Reply:
    """A reply asking for one tool."""
    return tool_calls([(name, input or {})])


class _OfflineModel:
    """The four ways a call asks, built on one `_answer`; ``delay`` (seconds) is waited before each
    reply, and a streamed reply comes as ``chunk``-character pieces of its text, then the `Reply`."""

    def __init__(self, *, delay: float = 0.0, chunk: int = 4) -> None:
        name = type(self).__name__
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
            raise TypeError(f"{name}(delay=...) takes seconds, a number >= 0, not {delay!r}")
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise TypeError(f"{name}(chunk=...) takes a whole number of characters >= 1, not {chunk!r}")
        self.delay = delay
        self.chunk = chunk

    def _answer(self, request: Request) -> Reply:
        raise NotImplementedError

    def complete(self, request: Request) -> Reply:
        if self.delay:
            time.sleep(self.delay)
        return self._answer(request)

    async def acomplete(self, request: Request) -> Reply:
        if self.delay:
            import asyncio  # only async callers load it

            await asyncio.sleep(self.delay)
        return self._answer(request)

    def _pieces(self, reply: Reply) -> list[Any]:
        text = reply.text or ""
        return [text[i:i + self.chunk] for i in range(0, len(text), self.chunk)] + [reply]

    def stream(self, request: Request) -> Iterator[Any]:
        yield from self._pieces(self.complete(request))

    async def astream(self, request: Request) -> AsyncIterator[Any]:
        import asyncio

        for piece in self._pieces(await self.acomplete(request)):
            yield piece
            await asyncio.sleep(0)


class ScriptedLM(_OfflineModel):
    """A model client that answers from a script, keeping every request in ``.requests``.

    ``ScriptedLM(["Paris", "42"])`` answers each request with the next item (a string,
    a `Reply` such as `tool_call(...)`, or an exception to raise); ``ScriptedLM(reply=fn)``
    answers with ``fn(request)``. ``delay`` simulates a model's latency.
    """

    name = SCRIPTED_MODEL

    def __init__(self, replies: Sequence[Scripted] | None = None, *, reply: Callable[[Request], Scripted] | None = None,
                 delay: float = 0.0, chunk: int = 4) -> None:
        if (replies is None) == (reply is None):
            raise TypeError("ScriptedLM takes a list of replies or reply=callable, exactly one")
        if isinstance(replies, (str, Reply)):
            raise TypeError("ScriptedLM(replies) takes a list; wrap a single reply in [...]")
        super().__init__(delay=delay, chunk=chunk)
        self._replies = list(replies) if replies is not None else None
        self._reply = reply
        self._lock = threading.Lock()
        self.requests: list[Request] = []

    def _answer(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies is not None:  # one reply for each request
                if len(self.requests) > len(self._replies):
                    raise FunctAIError(f"ScriptedLM ran out of replies: it was given {len(self._replies)} and was "
                                       f"asked again (request {len(self.requests)}); add replies to the script",
                                       code="scripted-exhausted")
                item = self._replies[len(self.requests) - 1]
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


class TestModel(_OfflineModel):
    """The model ``lm="test"`` names: a valid answer for any call, made up, offline (docs/models.md).

    It first calls each tool ``tool_choice`` allows that it has not called since the last user
    message, with an input built from the tool's schema; then it answers with a value built from
    the output schema, with `MARK` as its ``reasoning``. It keeps no requests.
    """

    __test__ = False  # not a pytest test class
    name = "test"

    MARK = "functai test model: no model was asked; this answer was made up from the output schema"

    def _answer(self, request: Request) -> Reply:
        due = [t for t in _allowed(request) if t["name"] not in _called_this_turn(request.messages)]
        if due:
            if request.settings.get("parallel_tool_calls") is False:
                due = due[:1]
            return tool_calls((t["name"], sample_input(t.get("parameters"))) for t in due)
        if request.output_schema is None:
            return Reply(text="test", finish_reason="stop", reasoning=self.MARK)
        return Reply(text=json.dumps(sample(request.output_schema)), finish_reason="stop", reasoning=self.MARK)

    def __repr__(self) -> str:
        return "TestModel()"


def _allowed(request: Request) -> list[Mapping[str, Any]]:
    """The tools offered that ``tool_choice`` lets the model call."""
    choice = request.settings.get("tool_choice", "auto")
    if choice == "none":
        return []
    if isinstance(choice, Mapping):
        choice = choice.get("function", {}).get("name")
    if choice in ("auto", "required", None):
        return list(request.tools)
    return [t for t in request.tools if t["name"] == choice]


def _called_this_turn(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The tools asked for since the last user message."""
    called: set[str] = set()
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        called.update(call["name"] for call in message.get("tool_calls") or ())
    return called


class LogEvents(list):  # type: ignore[type-arg]
    """functai's log events caught by `log_events`: ``(event, fields)`` pairs, in order."""

    @property
    def messages(self) -> list[str]:
        """Each event as one line: ``functai: event: key=value ...``."""
        return [f"functai: {event}: " + " ".join(f"{k}={v}" for k, v in fields.items()) for event, fields in self]

    def named(self, pattern: str) -> list[str]:
        """The events whose line (see `messages`) matches ``pattern`` (`re.search`), as
        ``pytest.warns(match=...)`` matches a warning's message."""
        return [message for message in self.messages if re.search(pattern, message)]


@contextlib.contextmanager
def log_events(level: int = logging.INFO) -> Iterator[LogEvents]:
    """Catch the events functai logs inside the block through the standard library's ``functai``
    logger, whatever else the application's logging does: a test asks what was skipped, retried
    or survived. (An application that configured structlog gets them there instead.)"""
    caught = LogEvents()

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            event = getattr(record, "functai_event", None)
            if event is not None:
                caught.append((event, dict(getattr(record, "functai_fields", {}))))

    handler = Catch(level)
    logger = logging.getLogger("functai")
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(min(level, before) if before else level)
    try:
        yield caught
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


__all__ = ["LogEvents", "ScriptedLM", "TestModel", "log_events", "tool_call", "tool_calls"]
