"""A conversation's state, rebuilt from its records.

Records are appended, never rewritten, so the state is a fold over them.
Kinds and keys this version does not know are skipped, so newer writers do
not break older readers; a damaged record is skipped and noted in
``damage`` (its index and why). What a turn was shown is recorded small:
``{"last": n}`` (the ``n`` newest done turns of the branch it continues),
with ``"drop": [ids]`` for turns a plugin left out, or an explicit list of ids.
"""

from __future__ import annotations

import threading
from itertools import chain, islice
from sys import maxsize
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from .._calls.approvals import digest, edited_digest
from .._models.request import Frozen
from . import rows
from .checks import END_STATES, QUICK, problem

from .turndata import (  # noqa: F401  (the names the fold's users import from here)
    ABANDONED as ABANDONED,
    DONE as DONE,
    FAILED as FAILED,
    FORMAT as FORMAT,
    HELD as HELD,
    INTERRUPTED as INTERRUPTED,
    LATE_ANSWER as LATE_ANSWER,
    NOTHING as NOTHING,
    RUNNING as RUNNING,
    STOPPED as STOPPED,
    WAITING as WAITING,
    TurnData as TurnData,
    lease_of as lease_of,
)

#: Turns that ended without an answer: never parents, so their entries belong to their parent's branches.
_DEAD_ENDS = frozenset({FAILED, STOPPED, ABANDONED})


