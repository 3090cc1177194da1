"""Running the tools a model asks for.

`ToolRunner` runs a reply's tool calls in order through ``tool_call`` (then the questions its
handlers asked, about the call as it will run), the tool itself (``tool_error`` when it raises),
and ``tool_result``, and records each in the call's record; in a turn, it never runs a tool that
changes things twice (a started one is settled by its ``reconcile``, or left unknown).
"""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any, Mapping, Sequence, cast

from .._errors import RISING, FunctAIError, Waiting
from .._log import info
from .._hooks.change import Change
from .._hooks.events import ToolCallEvent, ToolErrorEvent, ToolResultEvent, given, set_field, thawed
from .._hooks.fold import deprecated, first_act, fold_part, record as record_change, refuse, resume
from .._hooks.order import Plan
from .._hooks.plugin import Plugin
from .._models.keys import without_secrets
from .._models.request import Reply
from .._models.toolcall import ToolCall
from .approvals import AskedAtStream
from .program import Program
from .layout import render_value
from .records import CallRecord
from .scope import TurnScope
from .steps import Ask, Invoke, Note, Pause, Steps, in_thread, run_awaitable
from .toolasks import Asking, _put_question, _refused
from .toolkey import call_key, running

from .tools import ProgramTool, Reconcile, as_tool

#: Settings never shown to plugins in tool events.
SECRET_SETTINGS = frozenset({"api_key", "client", "headers"})


INTERRUPTED = "The tool was started but its result is unknown; it may or may not have taken effect."


