"""The events handlers are given: one class per hook.

The engine updates an event between handlers, so each handler sees it as the
handlers before it left it. Read-only views (`MappingProxyType`, tuples) keep
a handler from changing anything except by returning a Change.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

import attrs


class Memory(Protocol):
    """Where a conversation keeps entries (conversations provide it)."""

    def entries(self, plugin: str, kind: str) -> list[dict[str, Any]]: ...

    def remember(self, plugin: str, kind: str, data: Any) -> None: ...


@attrs.define(slots=True, eq=False)
class Event:
    """Base of every event: ``entries(kind)`` reads this plugin's entries."""

    _plugin: str | None = attrs.field(default=None, init=False, repr=False)
    _memory: Memory | None = attrs.field(default=None, init=False, repr=False)

    def entries(self, kind: str) -> list[dict[str, Any]]:
        """This plugin's entries of ``kind`` on the current branch, oldest first."""
        if self._memory is None or self._plugin is None:
            return []
        return self._memory.entries(self._plugin, kind)


class _Remembers:
    __slots__ = ()

    def remember(self, kind: str, data: Any) -> None:
        """Keep an entry at the current turn, under this handler's plugin."""
        memory = self._memory  # type: ignore[attr-defined]
        if memory is None or self._plugin is None:  # type: ignore[attr-defined]
            raise ValueError("remember() works only inside a conversation turn")
        memory.remember(self._plugin, kind, data)  # type: ignore[attr-defined]


@attrs.define(slots=True, eq=False)
class TurnStartEvent(Event):
    inputs: Mapping[str, Any]
    conversation: str
    parent: str | None
    program: Any


@attrs.define(slots=True, eq=False)
class ContextEvent(Event):
    turns: tuple[Any, ...]
    sections: tuple[str, ...]
    conversation: str
    parent: str | None
    program: Any


@attrs.define(slots=True, eq=False)
class CallEvent(_Remembers, Event):
    function: str
    program: Any
    inputs: Mapping[str, Any]
    instruction: str
    sections: tuple[str, ...]
    lm: str | None
    settings: Mapping[str, Any]
    tools: tuple[str, ...]
    all_tools: tuple[str, ...]
    path: str
    conversation: str | None = None
    turn: str | None = None


@attrs.define(slots=True, eq=False)
class RequestEvent(Event):
    request: Any
    function: str
    path: str


@attrs.define(slots=True, eq=False)
class ToolCallEvent(_Remembers, Event):
    name: str
    input: Mapping[str, Any]
    effects: str | None
    path: str
    invocation: int
    id: str
    function: str
    settings: Mapping[str, Any]
    _ask: Callable[..., bool] | None = attrs.field(default=None, repr=False, alias="ask_person")
    #: Set by ``ask`` when a person refused: the reason, or "" for none.
    _refusal: str | None = attrs.field(default=None, init=False, repr=False)

    def ask(self, reason: str | None = None, *, decide: Callable[["ToolCallEvent"], Any] | None = None) -> bool:
        """Ask a person whether this tool call may run; True to allow."""
        if self._ask is None:
            raise RuntimeError("nobody can be asked about this tool call")
        return self._ask(self, reason, decide)


@attrs.define(slots=True, eq=False)
class ToolResultEvent(_Remembers, Event):
    name: str
    input: Mapping[str, Any]
    output: str
    path: str
    invocation: int
    function: str


@attrs.define(slots=True, eq=False)
class TurnEndEvent(_Remembers, Event):
    turn: str
    state: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    conversation: str
    parent: str | None
    _turns: Callable[[], list[Any]] | None = attrs.field(default=None, repr=False, alias="branch_turns")

    def turns(self) -> list[Any]:
        """Done turns of the branch, this one last when done."""
        return self._turns() if self._turns is not None else []
