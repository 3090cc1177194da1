"""One call of an AI function, from bound inputs to a recorded value.

Written once, sans I/O: `call_steps` yields the effects it needs (see
`functai._calls.steps`) and the sync, async and streaming drivers perform them.
"""

from __future__ import annotations

import os
import time
from contextvars import ContextVar
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence

from .._errors import FunctAIError, OutputError, Waiting
from .._hooks.change import Change
from .._hooks.events import CallEndEvent, CallEvent, RecordView, set_field
from .._hooks.fold import fold_part, refuse, resume
from .._hooks.hear import hear_now
from .._hooks.plugin import Plugin
from .._models.keys import without_secrets
from .._models.providers import server_of
from .._models.request import Client, Request, frozen_messages, non_answer
from .._layers import Resolved, check_log_calls, pop_block, push_block, resolve
from . import layout as layouts
from .asking import Asker, add_reasoning, add_usage, choose_client
from . import limits
from . import records
from .outputs import describe, read_output, to_jsonable
from .scope import TurnScope, current_turn
from .steps import Send, Steps, drive

#: Values whose JSON is never a record's fields (see ``outputs_of`` in conversations).
_PLAIN = (str, int, float, bool, list, tuple, dict, type(None))

if TYPE_CHECKING:
    from .program import Program
    from .toolrun import ToolRunner


class Frame(NamedTuple):
    """The call in progress in this context (for ``parent``, ``path`` and the limits on nesting)."""

    record: records.CallRecord
    path: str
    depth: int  # 1 for an outermost call, 2 for a call nested in it, …
    budget: limits.Budget  # shared by the outermost call and every call nested in it


current: ContextVar[Frame | None] = ContextVar("functai_call", default=None)


_second = (-1, "")


def now_text() -> str:
    """The time as every record writes it: ISO 8601 UTC with milliseconds."""
    global _second
    now = time.time()
    whole = int(now)
    if whole != _second[0]:  # the seconds made once a second: a third of datetime's cost, on every call
        _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{_second[1]}.{int((now - whole) * 1000):03d}+00:00"


def run_call(fn: "Program", args: tuple[Any, ...], kwargs: dict[str, Any]) -> records.Result[Any]:
    """A plain call: the pipeline run by the sync driver."""
    return drive(call_steps(fn, args, kwargs))