class ToolRunner(Asking):
    """Runs the tool calls of one AI function call."""

    def __init__(self, fn: "Program", offered: Sequence[str], record: CallRecord, path: str,
                 settings: Mapping[str, Any], plan: Plan, scope: TurnScope | None, ordinal: int, listen: bool) -> None:
        self.fn = fn
        self.listen = listen
        #: Answers given at the stream, by approval key: ``{"allow", "reason", "digest", "inputs", "approval"}``.
        self.answers: dict[str, dict[str, Any]] = {}
        self.scope = scope
        self.ordinal = ordinal
        self.record = record
        self.path = path
        # Plugins are trusted, but a key has no business in a tool event.
        self.settings = MappingProxyType({k: v for k, v in settings.items() if k not in SECRET_SETTINGS})
        #: The keys a tool's own exception may quote (an AI function's client, given the call's key): cut out.
        self.secrets = {k: settings[k] for k in ("api_key", "headers") if k in settings}
        self.plan = plan
        self.invocations = 0
        #: Tool calls whose inputs did not fit, in this call.
        self.unfit = 0
        by_name = dict(zip(fn.tool_names, fn.tools))
        self.tools = {name: as_tool(by_name[name]) for name in offered}

    def run(self, reply: Reply) -> Steps[list[dict[str, Any]]]:
        """Run a reply's tool calls in order; the messages that report them."""
        asked = [{"id": c.id, "name": c.name, "input": dict(c.input)} for c in reply.tool_calls]
        messages: list[dict[str, Any]] = [{"role": "assistant", "content": reply.text, "tool_calls": asked}]
        for call in reply.tool_calls:
            self.invocations += 1
            content = yield from self._one(call, self.invocations)
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content})
        return messages

    def _one(self, call: ToolCall, invocation: int) -> Steps[str]:
        """Run one tool call through ``tool_call`` and ``tool_result``; what the model is shown."""
        entry: dict[str, Any] = {"name": call.name, "id": call.id, "input": dict(call.input)}
        self.record.tool_calls.append(entry)
        first_change = len(self.record.changes)
        scope = self.scope
        site = f"{self.ordinal}.{invocation}"  # where in the turn: the asking call, then the invocation
        key = call_key(scope.turn if scope is not None and scope.turn else self.record.id, site)
        found = self.tools.get(call.name)
        recorded = scope.recorded_tool(site) if scope is not None else None
        if recorded is not None and not _same_call(recorded, call):
            raise FunctAIError(
                f"{self.path}: the turn's record holds another tool call at this place ({site}) than the model asks "
                f"for now ({call.name!r}): its replies were not read back as recorded (a damaged or removed "
                "reply); the tool is not run again, nor its result given to another call; send the turn again",
                code="resume-mismatch")
        if recorded is not None and scope is not None and _stands(recorded, found):
            reconcile = getattr(found, "reconcile", None)
            if recorded["state"] == "done" or (reconcile is None and call.name not in scope.rerun):
                return self._reuse(entry, site, recorded)
            if reconcile is not None:  # asked first, even when a resume names it in rerun
                settled = yield from self._reconcile(reconcile, call.name, entry, site, recorded, key, invocation)
                if settled is not None:
                    return settled
            # It had no effect, or a resume named it in rerun: it runs as if for the first time (recorded
            # answers still apply), with the same key.
        if found is None:
            have = ", ".join(self.tools) or "none"
            entry["error"] = "no such tool"
            entry["output"] = f"There is no tool named {call.name!r}. Tools you can use: {have}."
            return self._done(entry, site, first_change)
        problems = found.inputs.problems(call.input)
        if problems:  # the model's own arguments: it is told why, and may ask again (max_tool_retries times)
            return self._unfit(call.name, entry, site, first_change, problems)
        edit = self._recorded_edit(site) if scope is not None and scope.waits else None
        unfit = found.inputs.problems({**call.input, **edit["inputs"]}) if edit is not None else None
        if unfit:
            return self._unfit_edit(unfit, entry, site, first_change)
        event, stopped = yield from self._handled(call, found, entry, site, key, invocation, edit, first_change)
        if stopped is None and scope is not None:
            refused = scope.refusal(site)
            if refused is not None:  # a person said no before this process resumed the turn
                stopped = _refused(entry, *refused)
        entry["input"] = copy.deepcopy(dict(given(event, "input")))  # the record's own: a tool may change its input
        if stopped is not None:
            entry["output"] = stopped
            return self._done(entry, site, first_change)
        typed = found.inputs.read(given(event, "input"))  # checked: the model's, a person's, each handler's change
        if self.listen:
            yield Note("tool_call", name=call.name, input=copy.deepcopy(entry["input"]), path=event.path)
        if scope is not None and found.effects != "reads":
            scope.tool_started(site, entry, self.record.changes[first_change:])
        value = yield from self._invoked(found, event, entry, site, key, typed)
        text = yield from self._tool_result_hook(call.name, entry["input"], _shown(value, entry), event.path,
                                                 invocation, key)
        entry["output"] = text
        if self.listen:
            yield Note("tool_result", name=call.name, output=text, path=event.path)
        return self._done(entry, site, first_change)

    def _unfit_edit(self, problems: list[str], entry: dict[str, Any], site: str, first_change: int) -> str:
        """An edit checked only by the schema its question kept (answered without the function) whose
        inputs the tool's types refuse: the tool is not run with them, nor at all."""
        why = "; ".join(problems)
        entry["error"] = f"input-invalid: {why}"
        entry["output"] = f"The tool was not run: the inputs a person gave on approving it do not fit it ({why})."
        return self._done(entry, site, first_change)

    def _handled(self, call: ToolCall, found: Any, entry: dict[str, Any], site: str, key: str, invocation: int,
                 edit: dict[str, Any] | None, first_change: int) -> Steps[tuple[ToolCallEvent, str | None]]:
        """Fold ``tool_call`` (again with a person's answer at the stream): the event as the handlers
        left it, and the text the model is shown if the tool may not run."""
        scope = self.scope
        while True:
            if edit is not None:  # a person approved with changed inputs: every handler sees them
                self.record.changes.append(self._edit_change(edit))
            event = ToolCallEvent(
                name=call.name, input=MappingProxyType({**call.input, **edit["inputs"]} if edit else dict(call.input)),
                effects=found.effects, path=f"{self.path}/{call.name}", invocation=invocation, id=call.id,
                function=self.fn.name, settings=self.settings, key=key, ask_person=_put_question,
            )
            if scope is not None:
                set_field(event, "_memory", scope.memory)
            try:
                stopped = yield from self._tool_call_hook(event, entry, site)
                return event, stopped
            except AskedAtStream as asking:  # a person at the stream may answer: the hook runs again with it
                del self.record.changes[first_change:]
                answer = yield Ask(asking.approval, found.inputs)
                if answer is None:
                    self.listen = False  # nobody answered: what a call without a stream does
                else:
                    edit = self._answered_at_stream(asking.approval, edit, *answer)

    def _invoked(self, found: Any, event: ToolCallEvent, entry: dict[str, Any], site: str, key: str,
                 typed: dict[str, Any]) -> Steps[Any]:
        """Run the tool (again, while a ``tool_error`` handler asks and may): its result, or the text
        the model is shown of its failure."""
        scope = self.scope
        attempt = 0
        failure: Exception
        while True:
            attempt += 1
            try:
                value = yield Invoke(_Keyed(found, key), typed)
                entry.pop("error", None)
                return value
            except Waiting:
                if scope is not None:  # a call inside the tool waits: on resume the tool runs again
                    scope.tool_suspended(site, entry)
                raise
            except FunctAIError as error:
                entry["error"] = f"{error.code}: {error.message}"
                if error.code in RISING:
                    raise
                value, failure = f"The tool failed: {error.message}", error
            except RecursionError:
                raise  # runaway nesting, not the tool's answer
            except Exception as error:
                entry["error"] = without_secrets(f"{type(error).__name__}: {error}", self.secrets)
                value, failure = f"The tool failed: {entry['error']}", error
            if not self.plan.handlers["tool_error"]:
                return value
            change = yield from self._tool_error_hook(found, event, entry, failure, attempt)
            if change is None or change.retry is None or change.retry is False:
                return change.output if change is not None else value
            seconds = 0.0 if change.retry is True else float(change.retry)
            info("tool retried", tool=event.name, call=self.record.id, attempt=attempt + 1,
                 after=f"{seconds:.2f}s", reason=value.removeprefix("The tool failed: "), note=change.note or "")
            if seconds > 0:
                yield Pause(seconds)
            entry["attempts"] = attempt + 1

    def _tool_result_hook(self, name: str, input: Mapping[str, Any], text: str, path: str, invocation: int,
                          key: str) -> Steps[str]:
        """Fold ``tool_result``: the tool's result as the model is shown it."""
        handlers = self.plan.handlers["tool_result"]
        if not handlers:
            return text
        result = ToolResultEvent(name=name, input=input, output=text, path=path, invocation=invocation,
                                 function=self.fn.name, key=key)
        if self.scope is not None:
            set_field(result, "_memory", self.scope.memory)
        paused = fold_part("tool_result", iter(handlers), result, self.record.changes, _apply_output, True)
        yield from resume("tool_result", paused, result, self.record.changes, _apply_output, True)
        return result.output

    def _reconcile(self, reconcile: Reconcile, name: str, entry: dict[str, Any], site: str,
                   recorded: Mapping[str, Any], key: str, invocation: int) -> Steps[str | None]:
        """A tool call recorded started with no result: what the tool's ``reconcile`` says it did
        (recorded as its result, ``reconciled``), or None when it had no effect (it runs again)."""
        input = dict(recorded["entry"].get("input") or {})
        path = f"{self.path}/{name}"
        try:
            value = yield Invoke(_Keyed(_Reconciling(reconcile, key), key), input)
        except Exception as error:
            raise _reconcile_failed(path, key, f"raised {type(error).__name__}: {error}") from error
        if value is None:
            return None
        try:
            shown = render_value(value)
        except Exception as error:  # a result that cannot be shown is no answer either
            raise _reconcile_failed(path, key, f"returned a value that cannot be shown ({type(value).__name__}; "
                                               f"{type(error).__name__}: {error})") from error
        first_change = self._restore(entry, recorded)
        entry["reconciled"] = True
        entry["output"] = yield from self._tool_result_hook(name, MappingProxyType(input), shown, path, invocation,
                                                            key)
        return self._done(entry, site, first_change)

    def _done(self, entry: dict[str, Any], site: str, first_change: int) -> str:
        """Keep a finished tool call in the turn, so that a resumed turn never runs it twice."""
        if self.scope is not None:
            self.scope.tool_done(site, entry, self.record.changes[first_change:])
        return cast(str, entry["output"])

    def _reuse(self, entry: dict[str, Any], site: str, recorded: Mapping[str, Any]) -> str:
        """A tool call that ran (or started) before this turn was resumed: never run it twice."""
        if recorded.get("state") == "done":
            self._restore(entry, recorded)
            if self.scope is not None:
                self.scope.skip_past(recorded)
            return cast(str, entry["output"])
        first_change = self._restore(entry, recorded)
        entry["error"] = "interrupted"
        entry["output"] = INTERRUPTED
        return self._done(entry, site, first_change)

    def _restore(self, entry: dict[str, Any], recorded: Mapping[str, Any]) -> int:
        """Put a recorded tool call back: its entry (the input it ran with) and the changes recorded
        with it; where those changes start in the call's record."""
        first_change = len(self.record.changes)
        entry.clear()
        entry.update(recorded["entry"])
        self.record.changes.extend(recorded.get("changes", ()))
        return first_change

    def _apply_inputs(self, plugin: Plugin, change: Change, event: ToolCallEvent) -> None:
        """A handler's change of the inputs, which must fit the tool as the model's must."""
        if change.inputs is None:
            return
        changed = {**given(event, "input"), **thawed(change.inputs)}
        problems = self.tools[event.name].inputs.problems(changed)
        if problems:
            raise refuse(plugin, "tool_call", "inputs", f"the inputs do not fit the tool {event.name!r}: "
                         + "; ".join(problems))
        set_field(event, "input", MappingProxyType(changed))

    def _unfit(self, name: str, entry: dict[str, Any], site: str, first_change: int, problems: list[str]) -> str:
        """The model's arguments do not fit the tool: it is not run, and the model is told why, to
        ask again; past ``max_tool_retries`` such calls the call fails ``tool-input-invalid``."""
        self.unfit += 1
        why = "; ".join(problems)
        if self.unfit > self.settings["max_tool_retries"]:
            raise FunctAIError(
                f"{self.path}: the model asked for the tool {name!r} with inputs that do not fit it "
                f"{self.unfit} times ({why}); raise max_tool_retries, or describe the inputs better in the "
                "tool's docstring and annotations", code="tool-input-invalid")
        entry["error"] = f"input-invalid: {why}"
        entry["output"] = f"The tool was not run: its inputs do not fit ({why}). Call it again with inputs that do."
        return self._done(entry, site, first_change)

    def _tool_error_hook(self, found: Any, event: ToolCallEvent, entry: dict[str, Any], error: Exception,
                         attempt: int) -> Steps[Change | None]:
        """Fold ``tool_error``: the first handler's change (the text shown instead, or a retry that
        may be done), recorded; None when none changes anything."""
        failure = ToolErrorEvent(name=event.name, input=given(event, "input"), error=entry["error"], exception=error,
                                 effects=found.effects, invocation=event.invocation, attempt=attempt, id=event.id,
                                 path=event.path, function=self.fn.name, key=event.key)
        acted = yield from first_act("tool_error", self.plan.handlers["tool_error"], failure)
        if acted is None:
            return None
        plugin, handler, change = acted
        if change.retry is not None:
            if change.retry is True:
                deprecated(handler, f"plugin {plugin.name!r}: Change(retry=True) in tool_error is Change(retry=0) now "
                                     "(retry is the seconds to wait before running it again, as in model_error); True "
                                     "still runs it again at once")
            if found.effects != "reads" and not found.idempotent:
                raise refuse(
                    plugin, "tool_error", "retry",
                    f"the tool {event.name!r} declares effects={found.effects!r} and may have taken effect before "
                    "it raised, so running it again could do it twice; retry only tools that read, or declare "
                    "this one @tool(idempotent=True) if running it twice is safe",
                )
            if attempt > self.settings["max_tool_retries"]:
                return None  # retried as often as allowed: the error stands
        self.record.changes.append(
            record_change(plugin, "tool_error", {**change.to_data(), "error": type(error).__name__}, handler,
                          failure, change.note))
        return change



