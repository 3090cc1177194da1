"""A conversation's state, rebuilt from its records.

Records are appended, never rewritten, so the state is a fold over them:
turns (a tree by ``parent``), their states, the replies and tool runs a
waiting turn already paid for, approvals and answers, and entries. Kinds and
keys this version does not know are skipped, so newer writers do not break
older readers. A record whose shape is damaged is skipped too, and noted in
``damage`` (its index and why) so the reader can say which line it was.

What a turn was shown is recorded small: ``{"last": n}`` (the ``n`` newest
done turns of the branch it continues), with ``"drop": [ids]`` for turns a
plugin left out of that window, or an explicit list of ids when that is
shorter (and in records written before this form existed).
"""

from __future__ import annotations

import threading
from itertools import chain
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from ..models.request import Frozen
from .checks import END_STATES, problem, sound_reply

from .turndata import (  # noqa: F401  (the names the fold's users import from here)
    ABANDONED,
    DONE,
    FAILED,
    FORMAT,
    HELD,
    INTERRUPTED,
    LATE_ANSWER,
    NOTHING,
    RUNNING,
    STOPPED,
    WAITING,
    TurnData,
    _lease,
)


class History:
    """The fold of a conversation's records; `apply` takes each new one."""

    def __init__(self) -> None:
        #: Held while records are read and applied, so threads sharing a view apply each once.
        self.lock = threading.RLock()
        self.count = 0
        self.header: dict[str, Any] | None = None
        self.turns: dict[str, TurnData] = {}
        self.order: list[str] = []
        self.entries: list[dict[str, Any]] = []
        #: Ids of the turns in state running, for finding those whose owner is gone.
        self.running: set[str] = set()
        #: The answers' details by turn and key: ``{"allow", "reason", "by", "at"}``.
        self.answered: dict[str, dict[str, dict[str, Any]]] = {}
        #: Records that could not be used as written: ``(index, reason)``, index as the store counts.
        self.damage: list[tuple[int, str]] = []
        #: The last run of prior messages built, ``(parent, n, messages)``: the next turn extends it.
        self._tail: tuple[str | None, int, tuple[Mapping[str, Any], ...]] | None = None
        #: Only one branch was read (`load_branch`): records of turns elsewhere are not damage.
        self.partial = False
        self._children: tuple[int, dict[str | None, list[str]]] | None = None

    @property
    def children(self) -> dict[str | None, list[str]]:
        """The turns continuing each turn (``None``: the first turns of branches), oldest first.

        Built when first asked for (only the command line's tree asks), again once turns were added."""
        known = self._children
        if known is not None and known[0] == len(self.order):
            return known[1]
        found: dict[str | None, list[str]] = {}
        turns = self.turns
        for turn_id in self.order:
            found.setdefault(turns[turn_id].parent, []).append(turn_id)
        self._children = (len(self.order), found)
        return found

    def load_branch(self, records: Iterable[tuple[int, Mapping[str, Any]]], count: int) -> None:
        """Apply a branch's records, each at its place in the store; then go on from ``count``."""
        self.partial = True
        for position, record in records:
            self.count = position
            self.apply(record)
        self.count = count

    def reset(self) -> None:
        """Forget everything read (keeping the lock), to read it all again."""
        lock = self.lock
        self.__init__()  # type: ignore[misc]
        self.lock = lock

    def apply_all(self, records: Iterable[Mapping[str, Any]]) -> None:
        quick = {kind: method.__get__(self) for kind, method in _QUICK.items()}
        apply = self.apply
        for record in records:  # `apply`, with the quick path written out: a long open runs it per record
            if type(record) is dict and record.get("functai_conversation") == FORMAT:
                try:
                    handler = quick.get(record.get("kind"))
                except TypeError:  # a kind that is not even hashable: damage, said by `apply`
                    handler = None
                if handler is not None and handler(record):
                    self.count += 1
                    continue
            apply(record)

    def apply(self, record: Mapping[str, Any]) -> None:
        index = self.count
        self.count = index + 1
        if type(record) is dict:
            if record.get("functai_conversation") != FORMAT:
                return  # a format this version does not read
            quick = _QUICK.get(record.get("kind")) if type(record.get("kind")) is str else None
            if quick is not None and quick(self, record):
                return  # the commonest records, sound, applied without the checks that name what is wrong
        elif not isinstance(record, Mapping) or record.get("functai_conversation") != FORMAT:
            return
        reason = problem(record)
        if reason is None:
            reason = self._fold(record)
        if reason is not None:
            self.damage.append((index, reason))

    # -- the commonest records: sound ones applied at once, others (False) checked in full ------

    def _quick_turn(self, record: dict[str, Any]) -> bool:
        get = record.get
        turn_id, parent_id, inputs, shown, context = (
            get("turn"), get("parent"), get("inputs"), get("shown"), get("context"))
        if (type(turn_id) is not str or not turn_id or turn_id in self.turns
                or (inputs is not None and type(inputs) is not dict)
                or (context is not None and type(context) is not dict)
                or type(shown) is not dict or len(shown) != 1 or type(shown.get("last")) is not int
                or shown["last"] < 0 or get("changes") or get("without") or get("sections")):
            return False
        if parent_id is None:
            parent = None
        elif type(parent_id) is not str or (parent := self.turns.get(parent_id)) is None:
            return False
        turn = TurnData(record, len(self.order))
        if parent is not None:
            turn.base = parent.base + (parent.state == DONE)
            turn.forked = turn.fork or parent.forked
        self.turns[turn_id] = turn
        self.order.append(turn_id)
        self.running.add(turn_id)
        return True

    def _quick_reply(self, record: dict[str, Any]) -> bool:
        turn_id, reply = record.get("turn"), record.get("reply")
        if type(turn_id) is not str or type(reply) is not dict:
            return False
        get = reply.get
        if ((get("tool_calls", ()) == [] or "tool_calls" not in reply)
                and "refusal" not in reply and "reasoning" not in reply):  # a plain final answer: a few scalars
            text, usage, finish = get("text"), get("usage"), get("finish_reason")
            if ((text is not None and type(text) is not str) or (usage and type(usage) is not dict)
                    or (finish is not None and type(finish) is not str)):
                return False
        elif not sound_reply(reply):
            return False
        turn = self.turns.get(turn_id)
        if turn is None:
            return False
        turn._replies = (*turn._replies, reply)
        return True

    def _quick_end(self, record: dict[str, Any]) -> bool:
        get = record.get
        turn_id, state, outputs, error = get("turn"), get("state"), get("outputs"), get("error")
        if (type(turn_id) is not str or type(state) is not str or state not in END_STATES
                or (outputs is not None and type(outputs) is not dict)
                or (error is not None and type(error) is not dict)):
            return False
        turn = self.turns.get(turn_id)
        if turn is None or turn.state == DONE:
            return False
        self._end(turn, state, outputs, error)
        return True

    # -- any record ---------------------------------------------------------------------------

    def _fold(self, record: Mapping[str, Any]) -> str | None:
        """Apply one well-shaped record; why it could not be used, if it could not."""
        kind = record.get("kind")
        if kind == "conversation":
            if self.header is None:
                self.header = dict(record)
            return None
        if kind == "entry":
            self.entries.append(
                {"plugin": record.get("plugin"), "kind": record.get("entry"), "turn": record.get("turn"),
                 "data": record.get("data"), "at": record.get("at")}
            )
            return None
        if kind == "turn":
            return self._add_turn(record)
        turn = self.turns.get(record.get("turn", ""))
        if turn is None:
            if kind not in _TURN_KINDS or self.partial:  # newer writer's kind; a turn on another branch
                return None  # a kind from a newer writer
            return f"turn {record.get('turn')!r} is unknown (its turn record is missing or damaged)"
        turn.ready()  # a turn an open made from a row: all its fields, before one changes
        if turn.state == DONE and kind in ("wait", "resume", "end", "interrupt"):
            return f"turn {turn.id!r} already ended done, and a done turn never changes"
        if kind == "reply":
            turn.replies = (*turn.replies, dict(record.get("reply") or {}))
        elif kind == "tool":
            turn.tools = {**turn.tools, record["site"]: dict(record)}
        elif kind == "wait":
            self._state(turn, WAITING)
            turn.approvals = [dict(a) for a in record.get("approvals") or []]
            turn.waited_with = {"approve": record.get("approve"), "plugins": list(record.get("plugins") or [])}
            turn.waits = (*turn.waits,
                          {"approvals": turn.approvals, "at": record.get("at"), "started": record.get("started")})
        elif kind == "answer":
            if record["key"] in turn.answers:
                return None  # the first answer holds (a second one only an older writer records as an answer)
            turn.answers = {**turn.answers, record["key"]: (bool(record.get("allow")), record.get("reason"))}
            self.answered.setdefault(turn.id, {})[record["key"]] = {
                "allow": bool(record.get("allow")), "reason": record.get("reason"), "by": record.get("by"),
                "at": record.get("at")}
        elif kind == "resume":
            self._state(turn, RUNNING)
            turn.resumes += 1
            turn.claim = record.get("claim")
            turn.lease = _lease(record)
        elif kind == "lease":
            if turn.state == RUNNING and turn.claim == record.get("claim") and turn.lease is not None:
                turn.lease["t"] = record.get("t")
        elif kind == "interrupt":
            # Names the claim it ends: a stale interrupt never touches a turn resumed since.
            if turn.state == RUNNING and turn.claim == record.get("claim"):
                self._state(turn, INTERRUPTED)
                turn.why = record.get("why")
        elif kind == "end":
            self._end(turn, record.get("state", FAILED), record.get("outputs"), record.get("error"))
        return None

    def _end(self, turn: TurnData, state: str, outputs: dict[str, Any] | None, error: dict[str, Any] | None) -> None:
        turn.state = state
        self.running.discard(turn.id)
        turn.lease = None  # only a running turn's owner is ever asked after
        turn.outputs = outputs or NOTHING
        turn.error = error
        turn.messages = None

    def _add_turn(self, record: Mapping[str, Any]) -> str | None:
        turn = TurnData(record, len(self.order))
        if turn.id in self.turns:
            return f"turn id {turn.id!r} is already used by an earlier turn"
        note = None
        parent = self.turns.get(turn.parent) if turn.parent is not None else None
        if turn.parent is not None and parent is None and self.partial:
            return None  # a turn on a branch this history did not read
        if turn.parent is not None and parent is None:
            # Parents are always written before their children, so this one's record was lost; keeping
            # the turn as the start of a branch keeps it and everything after it (and can never loop).
            note = (f"turn {turn.id!r} continues turn {turn.parent!r}, which is not in the conversation "
                    "(its record is missing or damaged); it is kept as the first turn of a branch")
            turn.lost_parent, turn.parent = turn.parent, None
        if parent is not None:
            turn.base = self.done_count(parent.id)
            turn.forked = turn.fork or parent.forked
        self.turns[turn.id] = turn
        self.order.append(turn.id)
        self.running.add(turn.id)
        return note

    def _state(self, turn: TurnData, state: str) -> None:
        turn.state = state
        if state == RUNNING:
            self.running.add(turn.id)
        else:
            self.running.discard(turn.id)

    # -- branches -------------------------------------------------------------

    def done_count(self, turn_id: str | None) -> int:
        """How many done turns the branch ending at ``turn_id`` holds (it included)."""
        if turn_id is None:
            return 0
        turn = self.turns[turn_id]
        return turn.base + (turn.state == DONE)

    def branch(self, turn_id: str | None) -> list[str]:
        """The path from the root to ``turn_id``, oldest first (empty for None)."""
        path: list[str] = []
        while turn_id is not None:
            path.append(turn_id)
            turn_id = self.turns[turn_id].parent
        path.reverse()
        return path

    def done_ancestors(self, turn_id: str | None, limit: int | None = None) -> list[str]:
        """Up to ``limit`` done turns ending at ``turn_id``, oldest first.

        Walks parents only, so it costs in proportion to what it returns,
        not to the whole conversation.
        """
        found: list[str] = []
        while turn_id is not None and (limit is None or len(found) < limit):
            turn = self.turns[turn_id]
            if turn.state == DONE:
                found.append(turn_id)
            turn_id = turn.parent
        found.reverse()
        return found

    def newest_below(self, turn_id: str | None, *, done: bool = True) -> str | None:
        """The newest (done, unless ``done=False``) turn at or below ``turn_id``
        (anywhere, for None), not inside a branch forked off with ``continue_from``."""
        floor = -1 if turn_id is None else self.turns[turn_id].order
        for candidate in reversed(self.order[floor + 1 :]):
            if done and self.turns[candidate].state != DONE:
                continue
            if turn_id is None:  # anywhere: any turn whose branch was never forked off
                if not self.turns[candidate].forked:
                    return candidate
                continue
            walk: str | None = candidate
            while walk is not None and walk != turn_id and self.turns[walk].order > floor:
                if self.turns[walk].fork:
                    break
                walk = self.turns[walk].parent
            if walk == turn_id:
                return candidate
        if turn_id is not None and (not done or self.turns[turn_id].state == DONE):
            return turn_id
        return None

    def entries_on(self, branch: Iterable[str], plugin: str, kind: str) -> list[dict[str, Any]]:
        """A plugin's entries of ``kind`` that belong to the branch, oldest first."""
        on = set(branch)
        return [
            {"turn": e["turn"], "data": e["data"], "at": e["at"]}
            for e in self.entries
            if e["plugin"] == plugin and e["kind"] == kind and (e["turn"] is None or e["turn"] in on)
        ]

    # -- what a turn was shown ----------------------------------------------------

    def encode_shown(self, parent: str | None, ids: Sequence[str]) -> dict[str, Any] | list[str]:
        """The small record of ``ids`` (done turns of the branch at ``parent``, oldest first)."""
        if not ids:
            return {"last": 0}
        wanted = set(ids)
        window: list[str] = []
        for turn_id in self._done_walk(parent):
            window.append(turn_id)
            if turn_id == ids[0]:
                break
        else:
            return list(ids)  # not all on the branch: only a list says exactly what it was
        drop = [t for t in reversed(window) if t not in wanted]
        if len(window) - len(drop) != len(ids) or len(drop) > len(ids):
            return list(ids)
        return {"last": len(window), "drop": drop} if drop else {"last": len(window)}

    def _done_walk(self, turn_id: str | None) -> Iterable[str]:
        while turn_id is not None:
            turn = self.turns[turn_id]
            if turn.state == DONE:
                yield turn_id
            turn_id = turn.parent

    def shown(self, turn: TurnData) -> tuple[list[str], str | None]:
        """The ids of the earlier turns ``turn`` was shown, oldest first, and why they are
        not exactly what it was shown (None when they are)."""
        raw = turn.shown
        if isinstance(raw, list):
            gone = [t for t in raw if t not in self.turns or self.turns[t].state != DONE]
            why = f"the turns it was shown ({', '.join(gone)}) are no longer in the conversation" if gone else None
            return [t for t in raw if t not in gone], why
        last = raw.get("last", 0)
        window = self.done_ancestors(turn.parent, last)
        drop = set(raw.get("drop", ()))
        why = None
        if len(window) != last:
            why = (f"{last - len(window)} of the {last} earlier turns it was shown are no longer in the "
                   "conversation (a record is missing or damaged)")
        return [t for t in window if t not in drop], why

    def turn_messages(self, turn_id: str) -> tuple[Mapping[str, Any], ...]:
        """A done turn as prior user/assistant messages (read-only, rendered once)."""
        turn = self.turns[turn_id]
        if turn.messages is None:
            turn.messages = Frozen(MappingProxyType(m) for m in _render(turn.inputs, turn.outputs))
        return turn.messages

    def shown_messages(self, turn: TurnData) -> tuple[Mapping[str, Any], ...]:
        """What ``turn`` was shown of its conversation, as prior messages."""
        raw = turn.shown
        if isinstance(raw, dict) and not raw.get("drop") and not turn.without:
            return self._tail_messages(turn.parent, raw.get("last", 0))
        ids, _ = self.shown(turn)
        return self.messages(ids, turn.without)

    def messages(self, ids: Sequence[str], without: Mapping[str, Sequence[str]]) -> tuple[Mapping[str, Any], ...]:
        """Turns as prior messages; fields left out by ``without`` are absent."""
        out: list[Mapping[str, Any]] = []
        for turn_id in ids:
            left_out = without.get(turn_id)
            if not left_out:
                out.extend(self.turn_messages(turn_id))
                continue
            turn = self.turns[turn_id]
            inputs = {k: v for k, v in turn.inputs.items() if k not in left_out}
            outputs = {k: v for k, v in turn.outputs.items() if k not in left_out}
            out.extend(MappingProxyType(m) for m in _render(inputs, outputs))
        return Frozen(out)

    def _tail_messages(self, parent: str | None, n: int) -> tuple[Mapping[str, Any], ...]:
        """The ``n`` newest done turns at ``parent`` as messages; extends the last run built
        when the branch only grew, so a long conversation does not rebuild it every turn."""
        tail = self._tail
        if tail is not None and tail[0] == parent and tail[1] == n:
            return tail[2]
        result = None
        if tail is not None and n > tail[1]:
            newer: list[str] = []
            for turn_id in self._ancestors(parent, 64):
                if turn_id == tail[0]:
                    if len(newer) + tail[1] == n:
                        result = Frozen(tail[2] + Frozen(chain.from_iterable(map(self.turn_messages, reversed(newer)))))
                    break
                if self.turns[turn_id].state == DONE:
                    newer.append(turn_id)
        if result is None:
            result = Frozen(chain.from_iterable(map(self.turn_messages, self.done_ancestors(parent, n))))
        self._tail = (parent, n, result)
        return result

    def _ancestors(self, turn_id: str | None, limit: int) -> Iterable[str]:
        while turn_id is not None and limit > 0:
            yield turn_id
            turn_id = self.turns[turn_id].parent
            limit -= 1


#: The records applied at once when sound (see `History.apply`).
_QUICK = {"turn": History._quick_turn, "reply": History._quick_reply, "end": History._quick_end}

#: Kinds that belong to a turn: a record of one for an unknown turn is damage.
_TURN_KINDS = frozenset({"reply", "tool", "wait", "answer", LATE_ANSWER, "resume", "end", "lease", "interrupt"})


def _render(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    from ..calls import layout

    messages: list[dict[str, Any]] = []
    if inputs:
        messages.append({"role": "user", "content": layout.inputs_message(inputs)})
    if outputs:
        value = outputs["output"] if set(outputs) == {"output"} else outputs
        messages.append({"role": "assistant", "content": layout.render_value(value)})
    return messages
