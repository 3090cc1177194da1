"""What a new turn is shown and starts with: ``turn_start`` and ``context`` hooks over the
conversation's rule, and the turn record that keeps the outcome (small: see `History.encode_shown`)."""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from .._calls.outputs import to_jsonable
from .._hooks.change import Change
from .._hooks.events import ContextEvent, TurnStartEvent, frozen, given, set_field, thawed
from .._hooks.fold import fold, refuse
from .._hooks.plugin import Plugin
from .._layers import resolve
from . import held
from .history import FORMAT, TurnData
from .scope import Chat, Memory
from .._stores.protocol import Store

__all__ = ["ShownTurn", "context_hooks", "outputs_of", "prepare", "record_place"]


class ShownTurn:
    """An earlier turn as a ``context`` handler sees it: its inputs and outputs read-only all the
    way down, as every event's data (what the history holds, shown to every later turn)."""

    __slots__ = ("id", "_turn", "without")

    def __init__(self, turn: TurnData, without: Sequence[str]) -> None:
        self.id = turn.id
        self._turn = turn
        self.without = tuple(without)

    @property
    def inputs(self) -> Mapping[str, Any]:
        return frozen(self._turn.inputs)  # type: ignore[no-any-return]

    @property
    def outputs(self) -> Mapping[str, Any]:
        return frozen(self._turn.outputs)  # type: ignore[no-any-return]

    @property
    def at(self) -> str | None:
        """When the turn started (ISO 8601): a branch's turns started one after another."""
        return self._turn.at

    def __repr__(self) -> str:
        return f"ShownTurn({self.id!r}, without={list(self.without)})"


def record_place(store: Store, conversation: str, index: int) -> str:
    """Where a store keeps record ``index``: ``<file>:<line>`` for a folder store."""
    where = getattr(store, "where", None)
    if callable(where):
        return str(where(conversation, index))
    return f"{store!r}, conversation {conversation!r}, record {index + 1}"


def outputs_of(value: Any) -> dict[str, Any]:
    """A turn's outputs by name: a record's fields, or ``{"output": value}``."""
    data = to_jsonable(value)
    if isinstance(data, dict) and not isinstance(value, dict):
        return data
    return {"output": data}


def value_of(outputs: Mapping[str, Any], tp: Any) -> Any:
    """A done turn's answer from its recorded outputs (`outputs_of`'s reverse), as a value of ``tp``:
    ``{"output": value}``, or a record's fields (a record with one field named ``output`` too)."""
    from .._calls.outputs.readers import read_value

    if set(outputs) == {"output"}:
        try:
            return read_value(outputs["output"], tp)
        except ValueError:
            pass
    return read_value(dict(outputs), tp)


def prepare(
    view: Chat, inputs: dict[str, Any], parent: str | None, turn_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run turn_start and context; the turn's record, and its inputs as Python values."""
    plan = resolve(view.program.own, view.layer).plan
    changes: list[dict[str, Any]] = []
    program = view.program

    handlers = plan.handlers["turn_start"]
    if handlers:
        event = TurnStartEvent(inputs=MappingProxyType(inputs), conversation=view.id, parent=parent, program=program)
        set_field(event, "_memory", Memory(view, parent))

        def apply_inputs(plugin: Plugin, change: Change, ev: TurnStartEvent) -> None:
            for name in change.inputs or {}:
                if name not in program.input_names:
                    raise refuse(plugin, "turn_start", "inputs",
                                 f"{name!r} is not an input of {program.name} ({', '.join(program.input_names)})")
            set_field(ev, "inputs", MappingProxyType({**given(ev, "inputs"), **thawed(change.inputs or {})}))

        fold("turn_start", handlers, event, changes, apply_inputs)
        inputs = dict(given(event, "inputs"))

    history = view._history
    limit = view.context.limit
    without: dict[str, list[str]] = {}
    sections: list[str] = []
    context: dict[str, Any] | None = None
    handlers = plan.handlers["context"]
    if handlers:  # walks parents only as far as the rule needs: the cost follows the branch
        picked = history.done_ancestors(parent, limit)
        kept, without, sections = context_hooks(view, handlers, picked, parent, changes)
        shown = history.encode_shown(parent, kept)
        context = {"without": without, "sections": sections}
    else:  # the rule alone: the newest n done turns of the branch, known without a walk
        total = history.done_count(parent)
        shown = {"last": total if limit is None else min(limit, total)}
    record: dict[str, Any] = {
        "functai_conversation": FORMAT, "kind": "turn", "turn": turn_id, "parent": parent,
        "inputs": to_jsonable(inputs), "changes": changes, "shown": shown, "without": without,
        "sections": sections, "at": held.now_text(), "call": os.urandom(8).hex(), "ran_with": view._ran_with(),
    }
    if context is not None:
        record["context"] = context
    return record, inputs


def context_hooks(
    view: Chat, handlers: Sequence[Any], picked: list[str], parent: str | None, changes: list[dict[str, Any]],
) -> tuple[list[str], dict[str, list[str]], list[str]]:
    history = view._history
    branch: list[str] = []  # the whole branch, walked only if a handler names turns outside the window
    state: dict[str, Any] = {"keep": list(picked), "without": {}}

    def whole_branch() -> list[str]:
        if not branch:
            branch.extend(history.done_ancestors(parent))
        return branch

    def turns() -> tuple[ShownTurn, ...]:
        return tuple(ShownTurn(history.turns[t], state["without"].get(t, ())) for t in state["keep"])

    event = ContextEvent(turns=turns(), sections=(), conversation=view.id, parent=parent, program=view.program)
    set_field(event, "_memory", Memory(view, parent))  # entries of the branch the turn continues

    def apply(plugin: Plugin, change: Change, ev: ContextEvent) -> None:
        if change.keep is not None:
            on_branch = set(whole_branch())
            for turn_id in change.keep:
                if turn_id not in on_branch:
                    raise refuse(plugin, "context", "keep", f"{turn_id!r} is not a done turn of this branch")
            state["keep"] = [t for t in branch if t in set(change.keep)]
            state["without"] = {t: names for t, names in state["without"].items() if t in state["keep"]}
        if change.without is not None:
            targets = change.without if isinstance(change.without, dict) else {t: change.without for t in state["keep"]}
            kept = set(state["keep"])
            for turn_id, names in targets.items():
                if turn_id not in kept:
                    if turn_id in whole_branch():
                        continue  # a turn of the branch no longer kept (an earlier keep dropped it)
                    raise refuse(plugin, "context", "without", f"{turn_id!r} is not a done turn of this branch")
                state["without"][turn_id] = sorted(set(state["without"].get(turn_id, ())) | set(names))
        if change.sections is not None:
            set_field(ev, "sections", ev.sections + change.sections)
        set_field(ev, "turns", turns())

    fold("context", handlers, event, changes, apply)
    return list(state["keep"]), {t: list(n) for t, n in state["without"].items() if n}, list(event.sections)
