"""Turns that hold their branch: waiting or interrupted ones, and how they end.

These need only a store and the history, not the conversation's function,
so ``functai resume --abandon`` works where that function cannot be imported.
"""

from __future__ import annotations

import random
import time
from datetime import datetime
from typing import Any, Iterator, Mapping, Sequence

from .._calls.approvals import edited_digest, named_key
from .._calls.outputs import to_jsonable
from .._calls.run import now_text as now_text  # also read as held.now_text (context.py; tests patch it)
from .._errors import FunctAIError, approval_answered
from . import leases, rows
from .history import ABANDONED, FORMAT, HELD, INTERRUPTED, LATE_ANSWER, WAITING, History, TurnData
from .._stores.protocol import Store, StoreConflict

#: How a record names an approve rule that is a function (it cannot be stored).
FUNCTION_RULE = "<function>"

#: How often a compare-and-set append is tried before giving up with ``store-conflict``.
MAX_TRIES = 200


def attempts(what: str, conversation: str) -> Iterator[int]:
    """A bounded retry loop (``for _ in attempts(...): ...; break``) that backs off at random
    after a few conflicts, so colliding writers spread out; then ``store-conflict``."""
    for attempt in range(MAX_TRIES):
        if attempt >= 3:
            time.sleep(random.uniform(0, min(0.05, 0.001 * attempt)))
        yield attempt
    raise FunctAIError(
        f"could not {what} in conversation {conversation!r}: other writers appended first {MAX_TRIES} times "
        "in a row; try again when fewer processes write to it",
        code="store-conflict",
    )


def check_shrunk(conflict: StoreConflict, read: int, conversation: str) -> None:
    """A conflict is another writer's record, to read and retry, unless the store now holds fewer
    records than this view read: some were removed behind it, and no retry can ever match."""
    if conflict.count < read:
        raise FunctAIError(
            f"conversation {conversation!r} holds {conflict.count} records in its store, fewer than the {read} "
            "read here: records were removed from it (by hand, or a backup put back); open the conversation "
            "again to go on from what the store holds", code="store-shrunk")


def refresh(history: History, store: Store, conversation: str) -> None:
    """Apply what is new in the store (one thread at a time: each record once)."""
    read_rows = rows.row_reader(store)  # the built-in stores: records decoded only as far as the fold needs
    with history.lock:
        if read_rows is not None:
            history.apply_all(*read_rows(conversation, history.count))
        else:
            history.apply_all(store.read(conversation, history.count))


def _epoch(at: Any) -> float:
    try:
        return datetime.fromisoformat(str(at)).timestamp()
    except ValueError:
        return 0.0


def why_gone(turn: TurnData, now: float | None = None) -> str | None:
    """Why a running turn's owner is gone, or None while it may still run."""
    lease = turn.lease
    if lease is None:  # written before leases: it expires like one, from the turn's start
        lease = {"owner": {}, "t": _epoch(turn.at), "ttl": leases.TTL}
    return leases.expired(lease, turn.claim, time.time() if now is None else now)


def reap(history: History, store: Store, conversation: str) -> list[str]:
    """Mark running turns whose owner is gone ``interrupted``; their ids."""
    if not history.running:
        return []
    marked = []
    now = time.time()
    for turn_id in sorted(history.running):
        turn = history.turns[turn_id]
        why = why_gone(turn, now)
        if why is None:
            continue
        # No compare-and-set: the record names the claim it ends, so a resume meanwhile wins.
        store.append(conversation, [{"functai_conversation": FORMAT, "kind": "interrupt", "turn": turn_id,
                                     "claim": turn.claim, "why": why, "at": now_text()}], sync=True)
        marked.append(turn_id)
    if marked:
        refresh(history, store, conversation)
    return marked