def call_steps(
    fn: "Program", args: tuple[Any, ...], kwargs: dict[str, Any], listen: bool = False
) -> Steps[records.Result[Any]]:
    """The whole call as steps. ``listen``: a stream consumer hears tool events and may answer approvals.

    Its parts are plain functions, called once each; only what a plugin adds (``before_call``
    handlers, acting hooks, tools) runs as nested steps: a level of ``yield from`` would cost
    every plain call."""
    inputs, scope, own_turn, resolved, frame, record = _begin(fn, args, kwargs)
    values = resolved.values
    ordinal, turn, block = _join(scope, own_turn, record)
    started = time.perf_counter()
    depth, budget = (1, limits.Budget(values["max_requests"], fn.name, record.id)) if frame is None else (
        frame.depth + 1, frame.budget)
    logged, closing, client = True, False, None
    token = current.set(Frame(record, record.path, depth, budget))
    try:
        _check_limits(fn, frame, record.path, depth, resolved)
        lm = values.get("lm") or (None if "client" in values else os.environ.get("FUNCTAI_LM") or None)
        instruction, tools, settings_view = fn.instruction, fn.tool_names, resolved.settings_view
        sections: tuple[str, ...] = tuple(turn.sections) if turn is not None else ()
        if resolved.plan.handlers["before_call"]:
            lm, instruction, sections, tools, settings_view = yield from _before_call(
                fn, inputs, resolved, record, scope, lm, instruction, sections, tools, settings_view)
        client, model, messages, model_settings = prepared(
            fn, inputs, resolved, record, turn, lm, instruction, sections, settings_view)
        runner: ToolRunner | None = None
        schemas = fn.tool_schemas(tools)
        asker = _asker(fn, record, resolved, scope, budget, client, model, listen)
        if asker is not None:
            asker.lm, asker.relay = lm, _relay(fn, inputs, record.instruction or "", turn)
        reasks = steps = 0
        while True:
            request = Request(model=model, messages=messages, tools=schemas, settings=model_settings,
                              output_schema=fn.output_schema)
            if asker is None:
                budget.spend(fn)
                record.attempts += 1
                reply = yield Send(client, request, scope)
                add_usage(record, reply)
                add_reasoning(record, reply)
            else:
                reply = yield from asker.ask(request)
                # a model_error handler may have switched them (and the layout: a baked student's, or not)
                client, model, messages = asker.client, asker.model, asker.relay(messages, lm, asker.lm)
                lm = asker.lm
            problem = non_answer(reply, fn.output_schema is not None)
            if problem is not None:  # a refusal, a filter, a cut value, nothing: asking again would not help
                raise problem
            if reply.tool_calls:
                steps += 1
                if steps > values["max_steps"]:
                    raise _too_many_steps(fn, values["max_steps"])
                if runner is None:
                    runner = _tool_runner(fn, tools, record, resolved, scope, ordinal, listen)
                messages = frozen_messages(messages) + (yield from runner.run(reply))  # what was sent stays frozen
                if steps == 1:
                    model_settings = _tool_choice_released(model_settings, record)
                continue
            value, again = _read_value(fn, reply.text, reasks, values["retries"])
            if again is None:
                break
            reasks += 1
            messages = frozen_messages(messages) + again
        _keep_output(record, turn, value)
        return records.Result(value, record)
    except BaseException as error:
        logged, closing = _failed(record, scope, error, values)
        raise
    finally:
        current.reset(token)
        if block is not None:
            pop_block(block)
        record.seconds = round(time.perf_counter() - started, 6)
        if logged:
            rest = _ended(record, resolved, client)
            if rest is not None:  # an async def call_end handler to await
                if closing:  # a stream dropped mid-call: its generator may not yield any more
                    drive(rest)
                else:
                    yield from rest
            folder = resolved.values.get("log_calls")
            if folder:
                records.append(folder, record)