class History:
    """The fold of a conversation's records; `apply_all` takes new ones."""

    def __init__(self) -> None:
        #: Held while records are read and applied, so threads sharing a view apply each once.
        self.lock = threading.RLock()
        self.count = 0
        self.header: dict[str, Any] | None = None
        self.turns: dict[str, TurnData] = {}
        self.order: list[str] = []
        self.entries: list[dict[str, Any]] = []
        #: The same entries by (plugin, kind): a plugin reading its own at every request never scans the rest.
        self._entries_of: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
        #: The newest entry by (plugin, kind, turn).
        self._latest_at: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
        #: Ids of the turns in state running, for finding those whose owner is gone.
        self.running: set[str] = set()
        #: How many turns ended without an answer: a branch's entries are those of such turns off it too.
        self.dead_ends = 0
        #: The turn made under each key a turn was sent with (``chat(..., key=...)``).
        self.keyed: dict[str, str] = {}
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
        """The turns continuing each turn (``None``: the first turns of branches), oldest first;
        built when asked for (only the command line's tree asks)."""
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
            self.apply_all((record,))
        self.count = count

    def reset(self) -> None:
        """Forget everything read (keeping the lock), to read it all again."""
        lock = self.lock
        self.__init__()  # type: ignore[misc]
        self.lock = lock

    def apply_all(self, items: Iterable[Any], whole: Callable[[int], dict[str, Any]] | None = None) -> None:
        """Apply records in order from the next place: dicts (`Store.read`), or rows (`Store.read_rows`)
        with ``whole`` giving the record at a position of ``items``.

        A sound ``turn``, plain ``reply`` or ``end`` row is applied as it is (an open meets little
        else); any other record whole, checked first (`problem`) so that damage is named.
        """
        turn_row, reply_row, end_row = rows.ROWS.get("turn"), rows.ROWS.get("reply"), rows.ROWS.get("end")
        no_list, no_dict, plain_reply = rows.EMPTY_LIST, rows.EMPTY_DICT, rows.PLAIN_REPLY.fullmatch
        turns, order, damage = self.turns, self.order, self.damage
        start = self.count
        #: Turns made from rows that have not ended, by record position: a row holds no lease,
        #: so a turn still running gets it from its whole record before anything reads it.
        pending: dict[str, int] = {}
        position = -1
        for position, item in enumerate(items):
            kind = type(item)
            if kind is turn_row:
                turn_id, parent_id, inputs, shown, context = (
                    item.turn, item.parent, item.inputs, item.shown, item.context)
                if (item.functai_conversation == FORMAT and type(turn_id) is str and turn_id
                        and (parent_id is None or type(parent_id) is str)
                        and (inputs is None or type(inputs) is dict) and (context is None or type(context) is dict)
                        and type(shown) is dict and len(shown) == 1 and type(shown.get("last")) is int
                        and 0 <= shown["last"] <= maxsize and item.changes in no_list and item.sections in no_list
                        and item.without in no_dict):
                    added = len(order)
                    note = self._add_turn(turn_id, parent_id, item)
                    if len(order) > added:
                        pending[turn_id] = position
                    if note is not None:
                        damage.append((start + position, note))
                    continue
            elif kind is reply_row:
                turn_id, raw = item.turn, item.reply
                if (item.functai_conversation == FORMAT and type(turn_id) is str and raw and plain_reply(raw)
                        and (turn := turns.get(turn_id)) is not None
                        and (item.n is None or item.n == len(turn._replies) + 1)):
                    turn._replies += (raw,)  # its JSON, decoded when asked for (`TurnData.replies`)
                    continue
            elif kind is end_row:
                turn_id, state, outputs, error = item.turn, item.state, item.outputs, item.error
                if (item.functai_conversation == FORMAT and type(turn_id) is str and type(state) is str
                        and state in END_STATES and (outputs is None or type(outputs) is dict)
                        and (error is None or type(error) is dict)
                        and (turn := turns.get(turn_id)) is not None and turn.state != DONE):
                    self._end(turn, state, outputs, error)
                    pending.pop(turn_id, None)
                    continue
            if pending:
                self._settle(pending, whole)  # type: ignore[arg-type]
            try:
                record = item if whole is None or kind is dict else whole(position)
            except (ValueError, RecursionError):  # a row its reader took, holding what no JSON reader here reads
                damage.append((start + position, "JSON this reader cannot read (a number too long, or nested too "
                                                 "deeply)"))
                continue
            reason = self._whole(record)
            if reason is not None:
                damage.append((start + position, reason))
        if pending:
            self._settle(pending, whole)  # type: ignore[arg-type]
        self.count = start + position + 1

    def _settle(self, pending: dict[str, int], whole: Callable[[int], dict[str, Any]]) -> None:
        for turn_id, position in pending.items():
            self.turns[turn_id].lease = lease_of(whole(position))
        pending.clear()

    def _whole(self, record: Any) -> str | None:
        """Apply a whole record; why it could not be used, if it could not."""
        if not isinstance(record, Mapping) or record.get("functai_conversation") != FORMAT:
            return None  # a format this version does not read
        reason = problem(record, _QUICK)
        return self._fold(record) if reason is None else reason

    def _fold(self, record: Mapping[str, Any]) -> str | None:
        """Apply one well-shaped record; why it could not be used, if it could not."""
        kind = record.get("kind")
        if kind == "conversation":
            if self.header is None:
                self.header = dict(record)
            return None
        if kind == "entry":
            entry = {"plugin": record.get("plugin"), "kind": record.get("entry"), "turn": record.get("turn"),
                     "data": record.get("data"), "at": record.get("at")}
            self.entries.append(entry)
            self._entries_of.setdefault((entry["plugin"], entry["kind"]), []).append(entry)
            self._latest_at[(entry["plugin"], entry["kind"], entry["turn"])] = entry
            return None
        if kind == "turn":
            return self._add_turn(record["turn"], record.get("parent"), record)
        turn = self.turns.get(record.get("turn", ""))
        if turn is None:
            if kind not in _TURN_KINDS or self.partial:  # newer writer's kind; a turn on another branch
                return None
            return f"turn {record.get('turn')!r} is unknown (its turn record is missing or damaged)"
        if turn.state == DONE and kind in ("wait", "resume", "end", "interrupt"):
            return f"turn {turn.id!r} already ended done, and a done turn never changes"
        if kind == "reply":
            n = record.get("n")
            if type(n) is int and n != len(turn._replies) + 1:  # a resumed turn reads its replies by their place
                return f"reply {n} of turn {turn.id!r} is not its next ({len(turn._replies) + 1}): a record repeated " \
                       "or out of place"
            turn._replies += (record["reply"],)
        elif kind == "tool":
            turn.tools = {**turn.tools, record["site"]: dict(record)}
        elif kind == "wait":
            edited = next((a for a in record.get("approvals") or [] if not _shows_asked(a)), None)
            if edited is not None:
                return (f"the approval {edited.get('key')!r} of turn {turn.id!r} shows another call than the one "
                        "asked (its input was changed): it is not put to anyone")
            self._state(turn, WAITING)
            turn.approvals = [dict(a) for a in record.get("approvals") or []]
            turn.waited_with = {"approve": record.get("approve"), "plugins": list(record.get("plugins") or [])}
            turn.waits = (*turn.waits,
                          {"approvals": turn.approvals, "at": record.get("at"), "started": record.get("started")})
        elif kind == "answer":
            if record["key"] in turn.answers:
                return None  # the first answer holds (a second one only an older writer records as an answer)
            if not _binds(record, turn.approvals):
                return (f"the answer to {record['key']!r} of turn {turn.id!r} approves another call than the one "
                        "asked (its digest was changed): the approval waits for an answer again")
            turn.answers = {**turn.answers, record["key"]: (bool(record.get("allow")), record.get("reason"))}
            detail = {"allow": bool(record.get("allow")), "reason": record.get("reason"), "by": record.get("by"),
                      "at": record.get("at")}
            for name in ("digest", "inputs", "extend"):  # what the answer approved (kept by writers that bind answers)
                if record.get(name) is not None:
                    detail[name] = record[name]
            self.answered.setdefault(turn.id, {})[record["key"]] = detail
        elif kind == "resume":
            self._state(turn, RUNNING)
            turn.resumes += 1
            turn.claim = record.get("claim")
            turn.lease = lease_of(record)
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
        self.dead_ends += state in _DEAD_ENDS and turn.state not in _DEAD_ENDS
        turn.state = state
        self.running.discard(turn.id)
        turn.lease = None  # only a running turn's owner is ever asked after
        turn.outputs = outputs or NOTHING
        turn.error = error
        turn.messages = None

    def _add_turn(self, turn_id: str, parent_id: str | None, record: Any) -> str | None:
        """Add a turn from its record (a dict, or a sound row); why it is damaged, if it is."""
        if turn_id in self.turns:
            return f"turn id {turn_id!r} is already used by an earlier turn"
        parent = note = None
        if parent_id is not None:
            parent = self.turns.get(parent_id)
            if parent is None and self.partial:
                return None  # a turn on a branch this history did not read
            if parent is None:
                # Parents are always written before their children, so this one's record was lost; keeping
                # the turn as the start of a branch keeps it and everything after it (and can never loop).
                note = (f"turn {turn_id!r} continues turn {parent_id!r}, which is not in the conversation "
                        "(its record is missing or damaged); it is kept as the first turn of a branch")
        if parent is None:
            turn = TurnData(turn_id, None, len(self.order), record)
            if parent_id is not None:
                turn.lost_parent = parent_id
        else:
            turn = TurnData(turn_id, parent_id, len(self.order), record, parent.base + (parent.state == DONE),
                            parent.forked)
        self.turns[turn_id] = turn
        self.order.append(turn_id)
        self.running.add(turn_id)
        key = record.get("key") if type(record) is dict else record.key
        if type(key) is str:
            turn.key = key
            self.keyed.setdefault(key, turn_id)  # the first turn made under a key is the one
        return note

    def _state(self, turn: TurnData, state: str) -> None:
        turn.state = state
        if state == RUNNING:
            self.running.add(turn.id)
        else:
            self.running.discard(turn.id)

    def done_count(self, turn_id: str | None) -> int:
        """How many done turns the branch ending at ``turn_id`` holds (it included)."""
        if turn_id is None:
            return 0
        turn = self.turns[turn_id]
        return turn.base + (turn.state == DONE)

    def _walk(self, turn_id: str | None) -> Iterator[str]:
        """``turn_id`` and its ancestors, newest first."""
        while turn_id is not None:
            yield turn_id
            turn_id = self.turns[turn_id].parent

    def _done_walk(self, turn_id: str | None) -> Iterator[str]:
        return (t for t in self._walk(turn_id) if self.turns[t].state == DONE)

    def branch(self, turn_id: str | None) -> list[str]:
        """The path from the root to ``turn_id``, oldest first (empty for None)."""
        return list(self._walk(turn_id))[::-1]

    def done_ancestors(self, turn_id: str | None, limit: int | None = None) -> list[str]:
        """Up to ``limit`` done turns ending at ``turn_id``, oldest first (walking parents only)."""
        return list(islice(self._done_walk(turn_id), limit))[::-1]

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

    def entry_turns(self, turn_id: str | None) -> frozenset[str]:
        """The turns whose entries belong to the branch ending at ``turn_id``: its own, and those of
        turns that ended without an answer (failed, stopped, abandoned) off it. Such a turn is never
        a parent, so what it kept — what it spent, say — would otherwise be on no branch at all."""
        on = set(self.branch(turn_id))
        ended = [t for t in self.turns.values() if t.state in _DEAD_ENDS and (t.parent is None or t.parent in on)]
        return frozenset(on.union(t.id for t in ended))

    def entries_on(self, on: frozenset[str] | None, plugin: str, kind: str) -> list[dict[str, Any]]:
        """A plugin's entries of ``kind`` kept at the turns ``on`` (`entry_turns`; None: every turn) or
        at none, oldest first."""
        return [_shown(e) for e in self._entries_of.get((plugin, kind), ())
                if on is None or e["turn"] is None or e["turn"] in on]

    def latest_on(self, tip: str | None, plugin: str, kind: str, where: str = "branch") -> dict[str, Any] | None:
        """The newest of ``entries_on(entry_turns(tip), plugin, kind)``, or None; ``where="all"``: of
        every turn's, ``"turn"``: of those kept at ``tip``. Looked for from the newest back, each turn
        placed by walking up from ``tip`` only as far as that turn, so a plugin reading its latest
        entry at every request pays for what came after it, not for the conversation's length."""
        if where == "turn":
            found = self._latest_at.get((plugin, kind, tip))
            return None if found is None else _shown(found)
        for entry in reversed(self._entries_of.get((plugin, kind), ())):
            if where == "all" or self._on_branch(entry["turn"], tip):
                return _shown(entry)
        return None

    def _on_branch(self, turn_id: str | None, tip: str | None) -> bool:
        """Whether an entry kept at ``turn_id`` is on the branch ending at ``tip`` (see `entry_turns`)."""
        turn = self.turns.get(turn_id) if turn_id is not None else None
        if turn is None:
            return turn_id is None
        if self._above(turn, tip):
            return True
        if turn.state not in _DEAD_ENDS:
            return False
        return turn.parent is None or self._above(self.turns[turn.parent], tip)

    def _above(self, turn: TurnData, tip: str | None) -> bool:
        """Whether ``turn`` is ``tip`` or one of its ancestors (a parent is always older than its child)."""
        walk = tip
        while walk is not None:
            if walk == turn.id:
                return True
            found = self.turns.get(walk)
            if found is None or found.order <= turn.order:
                return False
            walk = found.parent
        return False

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
        """The ``n`` newest done turns at ``parent`` as messages, extending the last run built when
        the branch only grew: a long conversation does not rebuild it every turn."""
        tail = self._tail
        if tail is not None and tail[0] == parent and tail[1] == n:
            return tail[2]
        result = None
        if tail is not None and n > tail[1]:
            newer: list[str] = []
            for turn_id in islice(self._walk(parent), 64):
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