def lost(conversation: str, turn_id: str | None, turn: TurnData | None) -> FunctAIError:
    """A running turn this process no longer holds: its lease expired while the process was paused
    (stopped, in a debugger, a suspended machine), and another marked it interrupted or resumed it."""
    state = "missing" if turn is None else turn.state
    return FunctAIError(
        f"turn {turn_id!r} of conversation {conversation!r} is no longer held by this process (it is {state} "
        "now): its lease expired while the process was paused, so another process took it on; nothing more of "
        "it runs or is written here", code="turn-lost")


def not_held(turn_id: str, turn: TurnData | None, doing: str) -> FunctAIError:
    state = "missing" if turn is None else turn.state
    return FunctAIError(
        f"turn {turn_id!r} is {state}; only a waiting or interrupted turn can be {doing}",
        code="turn-not-waiting",
    )


def abandon(history: History, store: Store, conversation: str, turn_id: str, *,
            reason: str | None = None, by: str | None = None) -> None:
    """End a waiting or interrupted turn as ``abandoned``: nothing of it runs again, and
    the branch is free (the next turn continues from the last done one)."""
    for _ in attempts("abandon the turn", conversation):
        refresh(history, store, conversation)
        reap(history, store, conversation)
        count = history.count  # before the turn is read: a thread sharing the history may refresh it meanwhile
        turn = history.turns.get(turn_id)
        if turn is None or turn.state not in HELD:
            raise not_held(turn_id, turn, "abandoned")
        record = {"functai_conversation": FORMAT, "kind": "end", "turn": turn_id, "state": ABANDONED,
                  "outputs": {}, "was": turn.state, "reason": reason, "by": by, "at": now_text()}
        try:  # compare-and-set: never abandon a turn another process (or thread) just resumed
            store.append(conversation, [record], expect=count, sync=True)
        except StoreConflict as conflict:
            check_shrunk(conflict, count, conversation)
            continue
        break
    refresh(history, store, conversation)


def answer(history: History, store: Store, conversation: str, turn_id: str,
           approval: Mapping[str, Any] | str | None, *, allow: bool, reason: str | None, by: str | None,
           inputs: Mapping[str, Any] | None = None, extend: float | None = None) -> list[str]:
    """Record a person's answer to a waiting turn's approvals (all of them, or the one named);
    the keys answered now (none when each was already answered this way).

    Each answer keeps the digest of what it approves (with ``inputs``, an edit, the edited call's);
    an approval of a question a ``request`` handler asked keeps the extension it grants (``extend``,
    else the one the question offered).
    The first answer holds; a contrary one is refused (``approval-answered``) and kept as a
    ``late_answer`` record. Check and write are one compare-and-set, so of two answering at
    once exactly one holds and the other is told.
    """
    for _ in attempts("answer the turn", conversation):
        refresh(history, store, conversation)
        count = history.count  # before the turn and its answers are read: what the write is checked against
        turn = history.turns.get(turn_id)
        if turn is None or turn.state != WAITING:
            raise FunctAIError(f"turn {turn_id!r} is not waiting", code="turn-not-waiting")
        keys = [a["key"] for a in turn.approvals]
        if approval is not None:
            key = named_key(approval)
            if key not in keys:
                raise FunctAIError(f"turn {turn_id!r} does not wait for {key!r}; it waits for {keys}",
                                   code="turn-not-waiting")
            keys = [key]
        given = history.answered.get(turn_id, {})
        edit = to_jsonable(dict(inputs)) if inputs else None
        # Another answer: the other verdict, or an approval of another call (an edit, or none where one was made).
        asked = {a["key"]: a for a in turn.approvals}
        grants = {key: _grant(asked[key], extend) for key in keys} if allow else {}
        contrary = [key for key in keys if key in given
                    and (given[key]["allow"] != allow
                         or (allow and (given[key].get("inputs") != edit or given[key].get("extend") != grants[key])))]
        kind = LATE_ANSWER if contrary else "answer"
        at = now_text()
        records = []
        for key in contrary or [k for k in keys if k not in given]:
            record = {"functai_conversation": FORMAT, "kind": kind, "turn": turn_id, "key": key, "allow": allow,
                      "reason": reason, "by": by, "at": at}
            approved = edited_digest(asked[key], inputs) if allow else None
            if approved is not None:
                record["digest"] = approved
            if edit:
                record["inputs"] = edit
            if grants.get(key) is not None:
                record["extend"] = grants[key]
            records.append(record)
        if not records:
            return []  # every one already answered this way: the first answers hold as they are
        try:
            store.append(conversation, records, expect=count, sync=True)
        except StoreConflict as conflict:
            check_shrunk(conflict, count, conversation)
            continue
        break
    refresh(history, store, conversation)
    if contrary:
        first = given[contrary[0]]
        raise approval_answered(
            contrary[0], first, allow, where=f" of turn {turn_id!r}",
            who=f"by {first.get('by') or 'someone who gave no name (by=)'}",
            after=" (it is kept in the store as a late answer); to change the outcome, abandon the turn and "
                  "send a new one",
        )
    return [record["key"] for record in records]


