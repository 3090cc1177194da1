"""Asking the model for one request, through the hooks that may act on it: ``request`` (which
may answer instead of the model), the send, ``model_error`` (which may recover from a failure),
``chunk`` (stream guards, `functai._calls.guards`) and ``reply`` (which may replace the reply).
Every act is recorded in the call's record.

A call whose plan has no handler for these hooks never makes an `Asker` (`functai._calls.run`
sends directly): the hooks cost it nothing.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs

from .._errors import FunctAIError, ModelConfigError, PluginError, Waiting
from .._log import info
from .._hooks.change import MAX_NOTE, Change, reply_data
from .._hooks.events import Answer, ModelErrorEvent, Question, ReplyEvent, RequestEvent, set_field
from .._hooks.fold import call_handler_steps, check_change, first_act, record as change_record, refuse
from .._hooks.hear import note_heard
from .._hooks.order import Plan
from .._hooks.plugin import Plugin
from .._models import providers
from .._models.providers import server_of
from .._models.request import Client, Reply, Request
from .approvals import AskedAtStream, decided, is_extension
from .guards import STOPPED, GuardedSend, Guards
from .limits import Budget
from .records import CallRecord
from .scope import TurnScope
from .steps import Ask, Note, Pause, Send, Steps

if TYPE_CHECKING:
    from .program import Program


def choose_client(values: Mapping[str, Any], lm: str | None, fn: "Program") -> tuple[Client, str]:
    """The client and model name a call asks: ``client=`` when set, else the provider ``lm`` names."""
    client = values.get("client")
    if client is not None:
        return client, str(lm) if lm else getattr(client, "name", type(client).__name__)
    if not lm:
        raise ModelConfigError(
            f"no model is configured for {fn.name}: set lm=... (functai.configure, functai.settings, "
            "@ai, or the FUNCTAI_LM environment variable) or give client=...; lm='test' is an offline "
            "test model",
            code="no-model",
        )
    return providers.client_for(lm, values)


def _short(text: str) -> str:
    return text if len(text) <= MAX_NOTE else text[:MAX_NOTE - 1] + "…"


def _amount(value: Any, where: str) -> float | None:
    """An extension: None, or a finite number from 0 up."""
    if value is None:
        return None
    if not is_extension(value):
        raise TypeError(f"{where}: an extension is a number from 0 up (or None), not {value!r}")
    return value


def add_usage(record: CallRecord, reply: Reply) -> None:
    """Sum the reply's token counts into the record; keep its finish reason."""
    for key, count in reply.usage.items():
        record.usage[key] = record.usage.get(key, 0) + count
    record.finish_reason = reply.finish_reason


def add_reasoning(record: CallRecord, reply: Reply) -> None:
    """Keep the reply's reasoning with the call's (with stream guards: as they left it)."""
    if reply.reasoning:
        record.reasoning = f"{record.reasoning}\n\n{reply.reasoning}" if record.reasoning else reply.reasoning


