"""A conversation's state, rebuilt from its records.

Records are appended, never rewritten, so the state is a fold over them:
turns (a tree by ``parent``), their states, the replies and tool runs a
waiting turn already paid for, approvals and answers, and entries. Kinds and
keys this version does not know are skipped, so newer writers do not break
older readers.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping

#: The record format version every record carries.
FORMAT = 1

DONE, FAILED, STOPPED, WAITING, RUNNING = "done", "failed", "stopped", "waiting", "running"
#: A running turn whose owner is gone (its lease expired); it can be resumed or abandoned.
INTERRUPTED = "interrupted"
#: A waiting or interrupted turn given up on: it ended, and it is never a parent.
ABANDONED = "abandoned"
#: The states a turn leaves only by being resumed (or abandoned): the branch waits on it.
HELD = (WAITING, INTERRUPTED)


class TurnData:
    """What the records say of one turn."""

    __slots__ = (
        "id", "parent", "inputs", "outputs", "state", "order", "changes", "context", "shown",
        "without", "sections", "approvals", "answers", "replies", "tools", "error", "at", "resumes", "fork",
        "waited_with", "claim", "lease", "why", "call", "ran_with", "waits",
    )

    def __init__(self, record: Mapping[str, Any], order: int) -> None:
        self.id: str = record["turn"]
        self.parent: str | None = record.get("parent")
        self.inputs: dict[str, Any] = dict(record.get("inputs") or {})
        self.outputs: dict[str, Any] = {}
        self.state: str = RUNNING
        self.order = order
        self.changes: list[dict[str, Any]] = list(record.get("changes") or [])
        self.context: dict[str, Any] | None = record.get("context")
        #: Ids of the earlier turns shown, oldest first (after the rule and the context hooks).
        self.shown: list[str] = list(record.get("shown") or [])
        self.without: dict[str, list[str]] = dict(record.get("without") or {})
        self.sections: list[str] = list(record.get("sections") or [])
        self.approvals: list[dict[str, Any]] = []
        self.answers: dict[str, tuple[bool, str | None]] = {}
        self.replies: list[dict[str, Any]] = []
        self.tools: dict[str, dict[str, Any]] = {}
        self.error: dict[str, Any] | None = None
        self.at: str | None = record.get("at")
        self.resumes = 0
        #: The first turn of a branch made with ``continue_from``: views that follow the
        #: conversation forward never follow into it.
        self.fork: bool = bool(record.get("fork"))
        #: What the turn ran with when it waited: ``{"approve": rule, "plugins": [names]}``.
        self.waited_with: dict[str, Any] = {}
        #: The claim of the process that runs it now (see `functai.conversations.leases`) and its lease.
        self.claim: str | None = record.get("claim")
        self.lease: dict[str, Any] | None = _lease(record)
        #: Why the turn was interrupted (its owner was gone), when it was.
        self.why: str | None = None
        #: The id of the turn's own call record (one record, however often the turn waits).
        self.call: str | None = record.get("call")
        #: What the turn started with: ``{"approve": rule, "plugins": [names]}`` (empty before leases).
        self.ran_with: dict[str, Any] = dict(record.get("ran_with") or {})
        #: Each wait: ``{"approvals", "at", "started"}``; answers are in ``answers``/``answered``.
        self.waits: list[dict[str, Any]] = []


def _lease(record: Mapping[str, Any]) -> dict[str, Any] | None:
    if "owner" not in record:
        return None
    return {"owner": record.get("owner"), "t": record.get("t"), "ttl": record.get("ttl")}


class History:
    """The fold of a conversation's records; `apply` takes each new one."""

    def __init__(self) -> None:
        #: Held while records are read and applied, so threads sharing a view apply each once.
        self.lock = threading.RLock()
        self.count = 0
        self.header: dict[str, Any] | None = None
        self.turns: dict[str, TurnData] = {}
        self.order: list[str] = []
        self.children: dict[str | None, list[str]] = {}
        self.entries: list[dict[str, Any]] = []
        #: Ids of the turns in state running, for finding those whose owner is gone.
        self.running: set[str] = set()
        #: The answers' details by turn and key: ``{"allow", "reason", "by", "at"}``.
        self.answered: dict[str, dict[str, dict[str, Any]]] = {}

    def apply_all(self, records: Iterable[Mapping[str, Any]]) -> None:
        for record in records:
            self.apply(record)

    def apply(self, record: Mapping[str, Any]) -> None:
        self.count += 1
        if record.get("functai_conversation") != FORMAT:
            return  # a format this version does not read
        kind = record.get("kind")
        if kind == "conversation":
            self.header = dict(record)
            return
        if kind == "entry":
            self.entries.append(
                {"plugin": record.get("plugin"), "kind": record.get("entry"), "turn": record.get("turn"),
                 "data": record.get("data"), "at": record.get("at")}
            )
            return
        if kind == "turn":
            turn = TurnData(record, len(self.order))
            self.turns[turn.id] = turn
            self.order.append(turn.id)
            self.children.setdefault(turn.parent, []).append(turn.id)
            self.running.add(turn.id)
            return
        turn = self.turns.get(record.get("turn", ""))
        if turn is None:
            return
        if kind == "reply":
            turn.replies.append(dict(record.get("reply") or {}))
        elif kind == "tool":
            turn.tools[record["site"]] = dict(record)
        elif kind == "wait":
            self._state(turn, WAITING)
            turn.approvals = [dict(a) for a in record.get("approvals") or []]
            turn.waited_with = {"approve": record.get("approve"), "plugins": list(record.get("plugins") or [])}
            turn.waits.append({"approvals": turn.approvals, "at": record.get("at"), "started": record.get("started")})
        elif kind == "answer":
            turn.answers[record["key"]] = (bool(record.get("allow")), record.get("reason"))
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
            self._state(turn, record.get("state", FAILED))
            turn.outputs = dict(record.get("outputs") or {})
            turn.error = record.get("error")

    def _state(self, turn: TurnData, state: str) -> None:
        turn.state = state
        if state == RUNNING:
            self.running.add(turn.id)
        else:
            self.running.discard(turn.id)

    # -- branches -------------------------------------------------------------

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
