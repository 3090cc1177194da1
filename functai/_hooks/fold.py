"""Running a changing hook: call each handler in order and fold its change in.

A handler's change is checked and applied to the event before the next
handler runs, so every handler sees the event as the ones before it left it.
Each applied change is appended to the call's ``changes`` once, as
``{"plugin", "version", "hook", "change"}`` (and ``µs`` with ``record_timing``).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterator, Sequence, Tuple

from .._calls.steps import Await, Steps, drive
from .._errors import RISING, FunctAIError, PluginError, Waiting
from .._models.request import Reply
from .change import ANSWERING, HOOK_FIELDS, OLD_FIELDS, Change
from .events import Event
from .order import Handler
from .plugin import Plugin
from .timing import Timed

#: Checks and applies one change to the event; raises `refuse(...)` when it does not fit.
Apply = Callable[[Plugin, Change, Any], None]

#: What had already happened when a hook's change was refused (the call stops there).
_SO_FAR = {
    "turn_start": "Nothing was sent to the model for this turn",
    "context": "Nothing was sent to the model for this turn",
    "before_call": "Nothing was sent to the model for this call",
    "request": "This request was not sent to the model (earlier requests of the call, if any, were)",
    "model_error": "The model had failed for this request, and the call stopped",
    "chunk": "The model was answering; the text held back was not shown, and the call stopped",
    "reply": "The model had answered; its reply was not read, and the call stopped",
    "tool_error": "The tool had run and raised; its error was not sent back, and the call stopped",
    "tool_call": "The model had been asked and had asked for this tool; the tool did not run, and the call stopped",
    "tool_result": "The model had been asked and the tool had run; its result was not sent back, and the call stopped",
    "turn_end": "The turn had already ended",
}


def refuse(plugin: Plugin, hook: str, field: str | None, message: str) -> PluginError:
    """A ``plugin-change`` error naming the plugin, the hook and the field, saying what had happened."""
    what = f" (field {field!r})" if field else ""
    so_far = _SO_FAR.get(hook, "The call stopped")
    return PluginError(
        f"plugin {plugin.name!r} {plugin.version} in {hook}{what}: {message}. {so_far}; fix what the handler returns.",
        code="plugin-change",
        plugin=plugin.name,
        hook=hook,
        field=field,
    )


def handler_error(plugin: Plugin, hook: str, error: Exception) -> Exception:
    """What to raise for an exception from a handler: a bad Change made inside it is named after its
    plugin and hook, other functai errors pass through, anything else is ``plugin-failed``."""
    if isinstance(error, PluginError) and error.code == "plugin-change" and error.plugin is None:
        wrapped = refuse(plugin, hook, error.field, error.message)
    elif isinstance(error, FunctAIError):
        return error
    else:
        wrapped = PluginError(
            f"plugin {plugin.name!r} {plugin.version} raised in {hook}: {type(error).__name__}: {error}. "
            "The call was stopped, since the change it meant to make did not happen; "
            "fix the plugin or remove it from the plugins setting.",
            code="plugin-failed",
            plugin=plugin.name,
            hook=hook,
        )
    wrapped.__cause__ = error
    return wrapped


def call_handler_steps(plugin: Plugin, hook: str, handler: Callable[[Any], Any], event: Event) -> Steps[Any]:
    """Run one handler (an ``async def`` one awaited by the driver); what it raises becomes the right error."""
    data = event.__dict__
    data["_plugin"] = plugin.name
    try:
        result = handler(event)
        if result is not None and hasattr(result, "__await__"):
            result = yield Await(result)
        return result
    except Exception as error:
        raise handler_error(plugin, hook, error)
    finally:
        data["_plugin"] = None


def record(
    plugin: Plugin, hook: str, data: dict[str, Any], handler: Callable[[Any], Any] | None = None, event: Any = None,
    note: str | None = None,
) -> dict[str, Any]:
    """A change's entry in the call record, with its ``note`` when given; with ``record_timing``
    (a `Timed` handler) its ``µs`` too."""
    entry = {"plugin": plugin.name, "version": plugin.version, "hook": hook, "change": data}
    if note is not None:
        entry["note"] = note
    if handler.__class__ is Timed:
        entry["µs"] = event._us
    return entry


def deprecated(handler: Any, message: str) -> None:
    """A `DeprecationWarning` attributed to the handler that wrote the old spelling (where Python's
    filters look: shown for a handler in ``__main__`` and under test runners, as for any deprecation)."""
    code = getattr(handler, "__code__", None)
    where = getattr(handler, "__globals__", None)
    if code is None or where is None:
        warnings.warn(message, DeprecationWarning, stacklevel=3)
        return
    warnings.warn_explicit(message, DeprecationWarning, code.co_filename, code.co_firstlineno,
                           module=where.get("__name__", "?"), registry=where.setdefault("__warningregistry__", {}),
                           module_globals=where)


def check_change(plugin: Plugin, hook: str, result: object, handler: Any = None) -> Change | None:
    """The handler's result as a Change that sets something, or None. An answer (a `functai.Reply`)
    is carried on as ``Change(reply=...)``, the engine's form of it."""
    if result is None:
        return None
    if not isinstance(result, Change):
        if isinstance(result, Reply) and hook in ANSWERING:
            if result.note is None:
                return Change(reply=result)
            try:
                return Change(reply=result, note=result.note)
            except PluginError as error:
                said = error.message.replace("Change(note=...)", "Reply(note=...)")  # what the handler wrote
                raise refuse(plugin, hook, "note", said) from None
        also = " (or a functai.Reply)" if hook in ANSWERING else ""
        raise refuse(plugin, hook, None,
                     f"a handler must return functai.Change{also} or None, not {type(result).__name__}")
    fields = result.fields_set()
    if not fields:
        return None
    allowed = HOOK_FIELDS[hook]
    for field in fields:
        if field not in allowed:
            hooks, instead = OLD_FIELDS.get(field, ((), ""))
            if hook in hooks:
                deprecated(handler, f"plugin {plugin.name!r} in {hook}: {instead} (the old form is deprecated)")
                continue
            takes = ", ".join(sorted(allowed)) or "no fields"
            also = "; it answers with a functai.Reply" if hook in ANSWERING else ""
            raise refuse(plugin, hook, field, f"{hook} does not take {field!r}; it takes {takes}{also}")
    return result