#: The quick yes-answers a whole record gets before its fields are checked one by one.
_QUICK = QUICK

def _binds(answer: Mapping[str, Any], approvals: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an approval's recorded digest is the one its question asks (with its edit, if any).
    No writer records another; an answer that does was changed by hand, and no call can match it."""
    approved = answer.get("digest")
    asked = next((a for a in approvals if a.get("key") == answer["key"]), None) if approved is not None else None
    if asked is None or not answer.get("allow") or asked.get("digest") is None:
        return True
    try:
        return approved == edited_digest(asked, answer.get("inputs"))
    except (KeyError, TypeError, ValueError):  # a question edited by hand as well
        return False


def _shows_asked(approval: Mapping[str, Any]) -> bool:
    """Whether a tool call's approval shows the call its digest names: a person approves what they are
    shown, and the digest is what runs. No writer records another."""
    if approval.get("digest") is None or approval.get("kind") == "request":
        return True
    try:
        return bool(digest(approval["name"], approval["input"], approval.get("plugins") or []) == approval["digest"])
    except (KeyError, TypeError, ValueError):  # not a question's shape
        return False


#: Kinds that belong to a turn: a record of one for an unknown turn is damage.
_TURN_KINDS = frozenset({"reply", "tool", "wait", "answer", LATE_ANSWER, "resume", "end", "lease", "interrupt"})


def _render(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    from .._calls import layout

    messages: list[dict[str, Any]] = []
    if inputs:
        messages.append({"role": "user", "content": layout.inputs_message(inputs)})
    if outputs:
        value = outputs["output"] if set(outputs) == {"output"} else outputs
        messages.append({"role": "assistant", "content": layout.render_value(value)})
    return messages


def _shown(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An entry as a plugin reads it (`entries_on`, `latest_on`): a copy, without its plugin and kind."""
    return {"turn": entry["turn"], "data": entry["data"], "at": entry["at"]}