def _grant(question: Mapping[str, Any], extend: float | None) -> float | None:
    """The extension an approval of ``question`` grants: ``extend``, else what the question offered
    (only a ``request`` handler's question offers one)."""
    if question.get("kind") != "request":
        return None
    return question.get("extend") if extend is None else extend


def describe_rule(rule: Any) -> Any:
    """An approve rule as a record keeps it."""
    if callable(rule):
        return FUNCTION_RULE
    return list(rule) if isinstance(rule, (list, tuple)) else rule


def resume_care(turn: TurnData, turn_id: str, now: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """What a resumed turn runs with, never less care than it started with, given this
    process's ``{"approve": rule, "plugins": [names]}``.

    Returns ``(approve, also)``: the rule to set on the resuming layer (None: keep it) and
    the recorded rules the approval plugin checks too. Refuses ``resume-settings`` when the
    turn started with plugins, or an approve function, this process lacks.
    """
    started = turn.ran_with or turn.waited_with
    plugins = started.get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(name, str) for name in plugins):
        raise FunctAIError(f"turn {turn_id!r} cannot be resumed: its record names the plugins it started with as "
                           f"{plugins!r}, not a list of names (the record was changed); abandon it and send it again",
                           code="resume-settings")
    missing = [name for name in plugins if name not in now["plugins"]]
    if missing:
        raise FunctAIError(
            f"turn {turn_id!r} started with the plugins {missing}, which this process does not run "
            "(not set, or disabled); resume it where they are set (open the conversation with the same plugins)",
            code="resume-settings",
        )
    rule, current = started.get("approve"), now["approve"]
    if rule is None or rule == current:
        return None, ()
    if rule == FUNCTION_RULE:
        if current == FUNCTION_RULE:
            return None, ()  # the function given here decides what the one given there did
        raise FunctAIError(
            f"turn {turn_id!r} started under approve=<a function>; resume it where that approve function is set",
            code="resume-settings",
        )
    if current is None:
        return rule, ()
    if rule == "all":
        return None, ("all",) if current != "all" else ()
    return None, (rule,)


def check_rerun(rerun: Sequence[str] | None) -> tuple[str, ...]:
    if rerun is None:
        return ()
    if isinstance(rerun, str) or not all(isinstance(name, str) and name for name in rerun):
        raise TypeError(f"rerun must be a list of tool names, not {rerun!r}")
    return tuple(rerun)


def held_message(conversation: str, turn: TurnData) -> str:
    """Why a turn cannot be sent while ``turn`` holds the branch."""
    if turn.state == WAITING:
        return (f"conversation {conversation!r} waits for an answer on turn {turn.id!r}; answer it "
                "(turn.approve() or turn.deny(), then turn.resume()) before sending another")
    assert turn.state == INTERRUPTED
    return (f"turn {turn.id!r} of conversation {conversation!r} was interrupted ({turn.why}); resume it "
            "(turn.resume(), or functai resume) or abandon it (turn.abandon(), or functai resume --abandon) "
            "before sending another")
