"""The event each hook gives its handlers, typed, so an editor completes a plugin's handler and
``mypy --strict`` checks it::

    @guard.request
    def check(event: functai.events.Request) -> functai.Change | None:
        if event.request.model.startswith("o1"):
            ...

One class per hook, named for it (``before_call`` → `BeforeCall`); `BY_HOOK` maps a hook's name
to its class. An event is read-only: a handler changes a call by what it returns, never by
setting a field.
"""

from __future__ import annotations

from ._hooks.events import BY_HOOK, Answer, Decide, Question, RecordView
from ._hooks.events import CallEndEvent as CallEnd
from ._hooks.events import CallEvent as BeforeCall
from ._hooks.events import ChunkEvent as Chunk
from ._hooks.events import ContextEvent as Context
from ._hooks.events import Event
from ._hooks.events import ModelErrorEvent as ModelError
from ._hooks.events import ReplyEvent as Reply
from ._hooks.events import RequestEvent as Request
from ._hooks.events import ToolCallEvent as ToolCall
from ._hooks.events import ToolErrorEvent as ToolError
from ._hooks.events import ToolResultEvent as ToolResult
from ._hooks.events import TurnAnswerEvent as TurnAnswer
from ._hooks.events import TurnEndEvent as TurnEnd
from ._hooks.events import TurnStartEvent as TurnStart
from ._hooks.events import TurnWaitEvent as TurnWait

__all__ = ["Answer", "BY_HOOK", "BeforeCall", "CallEnd", "Chunk", "Context", "Decide", "Event", "ModelError",
           "Question", "RecordView", "Reply", "Request", "ToolCall", "ToolError", "ToolResult", "TurnAnswer", "TurnEnd",
           "TurnStart", "TurnWait"]