def _begin(fn: "Program", args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[
        dict[str, Any], TurnScope | None, bool, Resolved, Frame | None, records.CallRecord]:
    """Bind and check the inputs, find the turn the call runs in and the settings it runs with, and
    open its record: ``(inputs, scope, own_turn, resolved, frame, record)``."""
    inputs = fn.bind(args, kwargs)
    scope = current_turn.get()
    own_turn = scope is not None and not scope.claimed and fn is scope.program
    if own_turn:  # the turn's own call: the conversation's settings beat the function's own
        scope.claimed = True  # type: ignore[union-attr]
        resolved = resolve(fn.own, scope.layer)  # type: ignore[union-attr]
    else:
        resolved = resolve(fn.own)
    values = resolved.values
    if values["check_inputs"] and not (own_turn and scope.inputs_checked):  # type: ignore[union-attr]
        fn.check_inputs(inputs)  # before anything is recorded or sent
    if values.get("log_calls"):  # once per folder: one that cannot be written refuses before paying
        check_log_calls(values["log_calls"])
    frame = current.get()
    path = f"{frame.path}/{fn.name}" if frame is not None else fn.name
    record = records.CallRecord(
        id=os.urandom(8).hex(), function=fn.name, module=fn.module, version=fn.version, inputs=inputs,
        started=now_text(), parent=frame.record.id if frame is not None else None, path=path,
    )
    return inputs, scope, own_turn, resolved, frame, record


def _join(scope: TurnScope | None, own_turn: bool, record: records.CallRecord) -> tuple[
        int, TurnScope | None, Any]:
    """The call's place in its turn: ``(ordinal, turn, block)`` — the turn when this is its own call,
    and the settings block its calls see."""
    if scope is None:
        return 0, None, None
    ordinal = scope.begin_call()
    if own_turn:
        return ordinal, scope, _join_turn(scope, record)
    if scope.conversation is not None:
        record.conversation = {"id": scope.conversation, "turn": scope.turn}  # a call inside a turn
    return ordinal, None, None


def _check_limits(fn: "Program", frame: Frame | None, path: str, depth: int, resolved: Resolved) -> None:
    """Refuse, before anything is sent, a call functai cannot count, one nested too deep, or one whose
    approve setting no plugin serves."""
    values = resolved.values
    if frame is None and limits.running:
        placeless = limits.placeless(path)
        if placeless is not None:
            raise placeless
    if depth > values["max_depth"]:
        raise FunctAIError(
            f"{path} is {depth} AI function calls deep, past max_depth={values['max_depth']}; raise max_depth, "
            "or check why the calls keep nesting (an AI function that calls itself as a tool?)",
            code="max-depth",
        )
    if resolved.plan.approval is None and values.get("approve") is not None:
        raise _approval_missing(fn)


def _before_call(fn: "Program", inputs: dict[str, Any], resolved: Resolved, record: records.CallRecord,
                 scope: TurnScope | None, lm: str | None, instruction: str, sections: tuple[str, ...],
                 tools: tuple[str, ...], settings_view: Any) -> Steps[tuple[Any, ...]]:
    """Fold ``before_call``: ``(lm, instruction, sections, tools, settings)`` as the handlers left them."""
    event = before_call_event(fn, inputs, instruction, sections, lm, settings_view, tools, record.path, scope)
    changes = record.changes
    made = len(changes)
    named = scope is not None  # outside a conversation no handler can read its plugin's name on the event
    handlers = resolved.plan.handlers["before_call"]
    paused = fold_part("before_call", iter(handlers), event, changes, apply_before_call, named)
    if paused is not None:
        yield from resume("before_call", paused, event, changes, apply_before_call, named)
    if len(changes) == made:  # every change applied is recorded: none recorded, nothing changed
        return lm, instruction, sections, tools, settings_view
    data = event.__dict__
    return data["lm"], data["instruction"], data["sections"], data["tools"], data["settings"]


def _asker(fn: "Program", record: records.CallRecord, resolved: Resolved, scope: TurnScope | None,
           budget: limits.Budget, client: Client, model: str, listen: bool) -> Asker | None:
    """What asks the model when a plugin acts on its requests or replies; None: the call sends them itself."""
    acting = resolved.plan.handlers
    if acting["request"] or acting["model_error"] or acting["reply"] or acting["chunk"]:
        return Asker(fn, record, record.path, resolved.values, resolved.plan, scope, budget, client, model, listen)
    return None


def _relay(fn: "Program", inputs: dict[str, Any], instruction: str,
           turn: TurnScope | None) -> Callable[[Sequence[Any], str | None, str | None], Sequence[Any]]:
    """How a call's messages, laid out for one model, are laid out for another it is switched to: the
    first messages of the other's layout, then the tool steps and re-asks after them, as they were."""
    history = turn.history if turn is not None else ()

    def relay(messages: Sequence[Any], was: str | None, now: str | None) -> Sequence[Any]:
        if isinstance(was, layouts.Baked) == isinstance(now, layouts.Baked):
            return messages  # one layout for both
        before = layouts.messages(fn.layout, was, instruction, inputs, history)
        return [*layouts.messages(fn.layout, now, instruction, inputs, history), *messages[len(before):]]

    return relay


def _too_many_steps(fn: "Program", max_steps: int) -> FunctAIError:
    return FunctAIError(f"{fn.name} asked for tools more than max_steps={max_steps} times; raise max_steps or "
                        "check why the model keeps asking", code="max-steps")


def _tool_runner(fn: "Program", tools: tuple[str, ...], record: records.CallRecord, resolved: Resolved,
                 scope: TurnScope | None, ordinal: int, listen: bool) -> ToolRunner:
    """The runner of the call's tool calls, made at its first."""
    from .toolrun import ToolRunner  # loaded with the first call that has tools

    return ToolRunner(fn, tools, record, record.path, resolved.values, resolved.plan, scope, ordinal, listen)


def _read_value(fn: "Program", text: str | None, reasks: int,
                retries: int) -> tuple[Any, list[dict[str, Any]] | None]:
    """The reply read as the function's output: ``(value, None)``, or ``(None, messages)`` that ask
    again; past ``retries`` re-asks, ``output-invalid``."""
    try:
        return read_output(text if text is not None else "", fn.output_type), None
    except OutputError as error:
        if reasks >= retries:
            raise OutputError(
                f"{fn.name}: the model's reply could not be read as {describe(fn.output_type)} "
                f"after {reasks + 1} attempts: {error.message}",
                reply=text if text is not None else "",
            ) from None
        return None, _reask(text, error.message, fn)


def _keep_output(record: records.CallRecord, turn: TurnScope | None, value: Any) -> None:
    record.output = value
    if turn is not None and record.conversation is not None and not isinstance(value, _PLAIN) \
            and isinstance(to_jsonable(value), dict):
        record.conversation["fields"] = True  # the turn's outputs are the record's fields (replay.py)


def _failed(record: records.CallRecord, scope: TurnScope | None, error: BaseException,
            values: Mapping[str, Any]) -> tuple[bool, bool]:
    """Record why the call ended without a value: ``(logged, closing)`` — whether its record is written
    now (not while its turn waits or stays interrupted), and whether a dropped stream is closing it."""
    if isinstance(error, FunctAIError):
        if error.record is None:
            error.record = record
        if scope is not None and scope.waits and (isinstance(error, Waiting) or error.code == "reconcile-failed"):
            return False, False  # the turn waits or stays interrupted: its call's record is written when it ends
        record.error = {"code": error.code, "message": error.message}
    elif isinstance(error, Exception):
        # A client's own exception may quote the key it was given.
        record.error = {"code": "exception", "message": without_secrets(f"{type(error).__name__}: {error}", values)}
    else:  # KeyboardInterrupt, cancellation: passes through, but is no success
        record.error = {"code": "interrupted", "message": type(error).__name__}
        return True, isinstance(error, GeneratorExit)
    return True, False


def _ended(record: records.CallRecord, resolved: Resolved, client: Client | None) -> Steps[None] | None:
    """The record as it is written (without content where the settings say so), heard by ``call_end``;
    the steps left when a handler is ``async def``."""
    if not resolved.values["log_content"]:
        records.without_content(record)
    if resolved.plan.handlers["call_end"]:
        return _call_end(record, resolved, client)
    return None


def before_call_event(
    fn: "Program", inputs: dict[str, Any], instruction: str, sections: tuple[str, ...], lm: str | None,
    settings: Any, tools: tuple[str, ...], path: str, scope: TurnScope | None,
) -> CallEvent:
    """The ``before_call`` event of a call (a what-if replay builds its own with this too)."""
    event = CallEvent(function=fn.name, program=fn, inputs=inputs, instruction=instruction, sections=sections,
                      lm=lm, settings=settings, tools=tools, all_tools=fn.tool_names, path=path)
    if scope is not None:
        event.__dict__.update(conversation=scope.conversation, turn=scope.turn, _memory=scope.memory)
    return event


def _join_turn(scope: TurnScope, record: records.CallRecord) -> Any:
    """Make `record` the turn's own call record; the layer block the calls inside the turn see."""
    # One record per turn, however often it waits: a resumed turn keeps its id and start.
    record.id = scope.call_id or record.id
    if scope.call_started:
        record.started = scope.call_started
    else:
        scope.call_started = record.started
    if scope.conversation is not None:
        record.conversation = {"id": scope.conversation, "turn": scope.turn, "parent": scope.parent,
                               "store": scope.store}
        shown = scope.shown
        if shown is not None:  # small ({"last": n}): each shown turn's own call record holds its content
            record.conversation["shown"] = dict(shown) if isinstance(shown, dict) else list(shown)
            if scope.without:
                record.conversation["without"] = dict(scope.without)
        if scope.waited:
            record.conversation["waited"] = list(scope.waited)
    record.changes.extend(scope.changes)  # type: ignore[arg-type]  # the scope's entries are plain dicts
    record.sections = list(scope.sections)
    return push_block(scope.layer)  # calls inside the turn see the conversation as a block


def _call_end(record: records.CallRecord, resolved: Resolved, client: Client | None) -> Steps[None] | None:
    """Run call_end after the content is dropped, so handlers see the record as it is written;
    the steps left to run when a handler is ``async def``."""
    event = CallEndEvent(record=RecordView(record), function=record.function, path=record.path,
                         error=record.error["code"] if record.error else None, seconds=record.seconds,
                         usage=MappingProxyType(dict(record.usage)), server=server_of(client))
    return hear_now("call_end", resolved.plan.handlers["call_end"], event,
                    record.heard if resolved.values.get("record_timing") else None,
                    function=record.function, call=record.id)


def apply_before_call(plugin: Plugin, change: Change, event: CallEvent) -> None:
    for field, value in change.__dict__.items():  # only the fields the change sets
        if field == "sections":
            set_field(event, "sections", event.sections + value)
        elif field == "instruction" or field == "lm":
            set_field(event, field, value)
        elif field == "settings":
            set_field(event, "settings", MappingProxyType({**event.settings, **value}))
        elif field == "tools":
            for name in value:
                if name not in event.all_tools:
                    have = ", ".join(event.all_tools) or "none"
                    raise refuse(
                        plugin, "before_call", "tools", f"{name!r} is not one of {event.function}'s tools ({have})"
                    )
            set_field(event, "tools", value)


def _refuse_dropped_instruction(record: records.CallRecord, why: str) -> FunctAIError:
    changers = [
        c for c in record.changes if c["hook"] in ("before_call", "context")
        and ("instruction" in c["change"] or "sections" in c["change"])
    ]
    first: dict[str, Any] = changers[0] if changers else {"plugin": None, "version": "", "hook": "before_call"}
    names = ", ".join(sorted({repr(c["plugin"]) for c in changers})) or "a plugin"
    plugin = Plugin(first["plugin"], version=first["version"] or "0.0.0") if first["plugin"] else None
    message = (
        f"{why}, so the instruction changed by {names} would not reach the model while the record says it "
        "was sent; write {instruction} in the layout, or keep these plugins off this function"
    )
    if plugin is None:
        return FunctAIError(message, code="plugin-change")
    field = "instruction" if "instruction" in first.get("change", {}) else "sections"
    return refuse(plugin, first["hook"], field, message)


def _tool_choice_released(model_settings: dict[str, Any], record: records.CallRecord) -> dict[str, Any]:
    """After the first tool step a forced ``tool_choice`` is sent as ``auto`` (else a server calls
    tools until ``max_steps``); the record says so in ``tool_choice_after_tools``."""
    choice = model_settings.get("tool_choice")
    if choice is None or choice in ("auto", "none"):
        return model_settings
    record.settings = {**record.settings, "tool_choice_after_tools": "auto"}
    return {**model_settings, "tool_choice": "auto"}


def _reask(reply: str | None, reason: str, fn: "Program") -> list[dict[str, Any]]:
    want = "only the JSON value" if fn.output_schema is not None else "the answer"
    again = f"Your reply could not be read as {describe(fn.output_type)}: {reason}. Reply again with {want}."
    return [{"role": "assistant", "content": reply or ""}, {"role": "user", "content": again}]


def _approval_missing(fn: "Program") -> FunctAIError:
    from .._hooks.shipped import install_command

    return FunctAIError(
        f"approve is set for {fn.name}, but no plugin that serves it (one declaring serves=['approve']) is "
        f"installed or set, and approval never turns off silently: {install_command('functai-approval')}, or "
        "install another approval plugin, or remove the approve setting",
        code="approval-missing",
    )


def prepared(
    fn: "Program", inputs: dict[str, Any], resolved: Resolved, record: records.CallRecord,
    turn: TurnScope | None, lm: str | None, instruction: str, sections: tuple[str, ...], settings_view: Any,
) -> tuple[Client, str, Any, dict[str, Any]]:
    """The client, model, first messages and model settings, noted in `record` (refusing a layout
    that would drop an instruction a plugin changed)."""
    model_settings = dict(resolved.model_settings if settings_view is resolved.settings_view else settings_view)
    final = layouts.full_instruction(instruction, sections) if sections else instruction
    if final != fn.instruction:
        why = layouts.drops_instruction(fn.layout, lm)
        if why is not None:
            raise _refuse_dropped_instruction(record, why)
    record.instruction = final
    record.settings = model_settings
    client, model = choose_client(resolved.values, lm, fn)
    record.model = str(lm) if lm else model
    history = turn.history if turn is not None else ()
    messages = layouts.messages(fn.layout, lm, final, inputs, history)
    return client, model, messages, model_settings
