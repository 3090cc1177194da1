"""A running turn as the calls inside it see it (`functai._calls.scope`): a resumed
turn reuses the replies and tool runs it recorded, so it pays for nothing twice. Both it
and the turn's memory read their conversation as a `Chat`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, TypeVar

from .._calls.outputs import to_jsonable
from .._models.request import Client, Reply, Request
from .._models.toolcall import ToolCall
from . import held
from .history import History, TurnData
from .turndata import FORMAT, RUNNING
from .._stores.protocol import StoreConflict
from .._stores.opening import store_reference

if TYPE_CHECKING:
    from .._calls.program import Program
    from .._layers import Layer
    from .._stores.protocol import Store

__all__ = ["Chat", "Memory", "TurnScope", "waits_of"]

R = TypeVar("R")


class Chat(Protocol):
    """What a running turn, its memory and what a new turn is shown (`context`) use of their
    conversation: `functai._conversations.conversation.Conversation` is the one kind. Declared
    here, so neither this module nor `context` imports the view that runs them."""

    id: str
    program: Program
    layer: Layer
    store: Store
    context: Any
    _history: History

    def remember(self, plugin: str, kind: str, data: Any, turn: str | None = None) -> None: ...

    def _take_written(self, records: list[dict[str, Any]], expect: int) -> None: ...

    def _read_all(self) -> None: ...

    def _refresh(self, branch: str | None = None) -> None: ...

    def _append_entries(self, plugin: str, kept: list[tuple[str, Any]], turn: str, expect: int) -> None: ...

    def _ran_with(self) -> dict[str, Any]: ...


class Memory:
    """Entries for the events of one turn (kept at that turn, read on its branch)."""

    def __init__(self, chat: Chat, turn_id: str | None) -> None:
        self.chat = chat
        self.turn_id = turn_id
        #: The turns whose entries are the branch's (`History.entry_turns`), and the dead ends they were walked at.
        self._branch: tuple[int, frozenset[str]] | None = None

    def entries(self, plugin: str, kind: str, all_branches: bool = False) -> list[dict[str, Any]]:
        if all_branches:
            self.chat._read_all()  # a view opened at one branch (``at=``) reads the others too
        history = self.chat._history
        with history.lock:  # another thread of the view may be reading records into it
            if all_branches:
                return history.entries_on(None, plugin, kind)
            # a turn's branch never changes, but a turn may fail off it meanwhile: walked again only then
            if self._branch is None or self._branch[0] != history.dead_ends:
                self._branch = (history.dead_ends, history.entry_turns(self.turn_id))
            return history.entries_on(self._branch[1], plugin, kind)

    def latest(self, plugin: str, kind: str, all_branches: bool = False, this_turn: bool = False,
               ) -> dict[str, Any] | None:
        if all_branches:
            self.chat._read_all()
        where = "all" if all_branches else "turn" if this_turn else "branch"
        history = self.chat._history
        with history.lock:
            return history.latest_on(self.turn_id, plugin, kind, where)

    def remember(self, plugin: str, kind: str, data: Any) -> None:
        if self.turn_id is None:
            raise ValueError("remember() needs a turn")
        self.chat.remember(plugin, kind, data, self.turn_id)

    def atomically(self, plugin: str, decide: Callable[[], R], kept: list[tuple[str, Any]]) -> R:
        """``decide`` on the records this view has read; what it kept appended only if no record
        came after them (a compare-and-set), else decided again on what is there now. A decision
        that keeps nothing, or raises, stands once the view is known to have read everything."""
        if self.turn_id is None:
            raise ValueError("remember() needs a turn")
        chat = self.chat
        for _ in held.attempts("keep a plugin's entries", chat.id):
            expect = chat._history.count
            kept.clear()
            try:
                result = decide()
            except Exception:
                if self._behind(expect):
                    continue
                raise
            if not kept:
                if self._behind(expect):
                    continue
                return result
            try:
                chat._append_entries(plugin, kept, self.turn_id, expect)
            except StoreConflict as conflict:
                held.check_shrunk(conflict, expect, chat.id)
                chat._refresh()
                continue
            return result
        raise AssertionError("unreachable: attempts() raises when they run out")

    def _behind(self, count: int) -> bool:
        """Whether the store holds records this view had not read when it held ``count`` (read now)."""
        self.chat._refresh()
        return self.chat._history.count != count


class TurnScope:
    """A running turn, as the calls inside it see it (see `functai._calls.scope`)."""

    def __init__(self, chat: Chat, data: TurnData, claim: str, also_approve: tuple[Any, ...] = (),
                 rerun: tuple[str, ...] = ()) -> None:
        self.chat = chat
        #: This process's claim on the turn: a tool starts only while the turn is still held by it.
        self.claim = claim
        #: The record this view wrote last and has not taken in yet, with the count it was written at.
        self._written: tuple[int, dict[str, Any]] | None = None
        self.program = chat.program
        self.layer = chat.layer
        self.conversation: str | None = chat.id
        self.turn: str | None = data.id
        self.parent = data.parent
        self.store = store_reference(chat.store)
        self.waits = True
        self.records = True
        self.claimed = False
        self.inputs_checked = True  # by `Conversation._inputs` when sent, by `read_inputs` when resumed
        self.changes: Sequence[Mapping[str, Any]] = list(data.changes)
        self.sections: Sequence[str] = list(data.sections)
        self.history: Sequence[Mapping[str, Any]] = chat._history.shown_messages(data)
        #: What the turn's own call record keeps of it (as the turn record has it), so replay needs only the log.
        self.shown: Mapping[str, Any] | Sequence[str] | None = (
            dict(data.shown) if isinstance(data.shown, dict) else list(data.shown))
        self.without: Mapping[str, Any] = dict(data.without)
        self.memory = Memory(chat, data.id)
        self.data = data
        self.calls = 0
        self.requests = 0
        #: What the plugins did for the next reply kept (`keep`): ``{"acts": [changes], "answered": change}``.
        self.acts: dict[str, Any] | None = None
        #: The same, as recorded with the reply `replay` returned last (a resumed turn records them again).
        self.replayed: dict[str, Any] | None = None
        #: Approve rules the turn started with that this process's rule does not cover: checked too.
        self.also_approve: Sequence[Any] = also_approve
        self.rerun: Sequence[str] = rerun
        #: The turn's one call record: its id, when it first started, and what it waited for.
        self.call_id = data.call
        self.call_started = next((w["started"] for w in data.waits if w.get("started")), None) or (
            data.at if data.resumes else None)
        self.waited: Sequence[Mapping[str, Any]] = waits_of(chat._history, data)

    def begin_call(self) -> int:
        self.calls += 1
        return self.calls

    def next_request(self) -> tuple[int, bool]:
        return self.requests + 1, self.requests < len(self.data.replies)

    def complete(self, client: Client, request: Request) -> Reply:
        reply = self.replay(request)
        if reply is None:
            reply = client.complete(request)
            self.keep(reply)
        return reply

    def replay(self, request: Request) -> Reply | None:
        """The reply recorded for this request before the turn waited, or None (then ask the
        model and `keep` its reply)."""
        if self.requests < len(self.data.replies):  # paid for before the turn waited
            self.requests += 1
            saved = self.data.replies[self.requests - 1]
            self.replayed = {k: saved[k] for k in ("acts", "answered") if saved.get(k)} or None
            return Reply(
                text=saved.get("text"),
                tool_calls=tuple(
                    ToolCall(c["id"], c["name"], c.get("input") or {}) for c in saved.get("tool_calls", ())
                ),
                usage=saved.get("usage") or {},
                finish_reason=saved.get("finish_reason"),
                refusal=saved.get("refusal"),
                reasoning=saved.get("reasoning"),
            )
        return None

    def keep(self, reply: Reply) -> None:
        """Record a new reply, so a resumed turn never pays for it twice. Replies are counted as they
        are kept: a request that failed (a model error a plugin recovered from) takes no place."""
        self.requests += 1
        saved = {
            "text": reply.text,
            "tool_calls": [{"id": c.id, "name": c.name, "input": to_jsonable(dict(c.input))} for c in reply.tool_calls],
            "usage": dict(reply.usage),
            "finish_reason": reply.finish_reason,
        }
        for name in ("refusal", "reasoning"):  # kept as the call record keeps them (older lines have neither)
            if getattr(reply, name) is not None:
                saved[name] = getattr(reply, name)
        if self.acts:  # a plugin recovered from a failure, or answered instead of the model
            saved.update(to_jsonable(self.acts))
            self.acts = None
        self.write({"kind": "reply", "turn": self.turn, "n": self.requests, "reply": saved})

    def check_held(self) -> None:
        """``turn-lost`` unless the turn, as this view last read it, runs under this process's claim."""
        turn = self.chat._history.turns.get(self.turn or "")
        if turn is None or turn.state != RUNNING or turn.claim != self.claim:
            raise held.lost(self.chat.id, self.turn, turn)

    def write(self, record: dict[str, Any], sync: bool = False, now: bool = True) -> None:
        """Append a record of the turn while this process still holds it: only if nobody wrote since
        this view read (a compare-and-set), else read and look again. An owner paused past its lease
        (stopped, in a debugger) finds the turn interrupted or resumed elsewhere: ``turn-lost``.
        Not ``now``: the record is taken into this view at the next write (a tool starts sooner)."""
        chat = self.chat
        written = {"functai_conversation": FORMAT, **record}
        for _ in held.attempts("record the turn", chat.id):
            self._take_written()
            expect = chat._history.count
            self.check_held()
            try:
                chat.store.append(chat.id, [written], expect=expect, sync=sync)
            except StoreConflict as conflict:
                held.check_shrunk(conflict, expect, chat.id)
                chat._refresh()
                continue
            self._written = (expect, written)
            if now:
                self._take_written()
            return

    def _take_written(self) -> None:
        """Take the record this view wrote last into it (see `Chat._take_written`)."""
        if self._written is not None:
            (expect, written), self._written = self._written, None
            self.chat._take_written([written], expect)

    def recorded_tool(self, site: str) -> Mapping[str, Any] | None:
        return self.data.tools.get(site)

    def tool_started(self, site: str, entry: Mapping[str, Any], changes: Sequence[Mapping[str, Any]] = ()) -> None:
        record = {"kind": "tool", "turn": self.turn, "site": site, "state": "started",
                  "entry": to_jsonable(dict(entry))}
        if changes:
            record["changes"] = to_jsonable(list(changes))
        self.write(record, sync=True, now=False)  # a crash while it runs must be visible

    def tool_suspended(self, site: str, entry: Mapping[str, Any]) -> None:
        self.write({"kind": "tool", "turn": self.turn, "site": site, "state": "suspended",
                     "entry": to_jsonable(dict(entry))})

    def tool_done(self, site: str, entry: Mapping[str, Any], changes: Sequence[Mapping[str, Any]]) -> None:
        record = {"kind": "tool", "turn": self.turn, "site": site, "state": "done",
                  "entry": to_jsonable(dict(entry)), "changes": to_jsonable(list(changes)),
                  "after": {"calls": self.calls, "requests": self.requests}}
        self.write(record)

    def skip_past(self, recorded: Mapping[str, Any]) -> None:
        """A finished tool reused on resume: what calls and model requests inside it used (an AI
        function as a tool makes both) is skipped, so every later call and reply keeps its place."""
        after = recorded.get("after")
        if isinstance(after, dict):
            self.calls = max(self.calls, int(after.get("calls", 0)))
            self.requests = max(self.requests, int(after.get("requests", 0)))

    def answers(self, prefix: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        answers = self.data.answers
        if not answers:
            return found
        details = self.chat._history.answered.get(self.data.id, {})
        asked = {a["key"]: a for wait in self.data.waits for a in wait["approvals"]}
        for key, (allow, reason) in answers.items():
            if key == prefix or key.startswith(prefix + "."):
                detail = details.get(key, {})
                found[key] = {"allow": allow, "reason": reason, "digest": detail.get("digest"),
                              "inputs": detail.get("inputs"), "extend": detail.get("extend"), "by": detail.get("by"),
                              "approval": asked.get(key)}
        return found

    def refusal(self, site: str) -> tuple[str, str | None] | None:
        for approval in self.data.approvals:
            key = approval["key"]
            if key.startswith(site + ".") and self.data.answers.get(key, (True, None))[0] is False:
                return approval["plugin"], self.data.answers[key][1]
        return None


def waits_of(history: History, data: TurnData) -> list[dict[str, Any]]:
    """A turn's waits as its call record keeps them: approvals, when, and the answers given."""
    answered = history.answered.get(data.id, {})
    return [{"approvals": w["approvals"], "at": w["at"],
             "answers": {a["key"]: answered[a["key"]] for a in w["approvals"] if a["key"] in answered}}
            for w in data.waits]
