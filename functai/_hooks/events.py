"""The events handlers are given, one class per hook: read-only, so that a handler changes a
call only by returning a Change, and every change is recorded.
"""

from __future__ import annotations

import warnings
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, TypeVar

import attrs

if TYPE_CHECKING:
    from .._errors import FunctAIError
    from .._models.endpoint import Endpoint
    from .._models.request import Reply, Request

R = TypeVar("R")


class Memory(Protocol):
    """Where a conversation keeps entries (conversations provide it)."""

    def entries(self, plugin: str, kind: str, all_branches: bool = False) -> list[dict[str, Any]]: ...

    def latest(self, plugin: str, kind: str, all_branches: bool = False, this_turn: bool = False,
               ) -> dict[str, Any] | None: ...

    def remember(self, plugin: str, kind: str, data: Any) -> None: ...

    def atomically(self, plugin: str, decide: Callable[[], R], kept: list[tuple[str, Any]]) -> R: ...


#: The engine's write to a read-only event field (after a Change is folded in).
set_field = _set = object.__setattr__


def _refuse(event: "Event", unknown: dict[str, Any]) -> None:
    raise TypeError(f"{type(event).__name__} has no field {sorted(unknown)[0]!r}")


class ReadOnlyList(tuple):  # type: ignore[type-arg]
    """A list as handlers read it: a tuple, which a change built from it gives back as a list."""

    __slots__ = ()


