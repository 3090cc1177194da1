"""Asking about a tool call: the ``tool_call`` handlers folded, then the questions they asked, put
about the call as it will run — answered by a ``decide`` function, by an answer recorded for
this very call (its digest), by a person at the stream, or by making the turn wait. A part of
`functai._calls.toolrun.ToolRunner`, kept apart for its size.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from .._errors import FunctAIError, Waiting
from .._hooks.change import Change
from .._hooks.events import Question, ToolCallEvent, given, set_field
from .._hooks.fold import call_handler_steps, folded, record, refusal
from .._hooks.order import Plan
from .._hooks.plugin import Plugin
from .._log import warn
from .approvals import CHECK_FAILED, AskedAtStream, decided, digest, edited_digest, key_of, settle, stale_error
from .outputs import to_jsonable
from .records import CallRecord
from .scope import TurnScope
from .steps import Steps
from .tools import ApprovalError

if TYPE_CHECKING:
    from .program import Program


class Asking:
    """The questions part of `ToolRunner` (which sets these attributes)."""

    fn: Program
    record: CallRecord
    path: str
    scope: TurnScope | None
    plan: Plan
    settings: Mapping[str, Any]
    listen: bool
    tools: dict[str, Any]
    #: Answers given at the stream, by approval key: ``{"allow", "reason", "digest", "inputs", "approval"}``.
    answers: dict[str, dict[str, Any]]

    def _apply_inputs(self, plugin: Plugin, change: Change, event: ToolCallEvent) -> None: ...

    def _answered_at_stream(self, approval: dict[str, Any], edit: dict[str, Any] | None, allow: bool,
                            reason: str | None, inputs: Any, by: str | None) -> dict[str, Any] | None:
        """Keep an answer given at the stream; the edit the hook runs again with (inputs merged)."""
        given: dict[str, Any] = {"allow": allow, "reason": reason, "approval": approval, "by": by}
        if allow and inputs is not None:  # checked by the stream when it was given
            given["inputs"] = inputs
            edit = {"plugin": approval["plugin"], "by": by,
                    "inputs": {**(edit["inputs"] if edit else {}), **inputs}}
        given["digest"] = edited_digest(approval, given.get("inputs"))
        self.answers[approval["key"]] = given
        return edit

    def _recorded_edit(self, site: str) -> dict[str, Any] | None:
        """The inputs people changed on approving this tool call before the turn was resumed, merged in order."""
        edit: dict[str, Any] | None = None
        for answer in (self.scope.answers(site) or {}).values():  # type: ignore[union-attr]
            if answer["allow"] and answer.get("inputs"):
                plugin = answer["approval"]["plugin"] if answer.get("approval") else None
                edit = {"plugin": plugin, "by": answer.get("by"),
                        "inputs": {**(edit["inputs"] if edit else {}), **answer["inputs"]}}
        return edit

    def _edit_change(self, edit: dict[str, Any]) -> dict[str, Any]:
        """An edit on approving, recorded as a ``tool_call`` change by the person who made it."""
        name = edit["plugin"]
        version = next((p.version for p, _ in self.plan.handlers["tool_call"] if p.name == name), "0.0.0")
        return {"plugin": name, "version": version, "hook": "tool_call", "by": edit["by"],
                "change": {"inputs": to_jsonable(edit["inputs"])}}

    def _tool_call_hook(self, event: ToolCallEvent, entry: dict[str, Any], site: str) -> Steps[str | None]:
        """Fold ``tool_call``, then put the questions its handlers asked, about the call as it will run;
        the text the model is shown if the tool may not run."""
        ran: list[tuple[str, str]] = []  # the plugins whose handlers ran: an approval covers them
        questions: list[tuple[str, str | None, Any]] = []
        set_field(event, "_questions", questions)
        for plugin, handler in self._tool_call_handlers(event):
            if (plugin.name, plugin.version) not in ran:
                ran.append((plugin.name, plugin.version))
            try:
                result = yield from call_handler_steps(plugin, "tool_call", handler, event)
                change = folded(plugin, "tool_call", handler, result, event, self._apply_inputs)
            except FunctAIError as error:
                refused = refusal(error)
                if refused is not None:
                    change = record(plugin, "tool_call", {"block": refused.message, "code": refused.code}, handler,
                                    event)
                elif error.code == "plugin-failed":
                    cause = error.__cause__ or error
                    warn("hook failed", plugin=plugin.name, version=plugin.version, hook="tool_call",
                         function=self.fn.name, error=f"{type(cause).__name__}: {cause}")
                    # A check that fails blocks the tool, never lets it run.
                    change = record(plugin, "tool_call", {"block": CHECK_FAILED}, handler, event)
                else:
                    raise
            if change is not None:
                self.record.changes.append(change)
                block = change["change"].get("block")
                if block is not None:
                    entry["blocked"] = plugin.name
                    entry["block_reason"] = block
                    return f"This call was blocked ({plugin.name}): {block}"
        for plugin, reason, decide in questions:
            others = [list(p) for p in ran if p[0] != plugin]
            allowed, why = self._question(site, event, plugin, reason, decide, others)
            if not allowed:
                return _refused(entry, plugin, why)
        return None

    def _question(self, site: str, event: ToolCallEvent, plugin: str, reason: str | None, decide: Any,
                  plugins: list[list[str]]) -> tuple[bool, str | None]:
        """Put one question about the call as it will run: ``decide`` answers at once; else an answer
        given to this very call (its digest), a person at the stream, a turn that waits; in a plain
        call nobody can be asked. ``(allowed, reason)``."""
        if decide is not None:
            answer = decided(decide, Question(reason, None, plugin, event), self.fn.name)
            return answer.allow, answer.reason
        input = to_jsonable(dict(given(event, "input")))
        asked = digest(event.name, input, plugins)
        base = f"{site}.{plugin}"
        approval = {"key": key_of(base, asked), "name": event.name, "input": input, "effects": event.effects,
                    "path": event.path, "plugin": plugin, "question": reason, "digest": asked, "plugins": plugins,
                    # what an edit must fit, for whoever answers without the function (the console)
                    "parameters": self.tools[event.name].inputs.schema}
        scope = self.scope
        waits = scope is not None and scope.waits
        answers = {**(scope.answers(base) or {}), **self.answers} if waits else self.answers  # type: ignore[union-attr]
        answered, stale = settle(base, asked, answers)
        if answered is not None:
            return answered["allow"], answered.get("reason")
        if self.listen:
            raise AskedAtStream(approval)
        if waits:
            if stale is not None and stale.get("approval"):
                approved = stale["approval"]
                edited = {**approved["input"], **(stale.get("inputs") or {})}
                raise stale_error(event.path, {**approved, "input": edited}, approval)
            raise Waiting(f"the tool call {event.path} waits for a person's approval (asked by plugin {plugin!r})",
                          approvals=[approval])
        del approval["key"]
        raise ApprovalError(
            f"the tool call {event.path} needs a person's approval (asked by plugin {plugin!r}"
            f"{': ' + reason if reason else ''}), and nobody can be asked in a plain call; answer with "
            "approve=<function>, or make the call inside a conversation turn so it can wait",
            approval=approval,
        )

    def _tool_call_handlers(self, event: ToolCallEvent) -> Any:
        """The ``tool_call`` handlers in order; in a resumed turn the approval plugin runs again
        for each rule the turn started with, so the tool runs only if every rule allows it."""
        also = self.scope.also_approve if self.scope is not None else ()
        for plugin, handler in self.plan.handlers["tool_call"]:
            yield plugin, handler
            if plugin is self.plan.approval:
                for rule in also:
                    set_field(event, "settings", MappingProxyType({**self.settings, "approve": rule}))
                    yield plugin, handler
                set_field(event, "settings", self.settings)


def _put_question(event: ToolCallEvent, reason: str | None, decide: Any) -> None:
    """``tool.ask``: the question is put once every handler has run (one per plugin and decider)."""
    question = (event._plugin, reason, decide)
    questions = event._questions
    if not any(q[0] == question[0] and q[2] is decide for q in questions):
        questions.append(question)


def _refused(entry: dict[str, Any], plugin: str, reason: str | None) -> str:
    """Record a person's refusal of a tool call; what the model is shown."""
    entry["refused"] = plugin
    if reason:
        entry["refuse_reason"] = reason
    return "The person did not allow this call." + (f" Reason: {reason}" if reason else "")