#: What a handler's error is besides a refusal: its own change or failure, or a code that rises.
_NOT_REFUSALS = frozenset({"plugin-change", "plugin-failed"}) | RISING


def refusal(error: Exception) -> FunctAIError | None:
    """A handler's refusal: the `FunctAIError` it raised itself, or None for anything else (a bad
    Change made inside it, a failure, a turn that waits, a code that ends the outermost call pass
    on as they are)."""
    if not isinstance(error, FunctAIError) or isinstance(error, Waiting) or error.code in _NOT_REFUSALS:
        return None
    return error



def first_act(hook: str, handlers: Sequence[Handler], event: Event) -> Steps[tuple[Plugin, Any, Change] | None]:
    """Run the handlers of a hook that recovers (``model_error``, ``tool_error``) until one acts: its
    plugin, handler and change, which sets one thing; None when none acts."""
    for plugin, handler in handlers:
        result = yield from call_handler_steps(plugin, hook, handler, event)
        change = check_change(plugin, hook, result, handler)
        if change is None:
            continue
        acts = change.fields_set()
        if len(acts) > 1:
            takes = " or ".join(sorted(HOOK_FIELDS[hook]))
            raise refuse(plugin, hook, acts[1], f"a change sets {takes}, one of them, not {' and '.join(acts)}")
        return plugin, handler, change
    return None


def folded(
    plugin: Plugin, hook: str, handler: Any, result: object, event: Event, apply: Apply
) -> dict[str, Any] | None:
    """Check and apply one handler's result: its entry in ``changes``, or None when it changes nothing."""
    change = check_change(plugin, hook, result, handler)
    if change is None:
        return None
    apply(plugin, change, event)
    return record(plugin, hook, change.to_data(), handler, event, change.note)


def fold(hook: str, handlers: Sequence[Handler], event: Event, changes: list[dict[str, Any]], apply: Apply) -> None:
    """Run ``handlers`` of a changing hook outside the pipeline (an ``async def`` one on a private loop)."""
    paused = fold_part(hook, iter(handlers), event, changes, apply, True)
    if paused is not None:
        drive(resume(hook, paused, event, changes, apply, True))


#: Where `fold_part` stopped: the handler's plugin, the handler, its awaitable, the handlers after it.
Paused = Tuple[Plugin, Callable[[Any], Any], Any, Iterator[Handler]]


def fold_part(
    hook: str, handlers: Iterator[Handler], event: Event, changes: list[dict[str, Any]], apply: Apply, named: bool
) -> Paused | None:
    """Run handlers and fold their changes in until one returns an awaitable: then return where it
    stopped (`Paused`) for `resume`; None when done.

    ``named``: write the running handler's plugin to the event's ``_plugin``, which only
    ``entries``/``remember`` (a conversation's memory) and a tool call's approval read.
    """
    data = event.__dict__
    sections_inline = hook == "before_call"
    for plugin, handler in handlers:
        if named:
            data["_plugin"] = plugin.name
        try:
            result = handler(event)
        except Exception as error:
            raise handler_error(plugin, hook, error)
        if result is None:
            continue
        given = result.__dict__ if result.__class__ is Change else None
        if sections_inline and given is not None and len(given) == 1 and "sections" in given:
            # The usual change, on every call: applied and recorded inline (`folded` without its calls).
            added = given["sections"]
            data["sections"] = data["sections"] + added
            entry: dict[str, Any] = {"plugin": plugin.name, "version": plugin.version, "hook": hook,
                                     "change": {"sections": [*added]}}
            if handler.__class__ is Timed:
                entry["µs"] = event._us
            changes.append(entry)
        elif given is None and hasattr(result, "__await__"):
            return plugin, handler, result, handlers
        else:
            kept = folded(plugin, hook, handler, result, event, apply)
            if kept is not None:
                changes.append(kept)
    if named:
        data["_plugin"] = None
    return None


def resume(
    hook: str, paused: Paused | None, event: Event, changes: list[dict[str, Any]], apply: Apply, named: bool
) -> Steps[None]:
    """Await a paused handler's awaitable, fold its result in, and go on with the handlers after it."""
    while paused is not None:
        plugin, handler, awaitable, rest = paused
        try:
            result = yield Await(awaitable)
        except Exception as error:
            raise handler_error(plugin, hook, error)
        entry = folded(plugin, hook, handler, result, event, apply)
        if entry is not None:
            changes.append(entry)
        paused = fold_part(hook, rest, event, changes, apply, named)
