"""Tools: ``@tool`` makes a typed Python function a tool; an AI function can be one too.

Running the tools a model asks for is `functai._calls.toolrun`. An AI function is known here as
a `functai._calls.program.Program`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Mapping, overload

from .._errors import FunctAIError
from .program import Program, check_effects, signature_of
from .toolinputs import ToolInputs
from .steps import in_thread

#: ``reconcile(key, input)``: what a tool left started by a crash did (its result), or None if nothing.
Reconcile = Callable[[str, dict[str, Any]], Any]


class Tool:
    """A Python function the model may ask to run. Made by `tool`."""

    def __init__(self, fn: Callable[..., Any], *, effects: str | None = None, idempotent: bool = False,
                 reconcile: Reconcile | None = None) -> None:
        check_effects(effects)
        self.fn = fn
        self.name: str = fn.__name__
        self.effects = effects
        self.idempotent = _flag(idempotent)
        #: Settles a call recorded started with no result, when its turn is resumed (see `tool`).
        self.reconcile = _reconciler(reconcile, effects, self.name)
        self.description: str = (inspect.getdoc(fn) or "").strip()
        #: Its inputs: read by their annotations before anything sees them (`ToolInputs`).
        self.inputs = ToolInputs(*signature_of(fn, f"tool {self.name}"), self.name)
        self.parameters = self.inputs.schema
        self.is_async = inspect.iscoroutinefunction(fn)

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def invoke(self, input: Mapping[str, Any]) -> Any:
        return self.fn(**input)

    async def ainvoke(self, input: Mapping[str, Any]) -> Any:
        """Run in an async call: awaited if ``async def``, else in a worker thread (keeping contextvars)."""
        if self.is_async:
            return await self.fn(**input)
        value = await in_thread(functools.partial(self.fn, **input))
        if value is not None and hasattr(value, "__await__"):
            value = await value
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} effects={self.effects}>"


@overload
def tool(fn: Program, /, *, effects: str | None = None, idempotent: bool = False,  # type: ignore[overload-overlap]  # an AIFunction is callable too: it matches here first
         reconcile: None = None) -> ProgramTool: ...
@overload
def tool(fn: Callable[..., Any], /, *, effects: str | None = None, idempotent: bool = False,
         reconcile: Reconcile | None = None) -> Tool: ...
@overload
def tool(
    fn: None = None, /, *, effects: str | None = None, idempotent: bool = False, reconcile: Reconcile | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(fn: Callable[..., Any] | None = None, /, *, effects: str | None = None, idempotent: bool = False,
         reconcile: Reconcile | None = None) -> Any:
    """``@tool`` or ``@tool(effects="reads" | "changes", idempotent=False, reconcile=None)``: a tool
    from a typed function.

    Undeclared effects are unknown, and every approval rule treats them like
    ``"changes"``. ``tool(ai_function, effects=...)`` declares the effects of
    an AI function used as a tool (undeclared, they are derived from its tools).
    ``idempotent=True`` says running it twice with one input does no more than
    once, so a ``tool_error`` handler may retry it though it changes things.
    ``reconcile=fn`` settles a call the process died in: when its turn is
    resumed, ``fn(key, input)`` returns the result it had, or None when it had
    no effect (then it runs again, with the same `functai.tool_key`).
    """
    check_effects(effects)
    _flag(idempotent)
    if fn is None:
        return lambda f: tool(f, effects=effects, idempotent=idempotent, reconcile=reconcile)
    if isinstance(fn, Program):
        if reconcile is not None:
            raise TypeError(
                f"tool({fn.name}, reconcile=...): an AI function used as a tool takes no reconcile; its own "
                "tools are what take effect, so give reconcile= to the @tool functions that call the outside world")
        return ProgramTool(fn, effects=effects, idempotent=idempotent)
    return Tool(fn, effects=effects, idempotent=idempotent, reconcile=reconcile)


def _reconciler(reconcile: Any, effects: str | None, name: str) -> Reconcile | None:
    if reconcile is None:
        return None
    if not callable(reconcile):
        raise TypeError(f"tool {name}: reconcile takes a function reconcile(key, input), not {reconcile!r}")
    if effects == "reads":
        raise ValueError(
            f"tool {name}: reconcile is not needed for a tool with effects='reads': one that only reads is never "
            "recorded as started and simply runs again when its turn is resumed; drop reconcile= (or declare "
            "effects='changes' if it does change something)")
    return reconcile  # type: ignore[no-any-return]


def _flag(idempotent: Any) -> bool:
    if idempotent is not True and idempotent is not False:
        raise TypeError(f"tool(idempotent=...) takes True or False, not {idempotent!r}")
    return idempotent


def as_tool(item: Any) -> Any:
    """A tool for the runner: a `Tool`, or an AI function used as one."""
    if isinstance(item, (Tool, ProgramTool)):
        return item
    if isinstance(item, Program):
        return _program_tool(item)
    raise TypeError(f"{item!r} is not a tool: use @functai.tool or an AI function")


def _program_tool(program: Program) -> "ProgramTool":
    """The AI function as a tool, made once (not its input schema on every call that offers it),
    and again when what it was made from is replaced."""
    made_from = (program.fn, program.signature, program._hints, program.name, program.instruction, program.version)
    kept = program.__dict__.get("_as_tool")
    if kept is None or any(a is not b for a, b in zip(kept[0], made_from)):
        kept = program._as_tool = (made_from, ProgramTool(program))
    return kept[1]


def derived_effects(program: Program, visiting: set[int] | None = None) -> str:
    """An AI function's effects as a tool: declared, else "reads" unless one of its
    own tools changes things or declares nothing (a function with no tools reads)."""
    declared = program.declared_effects
    if declared is not None:
        return declared
    visiting = set() if visiting is None else visiting
    if id(program) in visiting:
        return "reads"  # a cycle adds no tool that is not already counted
    visiting.add(id(program))
    for item in program.tools:
        if isinstance(item, ProgramTool) and item.declared is None:
            item = item.program
        effects = derived_effects(item, visiting) if isinstance(item, Program) else getattr(item, "effects", None)
        if effects != "reads":
            return "changes"
    return "reads"


class ProgramTool:
    """An AI function used as a tool of another (``tools=[fn]`` or ``tool(fn, effects=...)``)."""

    def __init__(self, program: Program, *, effects: str | None = None,
                 idempotent: bool = False) -> None:
        self.program = program
        self.idempotent = idempotent
        self.name = program.name
        self.description = program.instruction
        self.inputs = ToolInputs(program.signature, program._hints, self.name)
        self.parameters = self.inputs.schema
        #: What ``tool(fn, effects=...)`` declared (None: derived).
        self.declared = effects
        self.reconcile: Reconcile | None = None
        #: A stable id for the asking function's version: the program's, plus what was declared here.
        self.version = program.version if effects is None else f"{program.version}/{effects}"

    @property
    def effects(self) -> str:
        """Declared, else derived from the function's own tools (see `derived_effects`)."""
        return self.declared if self.declared is not None else derived_effects(self.program)

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.program(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} (AI function) effects={self.effects}>"

    def invoke(self, input: Mapping[str, Any]) -> Any:
        return self.program(**input)  # read by its inputs' types already

    async def ainvoke(self, input: Mapping[str, Any]) -> Any:
        return await self.program.acall(**input)


def tool_inputs(program: Program, path: str) -> ToolInputs | None:
    """The inputs of the tool at ``path`` (``support/answer/refund``) below ``program``, or None
    when the path does not lead to one of its tools (a tool added by a plugin, say)."""
    names = path.split("/")[1:]
    holder: Any = program
    for depth, name in enumerate(names):
        tools = dict(zip(holder.tool_names, holder.tools)) if isinstance(holder, Program) else {}
        found = tools.get(name)
        if found is None:
            return None
        found = as_tool(found)
        if depth == len(names) - 1:
            return found.inputs  # type: ignore[no-any-return]
        holder = getattr(found, "program", None)
    return None


class ApprovalError(FunctAIError):
    """A tool call needed a person's approval and nobody could be asked."""

    code = "approval-required"

    def __init__(self, message: str, *, approval: dict[str, Any]) -> None:
        super().__init__(message)
        #: What was to be approved: name, input, effects, path, plugin, question.
        self.approval = approval