def _apply_output(plugin: Plugin, change: Change, event: ToolResultEvent) -> None:
    set_field(event, "output", change.output)


def _reconcile_failed(path: str, key: str, what: str) -> FunctAIError:
    """A reconcile that gave no usable answer: nothing is guessed, and the turn stays interrupted."""
    return FunctAIError(
        f"the tool call {path} (key {key!r}) started before the process running its turn stopped, and its "
        f"reconcile function {what}; nothing is guessed: the turn stays interrupted, and resuming it asks "
        "reconcile again (once what it reads is back or it is fixed), or abandon it after looking the key up "
        "where the tool acts",
        code="reconcile-failed",
        why=f"reconcile-failed: reconcile of {key} {what[:160]}",
    )


def _same_call(recorded: Mapping[str, Any], call: ToolCall) -> bool:
    """Whether a tool call recorded at a place in the turn is the one asked there now (its name, and
    the id of the model's ask, which a resumed turn reads back with its reply)."""
    entry = recorded.get("entry") or {}
    return entry.get("name") == call.name and entry.get("id") in (None, call.id)


def _stands(recorded: Mapping[str, Any], found: Any) -> bool:
    """Whether a tool call recorded before the turn was resumed is not run as new: one that finished,
    or a tool that started. An AI function left started runs again, as one whose nested call waited
    does: its replies are reused and each of its own tools is settled by its own record."""
    state = recorded.get("state")
    return state == "done" or (state == "started" and not isinstance(found, ProgramTool))