def frozen(value: Any) -> Any:
    """A read-only deep view of JSON-like data: dicts as mapping proxies, lists as `ReadOnlyList`s."""
    if isinstance(value, (dict, MappingProxyType)):
        return MappingProxyType({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list):
        return ReadOnlyList(frozen(item) for item in value)
    if isinstance(value, tuple):
        return tuple(frozen(item) for item in value)
    return value


def thawed(value: Any) -> Any:
    """What a change built from `frozen` views stands for: its lists and dicts as lists and dicts
    (``Change(inputs={**tool.input, "q": ...})`` is the documented way to change one input)."""
    kind = type(value)
    if kind is dict or kind is MappingProxyType:
        return {key: thawed(item) for key, item in value.items()}
    if kind is ReadOnlyList or kind is list:
        return [thawed(item) for item in value]
    if kind is tuple:
        return tuple(thawed(item) for item in value)
    return value


class ReadOnly:
    """An event field holding the caller's data (inputs, outputs), which handlers read as a read-only
    deep view, made at its first read and again when the engine sets another value: a nested list
    edited in place would change what runs and what is kept, unrecorded. A change is a Change."""

    __slots__ = ("name", "view")

    def __init__(self, name: str) -> None:
        self.name, self.view = name, f"_view_{name}"

    def __get__(self, event: Event | None, owner: Any = None) -> Any:
        if event is None:
            return self
        fields = event.__dict__
        value = fields[self.name]
        made = fields.get(self.view)
        if made is None or made[0] is not value:
            made = fields[self.view] = (value, frozen(value))
        return made[1]

    def __set__(self, event: Event, value: Any) -> None:  # the engine's, through set_field
        event.__dict__[self.name] = value


def given(event: Event, name: str) -> Any:
    """The engine's read of a field: the value itself, not the view handlers are given."""
    return event.__dict__[name]


class Event:
    """Base of every event: ``entries(kind)`` reads this plugin's entries.

    Not attrs: one is made per hook per call, its fields filled into the instance dict in one
    step. The engine keeps ``_plugin`` (whose handler runs), ``_memory`` and ``_us`` there too.
    """

    #: The fields handlers read, in the order ``repr`` shows them.
    _fields: tuple[str, ...] = ()
    #: What the engine may give besides the fields (not shown in ``repr``).
    _also: tuple[str, ...] = ()
    #: Fields of the caller's data, which handlers read as read-only deep views (`ReadOnly`).
    _views: tuple[str, ...] = ()
    _plugin: str | None = None
    _memory: Memory | None = None
    #: The engine's: the handler's settings block while it runs (see `functai._hooks.fold`).
    _us: Any

    if TYPE_CHECKING:  # each class annotates what its ``_fields`` names (its __init__ is written below)
        def __init__(self, **fields: Any) -> None: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls._views:
            setattr(cls, name, ReadOnly(name))
        known = cls._fields + cls._also
        if not known:
            return
        # A keyword per field, as dataclasses writes an init: cheaper than checking ``**fields``.
        keywords = "".join(f"{name}=None, " for name in known)
        values = "".join(f"{name!r}: {name}, " for name in known)
        source = (f"def __init__(self, *, {keywords}**unknown):\n"
                  "    if unknown:\n"
                  "        _refuse(self, unknown)\n"
                  f"    _set(self, '__dict__', {{{values}}})\n")
        namespace = {"_set": _set, "_refuse": _refuse}
        exec(source, namespace)
        cls.__init__ = namespace["__init__"]  # type: ignore[method-assign, assignment]

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            raise AttributeError(
                f"{type(self).__name__}.{name} is read-only: return a functai.Change "
                "(or, in request, a new Request) to change it"
            )
        _set(self, name, value)

    def entries(self, kind: str, *, all_branches: bool = False) -> list[dict[str, Any]]:
        """This plugin's entries of ``kind`` on the current branch (``all_branches``: on every branch
        of the conversation), oldest first."""
        if self._memory is None or self._plugin is None:
            return []
        return self._memory.entries(self._plugin, kind, all_branches)

    def latest(self, kind: str, *, all_branches: bool = False, this_turn: bool = False) -> dict[str, Any] | None:
        """The newest of `entries` (``kind``, ``all_branches`` as there; ``this_turn``: of those kept
        at this turn), or None. It costs what was kept after it, not what the whole conversation
        holds: a plugin that keeps running totals in its entries reads them in one step."""
        if self._memory is None or self._plugin is None:
            return None
        return self._memory.latest(self._plugin, kind, all_branches, this_turn)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"


class _Remembers(Event):
    #: Entries `atomically` holds back until its ``decide`` is done (None: kept at once).
    _kept: list[tuple[str, Any]] | None = None

    def remember(self, kind: str, data: Any) -> None:
        """Keep an entry at the current turn, under this handler's plugin."""
        if self._memory is None or self._plugin is None:
            raise ValueError("remember() works only inside a conversation turn")
        if self._kept is not None:
            self._kept.append((kind, data))
            return
        self._memory.remember(self._plugin, kind, data)

    def atomically(self, decide: Callable[[], R]) -> R:
        """Run ``decide()``, which reads entries and may `remember`, as one step against every other
        thread and process writing to the conversation: its entries are kept only if nothing was
        written there since it began reading; else it runs again on what is there now. Returns what
        ``decide`` returns; when it raises, nothing it remembered is kept. Outside a conversation turn
        it just runs ``decide``. A check-then-reserve (a budget) made this way cannot be passed by
        two writers at once."""
        if self._memory is None or self._plugin is None:
            return decide()
        kept: list[tuple[str, Any]] = []
        _set(self, "_kept", kept)
        try:
            return self._memory.atomically(self._plugin, decide, kept)
        finally:
            _set(self, "_kept", None)


class TurnStartEvent(Event):
    """``turn_start``: a conversation turn is about to be sent."""

    _fields = ("inputs", "conversation", "parent", "program")
    _views = ("inputs",)
    inputs: Mapping[str, Any]
    #: The conversation's id, and the done turn this one continues (None: the first).
    conversation: str
    parent: str | None
    #: The conversation's AI function.
    program: Any  # the AI function (a functai.AIFunction; typed loosely: hooks sit below calls)


class ContextEvent(Event):
    """``context``: the earlier turns a turn will be shown have been picked."""

    _fields = ("turns", "sections", "conversation", "parent", "program")
    #: The turns picked, oldest first (each with ``id``, ``inputs``, ``outputs``, ``at``).
    turns: tuple[Any, ...]
    sections: tuple[str, ...]
    conversation: str
    parent: str | None
    program: Any  # the AI function (a functai.AIFunction; typed loosely: hooks sit below calls)


class CallEvent(_Remembers):
    """``before_call``: an AI function call is about to be laid out and asked."""

    _fields = (
        "function", "program", "inputs", "instruction", "sections", "lm", "settings",
        "tools", "all_tools", "path", "conversation", "turn",
    )
    _views = ("inputs",)
    inputs: Mapping[str, Any]
    #: The function's name, and the function.
    function: str
    program: Any  # the AI function (a functai.AIFunction; typed loosely: hooks sit below calls)
    instruction: str
    sections: tuple[str, ...]
    #: The model asked (None with ``client=``), the model settings, the tools offered (of ``all_tools``).
    lm: str | None
    settings: Mapping[str, Any]
    tools: tuple[str, ...]
    all_tools: tuple[str, ...]
    #: Where the call sits in its call tree (``desk/answer``); its conversation and turn, or None.
    path: str
    conversation: str | None
    turn: str | None


@attrs.frozen
class Answer:
    """A person's (or a ``decide`` function's) answer to a question a ``request`` handler asked:
    ``allow``, the ``extend`` granted with it, a ``reason`` given with a refusal, who answered
    (``by``), and the question's ``key`` (the same when a resumed turn reads the answer again)."""

    allow: bool
    extend: float | None = None
    reason: str | None = None
    by: str | None = None
    key: str | None = None


class Question:
    """What ``ask`` puts to a person or to its ``decide`` function, the same for a request and a tool
    call: the ``text`` a person reads (a tool call's may be None), the ``extend`` offered with it,
    the ``plugin`` that asked, and ``about``, the event it is about (a `functai.events.Request` as
    it will be sent, a `functai.events.ToolCall` as it will run). A plain class: made at import,
    an attrs class would cost every program most of a millisecond."""

    __slots__ = ("text", "extend", "plugin", "about")

    def __init__(self, text: str | None, extend: float | None, plugin: str | None, about: Event) -> None:
        self.text, self.extend, self.plugin, self.about = text, extend, plugin, about

    def __repr__(self) -> str:
        return f"Question(text={self.text!r}, extend={self.extend!r}, plugin={self.plugin!r})"

    #: The keys a ``decide`` function read a request's question by, when it was given a mapping.
    _OLD_KEYS = ("kind", "question", "extend", "plugin", "path", "function")

    def __getitem__(self, key: str) -> Any:
        if key not in self._OLD_KEYS:
            raise KeyError(key)
        warnings.warn(f"question[{key!r}] is deprecated: a decide function gets a functai.events.Question; read "
                      f"its attributes (text, extend, plugin, about)", DeprecationWarning, stacklevel=2)
        kind = "request" if isinstance(self.about, RequestEvent) else "tool"
        return {"kind": kind, "question": self.text, "extend": self.extend, "plugin": self.plugin,
                "path": self.about.path, "function": self.about.function}[key]  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        about = self.about if name[:1] != "_" and name != "about" else None
        if about is None or not hasattr(about, name):
            raise AttributeError(f"'Question' object has no attribute {name!r}")
        warnings.warn(f"question.{name} is deprecated: a decide function gets a functai.events.Question, not the "
                      f"event; read question.about.{name}", DeprecationWarning, stacklevel=2)
        return getattr(about, name)


#: What a ``decide`` function is: given the question, it answers True (allow, with the offer), a
#: number (allow, with that much), False or None (refuse), or a string (refuse, with that reason).
Decide = Callable[[Question], Any]


class RequestEvent(_Remembers):
    """``request``: a request is about to be sent to the model client. ``recorded``: a resumed turn
    reads this request's reply from its record (nothing is paid for it now); ``turn``: the
    conversation turn's id, or None; ``outer_call``: the outermost call's id (``call`` itself when
    this call is outermost), shared by every call nested in it. ``endpoint``: who will answer it
    (`functai.Endpoint`: provider, server, a fingerprint of who asks), for a plugin that keeps replies."""

    _fields = ("request", "endpoint", "function", "path", "call", "turn", "recorded", "outer_call")
    request: Request
    endpoint: Endpoint
    function: str
    path: str
    call: str
    turn: str | None
    recorded: bool
    outer_call: str
    #: The engine's: this request's place in its turn (a question's key).
    _ordinal: int
    #: How ``ask`` reaches a person (the engine's): ``ask_person(event, question, extend, decide)``.
    _also = ("ask_person",)
    ask_person: Callable[..., Answer | None] | None

    def ask(self, question: str, *, extend: float | None = None, decide: Decide | None = None) -> Answer | None:
        """Ask a person (or ``decide``) before this request is sent, offering ``extend`` more of what the
        plugin guards. In a conversation turn with no answer yet the turn **waits** (`functai.Waiting`);
        a resumed turn gets the answer given. ``decide`` (see `Decide`) answers at once. None when
        nobody can be asked (a plain call, no ``decide``)."""
        if self.ask_person is None:
            raise RuntimeError("nobody can be asked about this request")
        return self.ask_person(self, question, extend, decide)


class ModelErrorEvent(Event):
    """``model_error``: the model client failed for a request."""

    _fields = ("request", "error", "attempt", "lm", "function", "path", "call")
    request: Request
    error: FunctAIError
    attempt: int
    lm: str | None
    function: str
    path: str
    call: str


class ChunkEvent(Event):
    """``chunk``: a piece of a reply's text arrived, before any of it is shown (``part`` "text"), or
    another whole text the call shows or keeps: "reasoning", "refusal", "error"."""

    _fields = ("text", "shown", "final", "part", "function", "path", "call")
    text: str
    #: The last piece of the reply, or of the other text (``part``: "text", "reasoning", "refusal", "error").
    final: bool
    part: str
    function: str
    path: str
    call: str

    @property
    def shown(self) -> str:
        """The reply's text already shown (joined only for a handler that reads it)."""
        return "".join(self.__dict__["shown"])


class ReplyEvent(_Remembers):
    """``reply``: the model (or a plugin, ``answered``) answered a request; ``recorded``: read
    back from a resumed turn's record, paid for when it was first asked. ``endpoint``: who was asked
    (`functai.Endpoint`)."""

    _fields = ("request", "endpoint", "reply", "seconds", "attempt", "function", "path", "server", "call", "answered",
               "turn", "recorded", "outer_call", "log_content")
    request: Request
    endpoint: Endpoint
    reply: Reply
    seconds: float | None
    attempt: int
    function: str
    path: str
    #: ``(host, port)`` of the server that answered, when known.
    server: tuple[str, int | None] | None
    call: str
    #: The plugin that answered instead of the model, or None.
    answered: str | None
    turn: str | None
    recorded: bool
    outer_call: str
    #: Whether the call's record keeps content (the ``log_content`` setting): a plugin that sends
    #: what was said elsewhere (a tracer) keeps it back when False.
    log_content: bool


class ToolCallEvent(_Remembers):
    """``tool_call``: the model asked for a tool, which has not run yet."""

    _fields = ("name", "input", "effects", "path", "invocation", "id", "function", "settings", "key")
    _views = ("input",)
    name: str
    input: Mapping[str, Any]
    effects: str | None
    path: str
    invocation: int
    id: str
    function: str
    settings: Mapping[str, Any]
    #: The tool call's idempotency key (`functai.tool_key`).
    key: str
    #: The engine's: the questions handlers asked, put once every handler has run.
    _questions: list[tuple[str | None, str | None, Any]]
    #: How ``ask`` reaches a person (the engine's): ``ask_person(event, reason, decide)``.
    _also = ("ask_person",)
    ask_person: Callable[..., None] | None

    def ask(self, question: str | None = None, *, decide: Decide | None = None, **old: Any) -> None:
        """Ask a person (or ``decide``, see `Decide`) whether this tool call may run. The question is put
        once every handler has run, about the call as it will run; a refusal stops the tool."""
        if old:
            if set(old) != {"reason"} or question is not None:
                raise TypeError(f"ask() got an unexpected keyword argument {next(iter(old))!r}")
            warnings.warn("tool.ask(reason=...) is deprecated: the question is ask's first argument, "
                          "tool.ask(question)", DeprecationWarning, stacklevel=2)
            question = old["reason"]
        if self.ask_person is None:
            raise RuntimeError("nobody can be asked about this tool call")
        self.ask_person(self, question, decide)


class ToolErrorEvent(Event):
    """``tool_error``: a tool raised."""

    _fields = ("name", "input", "error", "exception", "effects", "invocation", "attempt", "id", "path", "function",
               "key")
    _views = ("input",)
    name: str
    input: Mapping[str, Any]
    #: ``Type: message``, and the exception itself.
    error: str
    exception: BaseException
    effects: str | None
    invocation: int
    attempt: int
    id: str
    path: str
    function: str
    key: str


class ToolResultEvent(_Remembers):
    """``tool_result``: a tool ran."""

    _fields = ("name", "input", "output", "path", "invocation", "function", "key")
    _views = ("input",)
    name: str
    input: Mapping[str, Any]
    #: What the model is shown of the result.
    output: str
    path: str
    invocation: int
    function: str
    key: str


class CallEndEvent(Event):
    """``call_end``: an AI function call ended, done or failed (hears only)."""

    _fields = ("record", "function", "path", "error", "seconds", "usage", "server")
    record: RecordView
    function: str
    path: str
    #: The error's code, or None when the call was done.
    error: str | None
    seconds: float | None
    usage: Mapping[str, int]
    server: tuple[str, int | None] | None


class RecordView:
    """A call record that a hearing handler can read (as read-only views) but not change."""

    __slots__ = ("_record",)

    def __init__(self, record: Any) -> None:
        _set(self, "_record", record)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return frozen(getattr(self._record, name))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the record a call_end handler is given is read-only ({name!r})")

    def to_dict(self) -> dict[str, Any]:
        """A copy of the record as JSON data (what the call log keeps)."""
        import copy

        return copy.deepcopy(self._record.to_dict())

    def __repr__(self) -> str:
        return f"RecordView({self._record.id}, {self._record.path})"


class TurnEndEvent(_Remembers):
    """``turn_end``: a turn ended (done, failed or stopped)."""

    _fields = ("turn", "state", "inputs", "outputs", "conversation", "parent")
    _views = ("inputs", "outputs")
    turn: str
    #: "done", "failed" or "stopped".
    state: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    conversation: str
    parent: str | None
    #: Reads the done turns of the branch (the engine's).
    _also = ("branch_turns",)
    branch_turns: Callable[[], list[Any]] | None

    def turns(self) -> list[Any]:
        """Done turns of the branch, this one last when done."""
        return self.branch_turns() if self.branch_turns is not None else []


class TurnWaitEvent(_Remembers):
    """``turn_wait``: a turn started waiting for a person."""

    _fields = ("conversation", "turn", "key", "parent", "inputs", "questions")
    _views = ("inputs", "questions")
    conversation: str
    turn: str
    #: The key the turn was sent with, or None.
    key: str | None
    parent: str | None
    inputs: Mapping[str, Any]
    #: What the turn waits for, each as its wait record keeps it (``key``, ``kind``, what is asked).
    questions: tuple[Mapping[str, Any], ...]


class TurnAnswerEvent(Event):
    """``turn_answer``: an answer to a waiting turn was recorded, in this process."""

    _fields = ("conversation", "turn", "key", "keys", "allow", "by", "reason", "pid")
    conversation: str
    turn: str
    #: The key the turn was sent with, or None.
    key: str | None
    #: The questions answered (their keys).
    keys: tuple[str, ...]
    allow: bool
    by: str | None
    reason: str | None
    #: The process that recorded the answer.
    pid: int


#: Each hook's event class (`functai.events` names each for its hook: ``before_call`` → ``BeforeCall``).
BY_HOOK: dict[str, type[Event]] = {
    "turn_start": TurnStartEvent, "context": ContextEvent, "before_call": CallEvent, "request": RequestEvent,
    "model_error": ModelErrorEvent, "chunk": ChunkEvent, "reply": ReplyEvent, "tool_call": ToolCallEvent,
    "tool_error": ToolErrorEvent, "tool_result": ToolResultEvent, "call_end": CallEndEvent, "turn_end": TurnEndEvent,
    "turn_wait": TurnWaitEvent, "turn_answer": TurnAnswerEvent,
}