class Asker:
    """Asks the model for one call's requests; ``client`` and ``model`` are the ones in use
    (a ``model_error`` handler may switch them for the rest of the call)."""

    def __init__(self, fn: "Program", record: CallRecord, path: str, values: Mapping[str, Any], plan: Plan,
                 scope: TurnScope | None, budget: Budget, client: Client, model: str, listen: bool) -> None:
        self.fn = fn
        self.record = record
        self.path = path
        self.values = values
        self.scope = scope
        self.budget = budget
        self.client = client
        self.model = model
        #: The model the call's settings were set for: their api_key, base_url, headers are its provider's.
        self.set_for = str(record.model)
        #: The model a handler switched to, named in the record once it is asked.
        self.switched: str | None = None
        #: The model the call's messages are laid out for, and how to lay them out for another (set by
        #: the call: a baked student reads only its inputs message, any other model the instruction too).
        self.lm: str | None = None
        self.relay: Callable[[Sequence[Any], str | None, str | None], Sequence[Any]] = _one_layout
        self.listen = listen
        self.on_request = plan.handlers["request"]
        self.on_error = plan.handlers["model_error"]
        self.on_reply = plan.handlers["reply"]
        guards = plan.handlers["chunk"]
        #: The call's stream guards (``chunk`` handlers), or None.
        self.guards = Guards(guards, record.changes, fn.name, path, record.id) if guards else None
        self.heard = record.heard if values.get("record_timing") else None
        #: Requests a plugin answered instead of the model (a reply's ``attempt`` counts them too).
        self.answered = 0
        #: Answers the person at the stream gave to request questions, by key; None: nobody answers.
        self.at_stream: dict[str, Answer] | None = {} if listen else None

    def ask(self, request: Request) -> Steps[Reply]:
        """The reply to ``request``: the model's, or a plugin's; replaced by ``reply`` handlers."""
        record = self.record
        attempt = 0
        acts: list[dict[str, Any]] = []  # the model_error changes made for this request
        scope = self.scope
        guards = self.guards
        while True:
            sent, reply, answered, entry = request, None, None, None
            ordinal, recorded = scope.next_request() if scope is not None else (0, False)
            if self.on_request:
                sent, reply, answered = yield from self._asked_at_stream(request, ordinal, recorded)
                if answered is not None:
                    entry = record.changes[-1]
            seconds = 0.0
            if reply is None:
                attempt += 1
                self.budget.spend(self.fn)
                record.attempts += 1
                if self.switched is not None:
                    record.model, self.switched = self.switched, None
                started = time.perf_counter()
                if acts and self.scope is not None:
                    self.scope.acts = {"acts": acts}  # kept with the reply
                try:
                    if self.guards is None:
                        reply = yield Send(self.client, sent, self.scope)
                    else:
                        reply = yield GuardedSend(self.client, sent, self.scope, self.guards)
                except FunctAIError as error:
                    if guards is not None and not isinstance(error, Waiting) and error.code != STOPPED:
                        guarded = len(record.changes)
                        yield from guards.error(error)  # its message may quote the model's words
                        acts.extend(record.changes[guarded:])  # kept with the reply a plugin may yet give
                    if not self.on_error or isinstance(error, Waiting) or error.code == STOPPED:
                        raise
                    acted = yield from self._model_error_hook(sent, error, attempt)
                    if acted is None:
                        raise
                    plugin, change = acted
                    if change.reply is None:
                        acts.append(record.changes[-1])
                        if change.lm is not None:
                            info("model switched", plugin=plugin.name, call=record.id, error=error.code,
                                 to=change.lm, note=change.note or "")
                            request = self._switch(change.lm, request)
                            self.switched = change.lm
                        else:
                            info("model request retried", plugin=plugin.name, call=record.id, error=error.code,
                                 after=f"{float(change.retry or 0):.2f}s", note=change.note or "")
                            if change.retry:
                                yield Pause(float(change.retry))
                        continue
                    reply, answered, entry = change.reply, plugin.name, record.changes[-1]
                else:
                    seconds = round(time.perf_counter() - started, 6)
                    replayed = self.scope.replayed if self.scope is not None else None
                    if replayed is not None:  # a resumed turn: what plugins did for this reply, recorded again
                        reply, answered, sent = self._replayed(replayed, sent, reply)
                    if answered is None:
                        add_usage(record, reply)
            if guards is not None:
                reply = yield from guards.whole(reply)
                if entry is not None and entry is not None and entry["change"].get("answer") is not None:
                    entry["change"]["answer"] = reply_data(reply)  # the record keeps what was shown
            if answered is not None:
                self.answered += 1
                reply = self._kept_in_turn(sent, reply, acts, entry)
                record.finish_reason = reply.finish_reason
                if self.listen and reply.text:
                    yield Note("text", text=reply.text)
            if self.on_reply:
                reply = yield from self._reply_hook(sent, reply, seconds, answered, recorded)
            if answered is None:  # as the reply handlers left it: a replacement that masks it is what is kept
                add_reasoning(record, reply)
            return reply

    def _switch(self, lm: str, request: Request) -> Request:
        """Ask ``lm`` for this request and the rest of the call (with ``client=`` set, that client).
        The ``base_url``, ``api_key`` and ``headers`` settings belong to the provider of the model
        they were set with: another provider's model is asked with that provider's own variables."""
        values = self.values
        if values.get("client") is None and providers.split(lm)[0] != providers.split(self.set_for)[0]:
            values = {name: value for name, value in values.items() if name not in providers.PROVIDER_SETTINGS}
        self.client, self.model = choose_client(values, lm, self.fn)
        messages, self.lm = self.relay(request.messages, self.lm, lm), lm
        return attrs.evolve(request, model=self.model, messages=messages)

    def _replayed(self, replayed: dict[str, Any], request: Request,
                  reply: Reply) -> tuple[Reply, str | None, Request]:
        """A reply a resumed turn read from its record: the changes plugins made for it are recorded
        again (a model switched, a plugin's answer, which no model was paid for); and the request as
        it was sent (to the model switched to)."""
        self.scope.replayed = None  # type: ignore[union-attr]
        for act in replayed.get("acts", ()):
            self.record.changes.append(act)
            if "lm" in act["change"]:
                request = self._switch(act["change"]["lm"], request)
                self.record.model = act["change"]["lm"]  # the recorded reply is the one it asked
        answered = replayed.get("answered")
        # each model_error act followed a request that failed, as did an answer given in model_error; an answer
        # given in request was not asked of a model: the attempts are counted as when the reply was first kept
        self.record.attempts += sum(act["hook"] == "model_error" for act in replayed.get("acts", ())) - (
            answered is not None and answered["hook"] != "model_error")
        if answered is None:
            return reply, None, request
        self.record.changes.append(answered)
        return reply, answered["plugin"], request

    def _asked_at_stream(self, request: Request, ordinal: int,
                         recorded: bool) -> Steps[tuple[Request, Reply | None, str | None]]:
        """`request_hook`; when a handler asks the person at the stream, the driver asks, and the hook
        runs again with the answer (nobody answered: ``ask`` returns None, as in a plain call)."""
        first = len(self.record.changes)
        while True:
            try:
                return (yield from self.request_hook(request, ordinal, recorded))
            except AskedAtStream as asking:
                del self.record.changes[first:]
                question = asking.approval
                given = yield Ask(question, None)
                if given is None or self.at_stream is None:
                    self.at_stream = None
                    continue
                allow, reason, extend, by = given
                self.at_stream[question["key"]] = Answer(
                    allow, (question["extend"] if extend is None else extend) if allow else None, reason, by,
                    question["key"])

    def request_hook(self, request: Request, ordinal: int = 0,
                     recorded: bool = False) -> Steps[tuple[Request, Reply | None, str | None]]:
        """Fold ``request``: the request as handlers left it, and a reply when one answered it.
        A handler that raises a `FunctAIError` of its own (a budget's ``budget-exceeded``) refuses
        the call before anything is sent; the refusal is recorded as the plugin's."""
        record = self.record
        scope = self.scope
        from .._models.endpoint import endpoint_of  # with hmac: only a call with request or reply handlers needs it

        event = RequestEvent(request=request, endpoint=endpoint_of(self.client), function=self.fn.name,
                             path=self.path, call=record.id,
                             turn=None if scope is None else scope.turn, recorded=recorded,
                             outer_call=self.budget.call or record.id, ask_person=self._ask)
        if scope is not None:
            set_field(event, "_memory", scope.memory)
            set_field(event, "_ordinal", ordinal)
        schema = request.output_schema
        kept = _kept(schema) if self.on_request else None
        for plugin, handler in self.on_request:
            try:
                result = yield from call_handler_steps(plugin, "request", handler, event)
            except FunctAIError as error:
                if not isinstance(error, (Waiting, PluginError, AskedAtStream)):
                    record.changes.append(change_record(plugin, "request", {"refused": error.code}, None, None,
                                                        _short(error.message)))
                raise
            if _changed(schema, kept):
                raise refuse(plugin, "request", None, "it changed the output schema in place, which no record would "
                                                      "show and every later call would send; return a new Request")
            if result is None or result is event.request:
                continue
            if isinstance(result, Request):
                if result == event.request:
                    continue  # handed back unchanged: not a replacement, nothing to record
                set_field(event, "request", result)
                record.changes.append(change_record(plugin, "request", {"request": "replaced"}, handler, event))
                record.replayable = False
                continue
            change = check_change(plugin, "request", result, handler)
            if change is None:
                continue
            if change.settings is not None and change.reply is None:  # a setting, like before_call's: still replayable
                sent = event.request
                set_field(event, "request", attrs.evolve(sent, settings={**sent.settings, **change.settings}))
            entry = change_record(plugin, "request", change.to_data(), handler, event, change.note)
            if change.settings is not None:  # its place in the call: replay rebuilds the first request's
                entry["request"] = record.attempts + self.answered + 1
            record.changes.append(entry)
            if change.reply is not None:
                return event.request, change.reply, plugin.name
        return event.request, None, None

    def _ask(self, event: RequestEvent, question: str, extend: float | None, decide: Any) -> Answer | None:
        """``event.ask``: ``decide`` answers at once; in a turn, the answer given to this question
        (its key: the request's place in the turn and the plugin), else the turn waits; in a
        plain call nobody can be asked (None)."""
        plugin = event._plugin
        if not isinstance(question, str) or not question.strip():
            raise TypeError("ask(question): the question is the text a person reads, a non-empty string")
        extend = _amount(extend, "ask(extend=...)")
        asked = {"kind": "request", "question": question, "extend": extend, "plugin": plugin, "path": self.path,
                 "function": self.fn.name}
        scope = self.scope
        # The question's place: a resumed turn asks it again under the same key (a decide function too).
        key = f"request.{event._ordinal}.{plugin}" if scope is not None and scope.waits else None
        if decide is not None:
            return attrs.evolve(decided(decide, Question(question, extend, plugin, event), self.fn.name), key=key)
        found = (scope.answers(key) or {}).get(key) if key is not None and scope is not None else None
        if found is not None:  # recorded: a resumed turn reads its answer again
            allow = found["allow"]
            return Answer(allow, found.get("extend") if allow else None, found.get("reason"), found.get("by"), key)
        if self.at_stream is not None:  # the person at the stream is asked first, in a turn too
            key = key or f"request.{self.record.attempts + self.answered + 1}.{plugin}"
            answer = self.at_stream.get(key)
            if answer is None:
                raise AskedAtStream({"key": key, **asked})
            return answer
        if key is None or scope is None:  # a plain call: nobody can be asked
            return None
        raise Waiting(f"{self.path} waits for a person's answer before its request is sent (asked by plugin "
                      f"{plugin!r}): {question}", approvals=[{"key": key, **asked}])

    def _model_error_hook(
        self, request: Request, error: FunctAIError, attempt: int
    ) -> Steps[tuple[Plugin, Change] | None]:
        """Fold ``model_error``: the first handler's change that recovers, recorded; None when none does."""
        event = ModelErrorEvent(request=request, error=error, attempt=attempt, lm=self.record.model,
                                function=self.fn.name, path=self.path, call=self.record.id)
        acted = yield from first_act("model_error", self.on_error, event)
        if acted is None:
            return None
        plugin, handler, change = acted
        if change.retry is True:
            raise refuse(plugin, "model_error", "retry",
                         "a model is retried after a number of seconds (retry=0 for at once), not True")
        self.record.changes.append(
            change_record(plugin, "model_error", {**change.to_data(), "error": error.code}, handler, event,
                          change.note))
        return plugin, change

    def _reply_hook(self, request: Request, reply: Reply, seconds: float, answered: str | None,
                    recorded: bool) -> Steps[Reply]:
        """Run ``reply``: each handler hears the reply as the ones before it left it, and may replace it."""
        record = self.record
        scope = self.scope
        from .._models.endpoint import endpoint_of

        event = ReplyEvent(request=request, endpoint=endpoint_of(self.client), reply=reply, seconds=seconds,
                           attempt=record.attempts + self.answered,
                           function=self.fn.name, path=self.path, server=None if answered else server_of(self.client),
                           call=record.id, answered=answered, turn=None if scope is None else scope.turn,
                           recorded=recorded, outer_call=self.budget.call or record.id,
                           log_content=self.values["log_content"] is not False)
        if scope is not None:
            set_field(event, "_memory", scope.memory)
        heard = self.heard
        shape, kept = (_shape(reply), _kept(request.output_schema)) if self.on_reply else (None, None)
        for plugin, handler in self.on_reply:
            started = time.perf_counter_ns() if heard is not None else 0
            result = yield from call_handler_steps(plugin, "reply", handler, event)
            if heard is not None:
                note_heard(heard, "reply", plugin, started)
            if _changed(request.output_schema, kept) or _shape(event.reply) != shape:
                raise refuse(plugin, "reply", None, "it changed the reply or the request in place (a tool call's "
                                                    "input, the token counts, the output schema), which no record "
                                                    "would show; return a functai.Reply")
            change = check_change(plugin, "reply", result, handler)
            if change is not None and change.reply is not None and change.reply != event.reply:
                replaced = change.reply
                if self.guards is not None:  # a plugin's words are shown and kept as the model's are: guarded
                    replaced = yield from self.guards.whole(replaced)
                set_field(event, "reply", replaced)
                shape = _shape(replaced)
                record.changes.append(
                    change_record(plugin, "reply", {"reply": reply_data(replaced)}, None, None, change.note))
                record.finish_reason = replaced.finish_reason
        return event.reply

    def _kept_in_turn(self, request: Request, reply: Reply, acts: list[dict[str, Any]],
                      entry: dict[str, Any] | None) -> Reply:
        """In a turn, an answered request is kept as its reply, in order with the model's: a resumed
        turn reads the replies it recorded by their place, whoever answered — and records again who
        did, if no plugin answers this time."""
        scope = self.scope
        if scope is None or not scope.records:
            return reply
        recorded = scope.replay(request)
        if recorded is not None:
            scope.replayed = None  # the plugin answered again and recorded itself
            return recorded
        if self.guards is not None:
            acts = [*acts, *self.guards.made]  # its redactions, recorded again with it
        scope.acts = {"acts": acts, "answered": entry}  # the answer's change
        scope.keep(reply)
        return reply


def _one_layout(messages: Sequence[Any], was: str | None, now: str | None) -> Sequence[Any]:
    return messages


def _shape(reply: Reply) -> tuple[str, str]:
    """What of a reply a handler could change in place, though a `Reply` is frozen: its tool calls'
    inputs and its token counts are dicts."""
    return repr([call.input for call in reply.tool_calls]), repr(reply.usage)


def _kept(schema: dict[str, Any] | None) -> str | None:
    """The output schema as handlers are given it (the function's own dict, shared by its calls), as
    JSON text: key order and ``False`` against ``0`` count, as they do on the wire."""
    return None if schema is None else json.dumps(schema)


def _changed(schema: dict[str, Any] | None, kept: str | None) -> bool:
    """Whether a handler changed the output schema in place; if so, it is put back as it was, for the
    function's later calls."""
    if schema is None or kept is None:
        return False
    try:
        if json.dumps(schema) == kept:
            return False
    except (TypeError, ValueError, RecursionError):  # made unwritable: changed too
        pass
    schema.clear()
    schema.update(json.loads(kept))
    return True