class _Keyed:
    """A tool (or its reconcile) run with its key set, for `functai.tool_key` inside it (a worker
    thread or task the run starts copies the context, and the key with it)."""

    __slots__ = ("tool", "key")

    def __init__(self, tool: Any, key: str) -> None:
        self.tool = tool
        self.key = key

    def invoke(self, input: Mapping[str, Any]) -> Any:
        token = running.set(self.key)
        try:
            value = self.tool.invoke(input)
            if value is not None and hasattr(value, "__await__"):  # awaited while the key is set
                value = run_awaitable(value)
            return value
        finally:
            running.reset(token)

    async def ainvoke(self, input: Mapping[str, Any]) -> Any:
        token = running.set(self.key)
        try:
            return await self.tool.ainvoke(input)
        finally:
            running.reset(token)


class _Reconciling:
    """A tool's ``reconcile(key, input)``, run as a tool is (in a worker thread in an async call)."""

    __slots__ = ("fn", "key")

    def __init__(self, fn: Reconcile, key: str) -> None:
        self.fn = fn
        self.key = key

    def invoke(self, input: dict[str, Any]) -> Any:
        return self.fn(self.key, input)

    async def ainvoke(self, input: dict[str, Any]) -> Any:
        value = await in_thread(self.invoke, input)
        if value is not None and hasattr(value, "__await__"):
            value = await value
        return value


def _shown(value: Any, entry: dict[str, Any]) -> str:
    """A tool's result as the model reads it; one that cannot be written (its repr raises) is said so
    (it ran), and recorded ``result-unshowable``. Too deep for JSON is the call's ``json-too-deep``."""
    try:
        return render_value(value)
    except FunctAIError:
        raise
    except Exception as error:
        entry["error"] = f"result-unshowable: {type(value).__name__} ({type(error).__name__}: {error})"
        return f"The tool ran, but its result cannot be shown ({type(value).__name__} has no text form)."
