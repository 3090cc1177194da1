"""What-if replay: a recorded call's first request rebuilt from its record, with some plugins'
changes left out or other plugins' handlers run, and the first place it differs (docs/evaluating.md).

The record does not keep the request; it keeps what made it. So the request is rebuilt twice from
the same parts — the call's inputs, what its conversation showed it (`functai._evaluation.replay`),
its recorded ``before_call`` changes re-applied as data — once with everything (*recorded*) and
once as asked (*rebuilt*), through the pipeline's own steps (`functai._calls.run`). Nothing is
run again but the handlers of the plugins given in ``with_``; nothing is written anywhere.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import sys
from types import MappingProxyType
from typing import Any, Collection, Iterable, Mapping, Sequence

import attrs

from .._calls.asking import Asker
from .._calls.function import AIFunction
from .._calls.limits import Budget
from .._calls.outputs import describe, read_output, to_jsonable
from .._calls.reading import read_calls
from .._calls.records import CallRecord
from .._calls.run import apply_before_call, prepared, before_call_event
from .._calls.steps import drive
from .._errors import FunctAIError, OutputError, PluginError
from .._hooks.adapt import as_plugins, looks_like_path
from .._hooks.change import Change
from .._hooks.fold import fold
from .._hooks.order import Plan, arrange
from .._hooks.plugin import Plugin
from .._layers import Resolved, current_values, resolve
from .._models.keys import reveal
from .._models.catalog import SCRIPTED_MODEL, TEST_MODEL
from .._models.providers import split
from .._models.request import Reply, Request
from .replay import NotReplayable, ReplayedTurn, shown, turn_calls

#: The parts of a request, in the order a difference is looked for.
PARTS = ("instruction and sections", "messages", "tools", "settings", "model", "output schema")


@attrs.frozen
class Replay:
    """A recorded call's first request as recorded and as rebuilt, and where they differ."""

    record: CallRecord
    #: The request rebuilt with every recorded change and nothing added: what the model was sent.
    recorded: Request
    #: The request rebuilt as asked: some plugins' changes left out, others' handlers run, another model.
    rebuilt: Request
    #: The parts that differ, in `PARTS` order (empty when the two requests are the same).
    differs: tuple[str, ...]
    #: The first part that differs, as a unified diff of its lines ("" when none does).
    diff: str
    #: The recorded changes left out, as the record keeps them.
    left_out: tuple[Mapping[str, Any], ...] = ()
    #: The changes the ``with_`` plugins' handlers made, as a record would keep them.
    changes: tuple[Mapping[str, Any], ...] = ()
    #: What the rebuilt request cannot tell by itself (a function changed since, a model switched …).
    notes: tuple[str, ...] = ()
    #: With ``ask=True``: the reply to the rebuilt request, and the plugin that answered instead of the model.
    answer: Reply | None = None
    answered_by: str | None = None
    #: The reply read as the function's output (None when it asks for tools or cannot be read).
    value: Any = None

    @property
    def same(self) -> bool:
        """Whether the rebuilt request is the recorded one."""
        return not self.differs

    def report(self) -> str:
        """The replay as a person reads it: what was left out or run, the first difference, the answers."""
        record = self.record
        where, conversation = "", record.conversation
        if conversation:
            inside = "turn" if "parent" in conversation else "inside turn"  # the turn's own call, or one made in it
            where = f", {inside} {conversation.get('turn')} of conversation {conversation.get('id')!r}"
        lines = [f"call {record.id}: {record.path or record.function}{where}"]
        lines += [f"left out: {_change_line(c)}" for c in self.left_out]
        lines += [f"ran: {_change_line(c)}" for c in self.changes]
        if self.same:
            lines.append("no difference: the rebuilt request is the recorded one")
        else:
            lines.append(f"first difference: {self.differs[0]}")
            lines += self.diff.splitlines()
            if len(self.differs) > 1:
                lines.append(f"also different: {', '.join(self.differs[1:])}")
        lines += [f"note: {note}" for note in self.notes]
        if self.answer is not None:
            if self.answered_by is None:
                lines.append(f"settings sent: {json.dumps(to_jsonable(dict(self.rebuilt.settings)), sort_keys=True)}")
            recorded = f"error [{record.error.get('code')}]" if record.error else _shown(record.output)
            lines.append(f"recorded answer: {recorded}")
            by = f" (answered by plugin {self.answered_by!r})" if self.answered_by else ""
            lines.append(f"new answer:      {_answer_text(self.answer, self.value)}{by}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The replay as JSON data (``functai replay --json``)."""
        answer = None
        if self.answer is not None:
            answer = {"text": self.answer.text, "value": to_jsonable(self.value), "answered_by": self.answered_by,
                      "tool_calls": [{"name": c.name, "input": to_jsonable(dict(c.input))}
                                     for c in self.answer.tool_calls]}
        return {
            "call": self.record.id, "function": self.record.function, "same": self.same,
            "differs": list(self.differs), "diff": self.diff, "left_out": to_jsonable(list(self.left_out)),
            "changes": to_jsonable(list(self.changes)), "notes": list(self.notes),
            "recorded": request_data(self.recorded), "rebuilt": request_data(self.rebuilt),
            "recorded_output": to_jsonable(self.record.output), "answer": answer,
        }


def request_data(request: Request) -> dict[str, Any]:
    """A request as JSON data: model, messages, tools, settings, output schema."""
    return {"model": request.model, "messages": to_jsonable(request.messages), "tools": to_jsonable(request.tools),
            "settings": to_jsonable(request.settings), "output_schema": to_jsonable(request.output_schema)}


def replay(
    record: CallRecord | str,
    without: Iterable[str] = (),
    with_: Iterable[Any] = (),
    lm: str | None = None,
    ask: bool = False,
    *,
    fn: AIFunction[..., Any] | None = None,
    log: str | os.PathLike[str] | None = None,
) -> Replay:
    """Rebuild ``record``'s first request with the changes of the plugins named in ``without`` left
    out and the ``before_call`` and ``request`` handlers of the plugins in ``with_`` run (a plugin
    given there has its recorded changes replaced by what its handlers do now); ``lm`` asks another
    model. With ``ask``, send the rebuilt request and keep the reply.

    ``record``: a call record, or a call id in the call log ``log`` (default: the ``log_calls``
    setting), which also holds the turns a conversation showed the call. ``fn``: the AI function,
    when ``record.module:record.function`` does not import from here.
    """
    folder = log if log is not None else current_values().get("log_calls")
    folder = os.fspath(reveal(folder)) if folder else None
    records: list[CallRecord] | None = None
    if isinstance(record, str):
        if folder is None:
            raise FunctAIError(f"call {record!r} is looked up in the call log, and none is configured: pass log=... "
                               "or the call record itself", code="no-call-log")
        records = list(read_calls(folder))
        record = _find(records, record, folder)
    elif not isinstance(record, CallRecord):
        raise TypeError(f"replay() takes a call record or a call id, not {type(record).__name__}")
    _check_replayable(record)
    program = fn if fn is not None else function_of(record)
    calls = None
    conversation = record.conversation or {}
    if folder is not None and "shown" in conversation:  # the shown turns, from their own call records
        calls = turn_calls(records if records is not None else read_calls(folder))
    return rebuild(record, program, calls, without, with_, lm, ask)


def own_settings(fn: AIFunction[..., Any]) -> dict[str, Any]:
    """The model settings ``fn`` is configured with here (its layers and this process's)."""
    return dict(resolve(fn.own).model_settings)


def own_model(fn: AIFunction[..., Any]) -> str | None:
    """The model name ``fn`` sends here (``lm``, else ``FUNCTAI_LM``), or None with ``client=`` or none."""
    values = resolve(fn.own).values
    lm = values.get("lm") or (None if "client" in values else os.environ.get("FUNCTAI_LM") or None)
    if not lm:
        return None
    return str(lm) if str(lm) == TEST_MODEL else split(str(lm))[1]


def rebuild(
    record: CallRecord,
    fn: AIFunction[..., Any],
    calls: Mapping[tuple[str, str], CallRecord] | None,
    without: Iterable[str] = (),
    with_: Iterable[Any] = (),
    lm: str | None = None,
    ask: bool = False,
) -> Replay:
    """`replay` once the record, its function and the log's turn calls (`turn_calls`) are known."""
    if isinstance(without, str) or isinstance(with_, (str, Plugin)):
        raise TypeError("without= and with_= take lists (without=['name'], with_=[plugin])")
    without = tuple(without)
    _check_replayable(record)
    history, sections = shown(record, calls)
    resolved = resolve(fn.own)
    plugins = _plugins(list(with_), resolved)
    out = {*without, *(p.name for p in plugins)}
    notes = _notes(record, fn, out, without)
    recorded = _Built(record, fn, resolved, history, sections, notes)
    if isinstance(record.instruction, str) and recorded.instruction != record.instruction:
        notes.append("the instruction rebuilt with every recorded change is not the one the record says was sent "
                     "(the function changed since): the recorded request is rebuilt, not read")
    if out or plugins or lm:
        rebuilt = _Built(record, fn, resolved, history, sections, notes, out, plugins, lm)
    else:
        rebuilt = recorded
    differs = tuple(part for part in PARTS if recorded.raw(part) != rebuilt.raw(part)  # lines only where needed
                    and recorded.lines(part) != rebuilt.lines(part))
    diff = ""
    if differs:
        part = differs[0]
        diff = "\n".join(difflib.unified_diff(recorded.lines(part), rebuilt.lines(part), f"recorded: {part}",
                                              f"rebuilt: {part}", lineterm=""))
    answer, answered_by, value = rebuilt.answer, rebuilt.answered_by, None
    if ask and answer is None:
        if rebuilt.request.model == SCRIPTED_MODEL and getattr(rebuilt.client, "name", None) != SCRIPTED_MODEL:
            raise FunctAIError(
                f"call {record.id} was answered by functai's scripted offline model ({SCRIPTED_MODEL!r}), a name "
                "no server knows, so the rebuilt request is not sent: name a model to ask (--lm MODEL, or lm= "
                "in replay()), or configure the scripted model (client=) to replay it offline",
                code="replay-offline-model")
        answer = rebuilt.client.complete(rebuilt.request)
    if answer is not None and not ask:
        notes.append(f"plugin {answered_by!r} would answer the rebuilt request instead of the model")
        answer = answered_by = None  # the answer is kept only when asked for
    if answer is not None and not answer.tool_calls:
        try:
            value = read_output(answer.text or "", fn.output_type)
        except OutputError as error:
            notes.append(f"the new answer is not a {describe(fn.output_type)}: {error.message}")
    return Replay(record=record, recorded=recorded.request, rebuilt=rebuilt.request, differs=differs, diff=diff,
                  left_out=tuple(rebuilt.left_out), changes=tuple(rebuilt.changes), notes=tuple(dict.fromkeys(notes)),
                  answer=answer, answered_by=answered_by, value=value)


class _Built:
    """One rebuild of a record's first request, step by step as the pipeline builds it."""

    def __init__(self, record: CallRecord, fn: AIFunction[..., Any], resolved: Resolved,
                 history: Sequence[Mapping[str, Any]], sections: Sequence[str], notes: list[str],
                 out: set[str] | frozenset[str] = frozenset(),
                 plugins: Sequence[Plugin] = (), lm: str | None = None) -> None:
        self.left_out = [c for c in record.changes if c.get("plugin") in out and _shapes_request(c)]
        conversation = record.conversation or {}
        scope: Any = ReplayedTurn(fn, history, _context_sections(record, sections, out, notes),
                                  conversation.get("id"), conversation.get("turn"))  # the TurnScope the steps read
        start_lm, settings = _starting(record, resolved, out, notes)
        inputs = dict(record.inputs)
        event = before_call_event(fn, inputs, fn.instruction, tuple(scope.sections), start_lm,
                                  MappingProxyType(settings), fn.tool_names, record.path or fn.name, scope)
        for entry in record.changes:  # recorded changes come back as data: their handlers do not run
            if entry.get("hook") == "before_call" and entry.get("plugin") not in out and "change" in entry:
                _reapply(record, fn, entry, event)
        self.changes: list[dict[str, Any]] = []
        handlers = tuple((p, handler) for p in plugins for handler in p.handlers("before_call"))
        if handlers:
            fold("before_call", handlers, event, self.changes, apply_before_call)
        data = event.__dict__
        scratch = CallRecord(id=record.id, function=record.function, version=fn.version, inputs=inputs,
                             started=record.started, path=record.path, changes=[*record.changes, *self.changes])
        self.client, model, messages, model_settings = prepared(
            fn, inputs, resolved, scratch, scope, lm or data["lm"], data["instruction"], data["sections"],
            data["settings"])
        self.instruction: str = scratch.instruction or ""
        request = Request(model=model, messages=messages, tools=fn.tool_schemas(data["tools"]),
                          settings=model_settings, output_schema=fn.output_schema)
        request = attrs.evolve(request, settings={**request.settings, **_first_request_settings(record, out)})
        self.answer: Reply | None = None
        self.answered_by: str | None = None
        if any(p.handlers("request") for p in plugins):
            asker = Asker(fn, scratch, scratch.path, resolved.values, Plan(tuple(plugins)), None,
                          Budget(resolved.values["max_requests"], fn.name), self.client, model, False)
            request, self.answer, self.answered_by = drive(asker.request_hook(request))
            self.changes += scratch.changes[len(record.changes) + len(self.changes):]
        self.request = request
        self._lines: dict[str, list[str]] = {}

    def raw(self, part: str) -> Any:
        """One part of the request as it is (equal parts need no lines)."""
        if part == "instruction and sections":
            return self.instruction
        request = self.request
        return request.output_schema if part == "output schema" else getattr(request, part)

    def lines(self, part: str) -> list[str]:
        """One part of the request as lines, for comparing and for the diff."""
        found = self._lines.get(part)
        if found is None:
            found = self._lines[part] = _part_lines(self, part)
        return found


def _reapply(record: CallRecord, fn: AIFunction[..., Any], entry: Mapping[str, Any], event: Any) -> None:
    """Apply a recorded before_call change to the event, as the pipeline applied it."""
    try:
        plugin = Plugin(entry["plugin"], version=entry.get("version") or "0.0.0")
        apply_before_call(plugin, Change(**entry["change"]), event)
    except (PluginError, TypeError) as error:  # the function (its tools) or this functai changed since
        why = error.message.partition(". Nothing was sent")[0] if isinstance(error, PluginError) else str(error)
        raise NotReplayable(f"call {record.id}: the change {entry.get('plugin')!r} recorded no longer applies to "
                            f"{fn.name} as it is now: {why}") from error


def _part_lines(built: _Built, part: str) -> list[str]:
    request = built.request
    if part == "instruction and sections":
        return built.instruction.splitlines()
    if part == "messages":
        return [line for message in request.messages for line in _message_lines(message)]
    if part == "tools":
        return [line for tool in request.tools for line in _json(tool, indent=2).splitlines()]
    if part == "settings":
        return [f"{key}: {_json(value)}" for key, value in sorted(request.settings.items())]
    if part == "model":
        return [request.model]
    return _json(request.output_schema, indent=2).splitlines()


def _message_lines(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    text = content if isinstance(content, str) else ("" if content is None else _json(content))
    lines = [f"{message.get('role')}:", *(f"  {line}" for line in text.splitlines())]
    lines += [f"  {key}: {_json(value)}" for key, value in sorted(message.items()) if key not in ("role", "content")]
    return lines


def _json(value: Any, indent: int | None = None) -> str:
    return json.dumps(to_jsonable(value), sort_keys=True, ensure_ascii=False, indent=indent)


def _shapes_request(change: Mapping[str, Any]) -> bool:
    """Whether a recorded change shaped the first request in a way leaving its plugin out can undo."""
    hook = change.get("hook")
    return hook in ("before_call", "context") or (hook == "request" and isinstance(change.get("change"), Mapping)
                                                   and isinstance(change["change"].get("settings"), Mapping)
                                                   and change.get("request", 1) == 1)


def _first_request_settings(record: CallRecord, out: Collection[str]) -> dict[str, Any]:
    """The settings ``request`` handlers set on the call's first request, as recorded (a budget's
    ``max_tokens``), but those of the plugins left ``out``. An entry names its request's place in
    the call; in an older record, which does not, a plugin's first entry before any reply or tool
    call is its first request's."""
    settings: dict[str, Any] = {}
    seen = set(out)
    sending = True  # no reply or tool call recorded yet
    for entry in record.changes:
        hook, plugin, place = entry.get("hook"), entry.get("plugin"), entry.get("request")
        sending = sending and hook in _BEFORE_SENDING
        if hook != "request" or plugin in out or not _shapes_request(entry):
            continue
        if place == 1 or (place is None and sending and plugin not in seen):
            seen.add(str(plugin))
            settings.update(entry["change"]["settings"])
    return settings


#: Hooks whose changes come before the call's first request is sent (in an older record).
_BEFORE_SENDING = frozenset({"turn_start", "context", "before_call", "request"})


def _check_replayable(record: CallRecord) -> None:
    replaced = [c for c in record.changes if c.get("hook") == "request" and c.get("change") == {"request": "replaced"}]
    if replaced or not record.replayable:
        by = f"plugin {replaced[0]['plugin']!r}" if replaced else "a plugin"
        raise NotReplayable(f"call {record.id}: {by} replaced its request in a request handler, and the record does "
                            "not keep the request it made, so it cannot be rebuilt (replayable: false)")


def function_of(record: CallRecord) -> AIFunction[..., Any]:
    """The AI function ``record`` names (``module:function``), imported from here."""
    reference = f"{record.module}:{record.function}"
    fix = "pass fn=<the AI function>"
    module = sys.modules.get(record.module) if record.module == "__main__" else None
    if module is None and (not record.module or record.module == "__main__"):
        raise FunctAIError(f"call {record.id} was made by {reference}, which cannot be imported; {fix}",
                           code="replay-function")
    try:
        found = getattr(module or importlib.import_module(record.module), record.function, None)
    except ImportError as error:
        raise FunctAIError(f"call {record.id}: importing {record.module!r} failed ({error}); {fix}",
                           code="replay-function") from error
    if not isinstance(found, AIFunction):
        raise FunctAIError(f"call {record.id}: {reference} is not an AI function here; {fix}", code="replay-function")
    return found


def _find(records: Sequence[CallRecord], call_id: str, folder: str) -> CallRecord:
    for record in records:
        if record.id == call_id:
            return record
    raise FunctAIError(f"no call {call_id!r} in the call log {folder}", code="unknown-call")


def _plugins(given: list[Any], resolved: Resolved) -> tuple[Plugin, ...]:
    """``with_`` as plugins, in the order their declarations ask: a name is first one of the plugins
    a call of the function runs here, else an installed plugin; a path is a plugin file."""
    here = {p.name: p for p in resolved.whole.plan.plugins}
    named = [here.get(item, item) if isinstance(item, str) and not looks_like_path(item) else item for item in given]
    if not named:
        return ()
    return tuple(p.plugin for p in arrange([("with_", as_plugins(named, "replay(with_=...)"))]).placed)


def _notes(record: CallRecord, fn: AIFunction[..., Any], out: set[str], without: Iterable[str]) -> list[str]:
    notes = []
    if fn.version != record.version:
        notes.append(f"{fn.name} changed since the call (version {record.version}, now {fn.version}): its "
                     "instruction, inputs, tools and layout are taken as they are now")
    changed = {c.get("plugin") for c in record.changes if _shapes_request(c) or c.get("hook") == "turn_start"}
    for name in without:
        if name not in changed:
            notes.append(f"{name!r} made no recorded change to this call's request: leaving it out changes nothing")
    for entry in record.changes:
        if entry.get("plugin") not in out:
            continue
        if entry.get("hook") == "turn_start":
            notes.append(f"{entry['plugin']!r} changed the turn's inputs; the record keeps them only as changed")
        elif entry.get("hook") == "context" and {"keep", "without"} & set(entry.get("change") or ()):
            notes.append(f"{entry['plugin']!r} chose the earlier turns shown; they are shown as recorded "
                         "(what the conversation's rule would have picked without it is not recorded)")
    answered = [c for c in record.changes if c.get("hook") == "request" and "answer" in (c.get("change") or {})]
    if answered:
        notes.append(f"plugin {answered[0]['plugin']!r} answered a request of this call instead of the model")
    return notes


def _context_sections(record: CallRecord, sections: Sequence[str], out: set[str] | frozenset[str],
                      notes: list[str]) -> list[str]:
    """The context sections the call was shown, less those of the plugins left out."""
    given = [c for c in record.changes if c.get("hook") == "context" and "sections" in (c.get("change") or {})]
    if not out or not any(c["plugin"] in out for c in given):
        return list(sections)
    if [s for c in given for s in c["change"]["sections"]] != list(sections):
        notes.append("the context sections do not match the context changes recorded: they are shown as recorded")
        return list(sections)
    return [s for c in given if c["plugin"] not in out for s in c["change"]["sections"]]


def _starting(record: CallRecord, resolved: Resolved, out: set[str] | frozenset[str],
              notes: list[str]) -> tuple[str | None, dict[str, Any]]:
    """The model and model settings the call started with, before any before_call change: the
    recorded ones where no change touched them (the record wins over this process's settings),
    else this process's — said in ``notes`` where a left-out change makes that matter."""
    values = resolved.values
    configured = values.get("lm") or (None if "client" in values else os.environ.get("FUNCTAI_LM") or None)
    before = [c for c in record.changes if c.get("hook") == "before_call" and "change" in c]
    kept = [c["change"] for c in before if c.get("plugin") not in out]
    switched = any(c.get("hook") == "model_error" and "lm" in (c.get("change") or {}) for c in record.changes)
    lm = configured
    if any("lm" in c["change"] for c in before):
        if out and not any("lm" in c for c in kept):
            notes.append(f"the model the call started with is not recorded (a plugin left out changed it): the one "
                         f"configured here is used ({configured or 'client='})")
    elif switched:
        if not out:
            notes.append(f"a model_error handler switched the call to {record.model!r}; its first request is "
                         f"rebuilt for the model configured here ({configured or 'client='})")
    elif record.model and record.model != _named(configured, values):
        lm = record.model
        if configured and not out:
            notes.append(f"the call asked {record.model!r}, where {configured!r} is configured: the recorded "
                         "model is used")
    touched = {key for c in before for key in c["change"].get("settings") or ()}
    settings = {k: v for k, v in record.settings.items() if k != "tool_choice_after_tools" and k not in touched}
    settings.update((k, v) for k, v in resolved.model_settings.items() if k in touched)
    lost = sorted(touched - {key for c in kept for key in c.get("settings") or ()})
    if out and lost:
        here = ", ".join(f"{k}={_json(settings[k])}" if k in settings else f"{k} unset" for k in lost)
        notes.append(f"the settings a plugin left out changed are not recorded as they were before it: the ones "
                     f"configured here are used ({here})")
    return lm, settings


def _named(lm: str | None, values: Mapping[str, Any]) -> str | None:
    """The model a record names for a call started with ``lm`` (with ``client=`` and no lm: the client's name)."""
    if lm:
        return str(lm)
    client = values.get("client")
    return getattr(client, "name", type(client).__name__) if client is not None else None


def _change_line(change: Mapping[str, Any]) -> str:
    what = _json(change["change"]) if "change" in change else "(content not kept)"
    return f"{change.get('plugin')} {change.get('version', '')} {change.get('hook')}: {what}"


def _shown(value: Any, width: int = 200) -> str:
    text = value if isinstance(value, str) else _json(value)
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _answer_text(reply: Reply, value: Any) -> str:
    if reply.tool_calls:
        return "asks for tools: " + ", ".join(f"{c.name}({_json(dict(c.input))})" for c in reply.tool_calls)
    return _shown(value if value is not None else (reply.text or ""))
