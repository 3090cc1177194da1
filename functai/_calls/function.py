"""`@ai`: a typed Python function whose body is a language-model call.

The docstring is the instruction; the signature gives the named, typed inputs
and the typed output. The call itself is `functai._calls.run`, which reads the function
as a `functai._calls.program.Program`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import types
from typing import TYPE_CHECKING, Any, Callable, Generic, Mapping, ParamSpec, Sequence, TypeVar, overload

from .._errors import FunctAIError
from .._layers import SETTING_NAMES, Layer
from .inputs import Recorded, input_checker
from .outputs import output_schema, to_jsonable
from .program import Program, check_effects, signature_of
from .records import Result
from .run import call_steps, run_call
from .steps import adrive

if TYPE_CHECKING:
    from .streaming import AStream, Stream
    from .template import Template

#: The inputs and the output of an AI function: `ai` keeps the decorated function's, so
#: ``capital("Peru")`` is a ``str`` to a type checker and ``capital(3)`` an error.
P = ParamSpec("P")
R = TypeVar("R")


def _stable(value: Any) -> Any:
    data = to_jsonable(value)
    if isinstance(data, str) and type(value).__repr__ is object.__repr__:  # type: ignore[comparison-overlap]  # mypy binds it
        return f"<{type(value).__module__}.{type(value).__qualname__}>"  # its repr holds an address
    return data


def _tool_name(tool: object) -> str:
    name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"tools must be @functai.tool functions or AI functions, not {tool!r}")
    return name


class AIFunction(Program, Generic[P, R]):
    """A function answered by a language model, typed as the function it was made from. Made by `ai`."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        tools: Sequence[Any] = (),
        layout: Template | None = None,
        own: Layer,
        effects: str | None = None,
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name: str = fn.__name__
        self.module: str = fn.__module__
        doc = inspect.getdoc(fn)
        if not doc or not doc.strip():
            raise TypeError(f"@ai function {self.name} needs a docstring: it is the instruction the model follows")
        self.instruction: str = doc.strip()
        self.signature, hints = signature_of(fn, f"@ai function {self.name}")
        self._hints = hints
        self.output_type: Any = hints.get("return", str)
        self.output_schema = output_schema(self.output_type)
        self.input_names: tuple[str, ...] = tuple(self.signature.parameters)
        if layout is not None:
            from .template import Template  # loaded with the first Template, not at import

            if not isinstance(layout, Template):
                raise TypeError(f"layout must be a functai.Template, not {type(layout).__name__}")
            layout.check(self.input_names, self.name)
        self.layout = layout
        self.tools: tuple[Any, ...] = tuple(tools)
        self.tool_names: tuple[str, ...] = tuple(_tool_name(t) for t in self.tools)
        if len(set(self.tool_names)) != len(self.tool_names):
            raise TypeError(f"@ai function {self.name}: two tools share a name: {self.tool_names}")
        check_effects(effects)
        #: What ``@ai(effects=...)`` declared; None means derived from the tools (see `effects`).
        self.declared_effects: str | None = effects
        self.own = own
        self.version: str = self._version()
        params = self.signature.parameters.values()
        self._positional = sum(1 for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
        self._defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self._schemas: dict[tuple[str, ...], tuple[dict[str, Any], ...]] = {}
        self._checker: Callable[[dict[str, Any]], None] | None = None

    def check_inputs(self, inputs: dict[str, Any]) -> None:
        """Refuse ``input-invalid`` for an input that does not fit its annotation
        or cannot be shown to the model (the checks are built on the first call)."""
        checker = self._checker
        if checker is None:
            params = {p.name: p.default for p in self.signature.parameters.values()}
            checker = self._checker = input_checker(self.name, params, self._hints)
        checker(inputs)

    def read_inputs(self, data: Mapping[str, Any], check: bool = True) -> dict[str, Any]:
        """Inputs as a record keeps them (JSON data) as the values a call takes: a resumed turn or a
        rated call asked again passes a model, a dataclass, an enum as it was first given. A type JSON
        cannot give back (a date, a ``Decimal``) is passed as recorded; checked when given, its text is
        a repr, passed as a `Recorded` that shows the model what it was shown before. TypeError when
        they do not bind; with ``check`` (the call's ``check_inputs``), ValueError when one does not
        fit its annotation."""
        from .outputs import read_value  # only a resume or an evaluation reads inputs back

        inputs = self.bind((), dict(data))
        hints = self._hints
        as_recorded: set[str] = set()
        for name in data:
            if name in hints:
                try:
                    value = read_value(data[name], hints[name])
                except TypeError:  # checked when first given; its recorded form is all there is
                    as_recorded.add(name)
                    if check and isinstance(data[name], str):  # checked when given: its repr, shown as before
                        inputs[name] = Recorded(data[name])
                    continue
                except ValueError as error:
                    if not check:
                        continue
                    raise ValueError(f"input {name!r}: {error}") from None
                if value != data[name]:  # as recorded where that is the same (3 for a float: shown as it was)
                    inputs[name] = value
        if not check:
            return inputs
        params = {p.name: p.default for p in self.signature.parameters.values() if p.name not in as_recorded}
        try:
            input_checker(self.name, params, hints)(inputs)
        except FunctAIError as error:  # its hint (turn the check off) does not apply to what was recorded
            raise ValueError(error.message.partition(" (or turn the check off")[0]) from None
        return inputs

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Inputs by name, in signature order, defaults filled in — as Python binds them."""
        names = self.input_names
        if len(args) <= self._positional and all(k in self._defaults or k in names for k in kwargs):
            inputs = dict(zip(names, args))
            if not kwargs and len(inputs) == len(names):
                return inputs
            if not inputs.keys() & kwargs.keys():
                inputs.update(kwargs)
                missing = [n for n in names if n not in inputs]
                if all(n in self._defaults for n in missing):
                    inputs.update((n, self._defaults[n]) for n in missing)
                    return {n: inputs[n] for n in names}
        unknown = [k for k in kwargs if k not in names]
        if unknown:  # named first: a misspelt input also leaves the right one missing
            import difflib

            close = difflib.get_close_matches(unknown[0], [n for n in names if n not in kwargs], n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; its inputs are {', '.join(names) or 'none'}"
            extra = "s " + ", ".join(map(repr, unknown)) if len(unknown) > 1 else f" {unknown[0]!r}"
            raise TypeError(f"{self.name}{self.signature}: unexpected input{extra}{hint}")
        try:  # let inspect say exactly what is wrong
            self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.name}{self.signature}: {error}") from None
        raise AssertionError("bind: the fast path refused what inspect accepts")  # pragma: no cover

    def tool_schemas(self, offered: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
        """The JSON schemas of the tools offered to the model, made once per choice of tools."""
        found = self._schemas.get(offered)
        if found is None:
            found = ()
            if offered:
                from .tools import as_tool  # loaded with the first function that has tools

                by_name = dict(zip(self.tool_names, self.tools))
                found = tuple(as_tool(by_name[name]).schema() for name in offered)
            self._schemas[offered] = found
        return found

    def _version(self) -> str:
        """A hash of what defines the function (plugins aside), stable across processes: annotations
        as text, defaults as JSON data (an object without its own repr by its type)."""
        hints = self._hints
        inputs = [
            [
                param.name,
                param.kind.name,
                inspect.formatannotation(hints.get(param.name, "")),
                None if param.default is param.empty else _stable(param.default),
            ]
            for param in self.signature.parameters.values()
        ]
        tools: list[Any] = []
        if self.tools:
            from .tools import as_tool  # loaded with the first function that has tools

            tools = [
                [name, getattr(tool, "version", None) or [getattr(tool, "effects", None), as_tool(tool).schema()]]
                for name, tool in zip(self.tool_names, self.tools)
            ]
        parts = {
            "function": f"{self.module}.{self.fn.__qualname__}",
            "inputs": inputs,
            "output": self.output_schema if self.output_schema is not None else "text",
            "instruction": self.instruction,
            "tools": tools,
            "layout": None if self.layout is None else [self.layout.system, self.layout.user],
        }
        if self.declared_effects is not None:  # only when declared, so other versions stay as they were
            parts["effects"] = self.declared_effects
        blob = json.dumps(parts, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_call(self, args, kwargs).value  # type: ignore[no-any-return]  # one frame less than `run`

    def run(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """The value with the call's record; on failure the raised `FunctAIError` carries it as ``.record``."""
        return run_call(self, args, kwargs)

    async def acall(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """``await fn.acall(...)``: the value, with the event loop free while the model answers."""
        return (await adrive(call_steps(self, args, kwargs))).value  # type: ignore[no-any-return]

    async def arun(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """``await fn.arun(...)``: ``(value, record)`` like `run`, from async code."""
        return await adrive(call_steps(self, args, kwargs))

    def stream(self, *args: P.args, **kwargs: P.kwargs) -> Stream[R]:
        """An iterator of `functai.StreamEvent`: text as it arrives, tool calls and results,
        approvals to answer, and ``"done"``; the stream's ``.value``/``.record`` are set at its end."""
        from .streaming import Stream  # loaded with the first stream, not at import

        return Stream(call_steps(self, args, kwargs, listen=True))

    def astream(self, *args: P.args, **kwargs: P.kwargs) -> AStream[R]:
        """`stream` as an async iterator (``async for event in fn.astream(...)``)."""
        from .streaming import AStream  # loaded with the first stream, not at import

        return AStream(call_steps(self, args, kwargs, listen=True))

    def with_instruction(self, instruction: str) -> "AIFunction[P, R]":
        """The same function — signature, tools, layout, plugins, settings — with
        another instruction (so another ``version``)."""
        if not isinstance(instruction, str) or not instruction.strip():
            raise TypeError("an instruction is non-empty text")
        original = self.fn
        copy = types.FunctionType(
            original.__code__, original.__globals__, original.__name__, original.__defaults__, original.__closure__
        )
        copy.__kwdefaults__ = original.__kwdefaults__
        copy.__annotations__ = dict(original.__annotations__)
        copy.__qualname__ = original.__qualname__
        copy.__module__ = original.__module__
        copy.__doc__ = instruction
        return AIFunction(copy, tools=self.tools, layout=self.layout, own=self.own, effects=self.declared_effects)

    @property
    def effects(self) -> str:
        """The function's effects as a tool of another (see `functai._calls.tools.derived_effects`)."""
        from .tools import derived_effects  # loaded with the first tool, not at import

        return derived_effects(self)

    def conversation(
        self,
        id: str,
        store: Any = None,
        *,
        plugins: Sequence[Any] | None = None,
        context: Any = None,
        **settings: Any,
    ) -> Any:
        """A conversation of this function: ``chat = fn.conversation("alex", store="chats/")``.

        ``store``: None (this process's memory), a folder path, a store URL (docs/stores.md) or a `Store`.
        ``context``: `functai.all_turns()` (default) or `functai.last_turns(n)`.
        ``at``: a turn id: the view continues exactly from that done turn (as
        ``continue_from`` does); a SQL store then reads only that turn's branch.
        ``plugins`` and other settings form the conversation's layer, the
        innermost block around its turns.
        """
        from .._conversations.conversation import Conversation

        return Conversation(self, id, store=store, plugins=plugins, context=context, **settings)

    def __repr__(self) -> str:
        return f"<AI function {self.module}.{self.name} {self.version}>"

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)  # type: ignore[arg-type]  # a method: self comes first


@overload
def ai(fn: Callable[P, R], /) -> AIFunction[P, R]: ...


@overload
def ai(
    *, tools: Sequence[Any] = ..., layout: Template | None = ..., effects: str | None = ...,
    plugins: Sequence[Any] | None = ..., **settings: Any
) -> Callable[[Callable[P, R]], AIFunction[P, R]]: ...


def ai(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    tools: Sequence[Any] = (),
    layout: Template | None = None,
    effects: str | None = None,
    **settings: Any,
) -> Any:
    """Make a typed function an AI function: ``@ai`` or ``@ai(**settings)``.

    ``tools``, ``layout`` and ``effects`` (what it does as a tool of another:
    ``"reads"`` or ``"changes"``; derived from its tools when left out) define
    the function (they are part of its ``version``); every other keyword is a
    setting of the function's own layer, ``plugins`` included.
    """
    check_effects(effects)
    if "program_plugins" in settings:
        raise TypeError("program_plugins is for a host's layers (configure, settings, a conversation), not @ai")
    for name in settings:
        if name not in SETTING_NAMES:
            import difflib

            close = difflib.get_close_matches(name, [*SETTING_NAMES, "tools", "layout", "effects"], n=1, cutoff=0.5)
            raise TypeError(f"unknown @ai argument {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))

    def decorate(f: Callable[..., Any]) -> AIFunction[..., Any]:
        if not isinstance(f, types.FunctionType):
            raise TypeError(
                f"@ai needs a function (a def with a docstring and typed inputs), not {type(f).__name__} {f!r:.60}"
            )
        name = getattr(f, "__name__", repr(f))
        own = Layer.make(f"@ai function {name}", **settings)
        return AIFunction(f, tools=tools, layout=layout, own=own, effects=effects)

    if fn is not None:
        return decorate(fn)
    return decorate
