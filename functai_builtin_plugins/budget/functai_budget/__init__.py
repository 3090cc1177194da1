"""functai's budget plugin, written with functai's public API only.

A `request` handler checks, before each request is sent, what it could cost at
most (its prompt tokens, estimated high, plus the most its reply may hold)
against what is left; a `reply` handler adds what it really cost. When a
request would pass ``ask_at`` of the budget, a person is asked for more (the
turn waits, like an approval) or ``decide`` answers; past the whole budget the
call refuses ``budget-exceeded`` before anything is sent. Every decision is in
the call's record as this plugin's change, with a note saying why.

Each request's most cost is **reserved** in the same step as the check, so
calls running at once (threads, tasks, processes) cannot all pass one check: a
reply turns the reservation into what was really spent; a request that failed
before its reply began releases it.

Spend per call, turn, branch or conversation (all its branches) is kept as the
conversation's entries (kinds ``reserved``, ``spent``, ``released``,
``extended``, ``declined``), checked and reserved as one compare-and-set on the
store (`functai` events' ``atomically``), so it holds across processes; per
process, and outside a conversation, it is kept in memory under one lock.
Each entry carries the running books it leaves, which a check reads in one step;
per branch they are added up from the branch's entries (a turn that failed off
the branch, whose entries are the branch's too, kept books of its own).
"""

from __future__ import annotations

import json
import math
import os
import threading
from typing import Any, Callable, Mapping

from functai import Change, FunctAIError, Plugin

from .prices import DATED, PRICES, Price, find, table

__version__ = "0.1.0"
__all__ = ["DATED", "MAX_REPLY", "MIN_REPLY", "PRICES", "Price", "budget", "estimate"]

SCOPES = ("call", "turn", "branch", "conversation", "process")
#: The kinds of entry a budget keeps in a conversation; each carries the running ``books`` it leaves.
KINDS = ("reserved", "spent", "released", "extended", "declined")
_WHOSE = {"call": "this call", "turn": "this turn", "branch": "this branch", "conversation": "this conversation",
          "process": "this process"}

#: The most a reply may hold, in tokens, when its request sets no reply limit: the budget sets ``max_tokens`` to
#: it (less when less is left), so the most a request can cost is known before it is sent.
MAX_REPLY = 4096
#: The least such a reply is given before the budget asks for more rather than cut it shorter.
MIN_REPLY = 256

#: The settings that limit a reply's tokens: a provider reads one name or the other.
REPLY_LIMITS = ("max_tokens", "max_completion_tokens")

#: Bytes of a request counted as one token: low (English runs near four), so the estimate errs high.
BYTES_PER_TOKEN = 3


def _unpaid(error: str | None) -> bool:
    """Whether a call that ended with a request of its checked and not counted ended so that the request
    is taken as unpaid (released, unless its reply began to stream): the model client got no reply
    (``model-*``: an HTTP error, no connection, none in time). Ended otherwise — a guard or a handler
    stopped or refused the reply, the task was cancelled — the model had answered: it counts at its most."""
    return error is None or error.startswith("model-")


def _data(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else str(value)


def _size(value: Any) -> int:
    """Bytes of ``value`` as JSON (text as itself)."""
    if isinstance(value, str):
        return len(value.encode())
    return len(json.dumps(value, ensure_ascii=False, default=_data).encode())


def estimate(request: Any) -> int:
    """A request's prompt tokens, estimated high: its messages, tools and output schema as text
    and JSON, one token per `BYTES_PER_TOKEN` bytes, and four more per message."""
    size = 0
    for message in request.messages:
        for key, value in message.items():
            if value is not None and key != "role":
                size += _size(value)
    if request.tools:
        size += _size(request.tools)
    if request.output_schema is not None:
        size += _size(request.output_schema)
    return math.ceil(size / BYTES_PER_TOKEN) + 4 * len(request.messages)


def _reply_limit(settings: Mapping[str, Any]) -> int | None:
    """The most tokens a request lets its reply hold: the larger of the limits it sets (either may
    be the one the provider reads), or None when it sets none."""
    given = [settings[name] for name in REPLY_LIMITS if settings.get(name) is not None]
    return max(given) if given else None


def _money(dollars: float) -> str:
    return f"${dollars:,.2f}" if dollars >= 1 else f"${dollars:.4f}"


def _show(unit: str, amount: float) -> str:
    return _money(amount) if unit == "dollars" else f"{amount:,.0f} tokens"


def _check_amount(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if value.__class__ not in (int, float) or not math.isfinite(value) or value <= 0:
        raise TypeError(f"budget({name}=...) is a number above 0 (or None for no {name} budget), not {value!r}")
    return value


class _Books:
    """What was spent, granted and declined where no conversation keeps it: per process, and per
    call outside a conversation turn. One lock: a check and its reservation are one step."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spent: dict[str, list[float]] = {}
        self.extended: dict[str, dict[str, float]] = {}
        self.declined: dict[str, list[dict[str, float]]] = {}
        #: Each call's request in flight whose books are in memory: whose books, and the most it may cost,
        #: until its reply is counted.
        self.reserved: dict[str, tuple[str, float, float]] = {}
        #: The questions answered (turn, key) whose answer is kept here: a resumed turn reads one again.
        self.answered: set[tuple[str, str]] = set()
        #: Each call's request checked and not yet counted: the most it may cost, where its books are, its
        #: reservation's id, and whether its reply began to stream (one stopped midway counts as that most,
        #: never as free).
        self.pending: dict[str, dict[str, Any]] = {}


def budget(
    tokens: float | None = None,
    dollars: float | None = None,
    *,
    per: str = "call",
    prices: Mapping[str, Any] | None = None,
    ask_at: float = 0.8,
    name: str = "budget",
    decide: Callable[[Mapping[str, Any]], Any] | None = None,
) -> Plugin:
    """A plugin that keeps a call, turn, branch, conversation (every branch) or process (``per``)
    within ``tokens`` and ``dollars``; asks for more at ``ask_at`` of it; refuses ``budget-exceeded``
    past it.

    ``prices``: model name → (input, output[, cached]) dollars per million tokens, over what
    genai-prices knows (where installed) and the shipped table (`PRICES`, dated `DATED`); see
    `functai_budget.prices`. ``decide(question)`` answers instead of a person:
    True (grant the offer), a number (grant that much), False/None or a reason (refuse).
    """
    limits = {unit: amount for unit, amount in (("tokens", _check_amount("tokens", tokens)),
                                                 ("dollars", _check_amount("dollars", dollars))) if amount is not None}
    if not limits:
        raise TypeError("budget() needs tokens=..., dollars=... or both: a budget of nothing would never act")
    if per not in SCOPES:
        raise TypeError(f"budget(per=...) is one of {', '.join(map(repr, SCOPES))}, not {per!r}")
    if ask_at.__class__ not in (int, float) or not 0 < ask_at <= 1:
        raise TypeError(f"budget(ask_at=...) is the share of the budget at which to ask, above 0 and up to 1, "
                        f"not {ask_at!r}")
    if decide is not None and not callable(decide):
        raise TypeError(f"budget(decide=...) is a function of the question, not {type(decide).__name__}")
    priced = table(prices)
    books = _Books()
    whose = _WHOSE[per]
    shown = ", ".join(_show(unit, amount) for unit, amount in limits.items())
    # last, before the cache: it checks the request as the other plugins left it (a plugin that changed
    # it afterwards could pass the budget), and a cached answer, which costs nothing, ends the hook after it.
    plugin = Plugin(name, version=__version__, last=True, before=["cache"], description=f"budget({shown} per {per})")

    def kept_in(event: Any) -> bool:
        """Whether the conversation keeps this budget's books (else this process does)."""
        return per != "process" and event.turn is not None

    def memory_key(event: Any) -> str:
        return "process" if per == "process" else event.outer_call

    def at_once(event: Any, decide: Callable[[], Any]) -> Any:
        """``decide`` (a check and its reservation) as one step against every other writer of the books."""
        if kept_in(event):
            return event.atomically(decide)  # a compare-and-set on the conversation's store
        with books.lock:
            return decide()

    def mine(event: Any, entry: Mapping[str, Any], outer: str) -> bool:
        if per == "call":  # a call and every call nested in it (a tool that is an AI function) share one budget
            return bool(entry["data"].get("outer") == outer)
        if per == "turn":
            return bool(entry["turn"] == event.turn)
        return True

    def entries(event: Any, kind: str, outer: str) -> list[dict[str, Any]]:
        """This budget's entries of ``kind``: on every branch per conversation, else on this branch."""
        return [e for e in event.entries(kind, all_branches=per == "conversation") if mine(event, e, outer)]

    def scope(event: Any, outer: str) -> str:
        """Whose books an entry's running totals are: the conversation's, the branch's, a turn's or a call's
        (``outer``: the outermost call of the request they are about; a turn's end has no call of its own)."""
        return per if per in ("conversation", "branch") else event.turn if per == "turn" else outer

    def books_of(event: Any, outer: str) -> dict[str, Any]:
        """The running books the conversation keeps for this budget: those of its newest entry (every
        entry carries them), found with one lookup per kind however long the conversation is. A branch's
        are added up from its entries: a turn that failed off it kept books of another branch."""
        if per == "branch":
            return summed(event, outer)
        newest: dict[str, Any] | None = None
        at, unkept = "", ""
        for kind in KINDS:
            entry = event.latest(kind, all_branches=per == "conversation", this_turn=per in ("turn", "call"))
            if entry is None:
                continue
            ledger = entry["data"].get("books")
            if ledger is None:  # kept by a version without running books
                unkept = max(unkept, str(entry["at"]))
            elif newest is None or ledger["n"] > newest["n"]:
                newest, at = ledger, str(entry["at"])
        # Entries without books kept since the newest books (or in its millisecond: times are to the millisecond):
        # summed once, and numbered on.
        if unkept and unkept >= at:
            return {**summed(event, outer), "n": newest["n"] if newest is not None else 0}
        if newest is None or newest["scope"] != scope(event, outer):
            return {"n": 0, "scope": scope(event, outer), "spent": [0.0, 0.0], "flight": {}, "extended": {},
                    "declined": []}
        return newest

    def summed(event: Any, outer: str) -> dict[str, Any]:
        """The books added up from every entry (numbered by how many there are), as a version without
        running books kept them."""
        released = entries(event, "released", outer)
        settled = {e["data"]["reserved"] for e in released}
        spent = [0.0, 0.0]
        kept = entries(event, "spent", outer)
        for entry in kept:
            spent[0] += entry["data"]["tokens"]
            spent[1] += entry["data"]["dollars"]
            settled.add(entry["data"].get("reserved"))
        reserved, granted, declined = (entries(event, kind, outer) for kind in ("reserved", "extended", "declined"))
        flight = {e["data"]["id"]: [e["data"]["tokens"], e["data"]["dollars"]]
                  for e in reserved if e["data"]["id"] not in settled}  # in flight, in this process or another
        extended: dict[str, float] = {}
        for entry in granted:
            for unit, amount in entry["data"]["extend"].items():
                extended[unit] = extended.get(unit, 0.0) + amount
        return {"n": len(released) + len(kept) + len(reserved) + len(granted) + len(declined),
                "scope": scope(event, outer), "spent": spent, "flight": flight, "extended": extended,
                "declined": [entry["data"]["limits"] for entry in declined]}

    def advance(event: Any, kind: str, data: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
        """Keep an entry carrying the books as it leaves them (inside `atomically`: nothing is kept between
        reading the books and writing the next); ``data`` names the request's outermost call."""
        was = books_of(event, data["outer"])
        ledger = {**was, "n": was["n"] + 1, "scope": scope(event, data["outer"]), "spent": list(was["spent"]),
                  "flight": dict(was["flight"]), "extended": dict(was["extended"]), "declined": list(was["declined"])}
        change(ledger)
        event.remember(kind, {**data, "books": ledger})

    def write(event: Any, kind: str, data: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
        """`advance` as one step against every other writer of the conversation."""
        event.atomically(lambda: advance(event, kind, data, change))

    def read(event: Any) -> tuple[dict[str, float], dict[str, float], list[dict[str, float]]]:
        """What was spent (a request in flight at its most), the extensions granted, and the limits at
        which more was declined."""
        extended = {unit: 0.0 for unit in limits}
        if kept_in(event):
            ledger = books_of(event, event.outer_call)
            spent = {"tokens": ledger["spent"][0], "dollars": ledger["spent"][1]}
            for tokens, dollars in ledger["flight"].values():
                spent["tokens"] += tokens
                spent["dollars"] += dollars
            for unit, amount in ledger["extended"].items():
                extended[unit] = extended.get(unit, 0.0) + amount
            return spent, extended, list(ledger["declined"])
        key = memory_key(event)
        tokens, dollars = books.spent.get(key, (0.0, 0.0))
        spent = {"tokens": tokens, "dollars": dollars}
        for owner, t, d in books.reserved.values():  # requests in flight, counted at their most
            if owner == key:
                spent["tokens"] += t
                spent["dollars"] += d
        for unit, amount in books.extended.get(key, {}).items():
            extended[unit] += amount
        return spent, extended, list(books.declined.get(key, []))

    def keep(event: Any, kind: str, data: dict[str, Any], key: str | None) -> None:
        """An extension or a refusal to extend, once per question (a resumed turn reads its answer again).
        A question's key names its place in its turn, so another turn asking at the same place is another."""
        if kept_in(event):
            if key is not None and any(e["turn"] == event.turn and e["data"].get("key") == key
                                       for e in event.entries(kind)):
                return

            def change(ledger: dict[str, Any]) -> None:
                if kind == "extended":
                    for unit, amount in data["extend"].items():
                        ledger["extended"][unit] = ledger["extended"].get(unit, 0.0) + amount
                else:
                    ledger["declined"].append(data["limits"])

            write(event, kind, {**data, "call": event.call, "outer": event.outer_call, "key": key}, change)
            return
        with books.lock:  # threads read and extend the same books
            if key is not None:
                if (event.turn, key) in books.answered:
                    return
                books.answered.add((event.turn, key))
            target = memory_key(event)
            if kind == "extended":
                granted = books.extended.setdefault(target, {})
                for unit, amount in data["extend"].items():
                    granted[unit] = granted.get(unit, 0.0) + amount
            else:
                books.declined.setdefault(target, []).append(data["limits"])

    def add_spent(key: str, tokens: float, dollars: float) -> None:
        """Count spend in this process's books (the caller holds the lock)."""
        total = books.spent.setdefault(key, [0.0, 0.0])
        total[0] += tokens
        total[1] += dollars

    def remember_spent(event: Any, call: str, pending: Mapping[str, Any] | None, tokens: float, dollars: float,
                       model: str, estimated: bool) -> None:
        """Count spend as an entry of the conversation, at the event's turn; it settles the request's
        reservation (``pending``)."""
        def change(ledger: dict[str, Any]) -> None:
            if pending:
                ledger["flight"].pop(pending["reserved"], None)
            ledger["spent"] = [ledger["spent"][0] + tokens, ledger["spent"][1] + dollars]

        write(event, "spent", {"call": call, "outer": pending["outer"] if pending else event.outer_call,
                               "tokens": tokens, "dollars": dollars, "model": model, "estimated": estimated,
                               "reserved": pending["reserved"] if pending else None}, change)

    def unspent(event: Any, pending: Mapping[str, Any]) -> None:
        """A checked request that reached no model, or stopped before its reply began: nothing to pay,
        at its most if it began."""
        if pending["began"]:
            remember_spent(event, pending["call"], pending, pending["tokens"], pending["dollars"], pending["model"],
                           True)
        else:
            release(event, pending)

    def release(event: Any, pending: Mapping[str, Any]) -> None:
        write(event, "released", {"reserved": pending["reserved"], "call": pending["call"], "outer": pending["outer"]},
              lambda ledger: ledger["flight"].pop(pending["reserved"], None))

    def most(price: Price | None, prompt: int, reply: int) -> dict[str, float]:
        return {"tokens": float(prompt + reply),
                "dollars": price.dollars(prompt, reply) if price is not None else 0.0}

    def room(price: Price | None, prompt: int, spent: dict[str, float], limit: dict[str, float]) -> int:
        """The most tokens a reply with no ``max_tokens`` may hold: up to `MAX_REPLY`, within ``ask_at``
        of the budget while at least `MIN_REPLY` fits there (nothing to ask yet), else within the whole."""
        def fits(share: float) -> float:
            most = float(MAX_REPLY)
            if "tokens" in limit:
                most = min(most, share * limit["tokens"] - spent["tokens"] - prompt)
            if "dollars" in limit and price is not None and price.output > 0:
                left = share * limit["dollars"] - spent["dollars"] - price.dollars(prompt, 0)
                most = min(most, left * 1e6 / price.output)
            return most

        below = fits(ask_at)
        return max(int(below if below >= MIN_REPLY else fits(1.0)), 1)

    def plan(event: Any, price: Price | None, prompt: int, own: int | None) -> tuple[
            dict[str, float], dict[str, float], int, dict[str, float], list[str], bool]:
        """spent, limits, the reply's most tokens, the request's most cost, the units past ``ask_at``,
        and whether more was already declined at these limits."""
        spent, extended, declined = read(event)
        limit = {unit: limits[unit] + extended.get(unit, 0.0) for unit in limits}
        reply = own if own is not None else room(price, prompt, spent, limit)
        cost = most(price, prompt, reply)
        over = [unit for unit in limits if spent[unit] + cost[unit] > ask_at * limit[unit]]
        return spent, limit, reply, cost, over, limit in declined

    def words(unit: str, spent: dict[str, float], limit: dict[str, float], cost: dict[str, float]) -> str:
        return (f"{whose} has used {_show(unit, spent[unit])} of {_show(unit, limit[unit])}, and this request "
                f"may cost up to {_show(unit, cost[unit])}")

    def earlier_attempt(event: Any) -> None:
        """This call's request checked before and asked again (its model failed): paid for at its most
        if its reply began to stream, else its reservation is released."""
        with books.lock:
            earlier = books.pending.pop(event.call, None)
            if earlier is None:
                return
            if earlier["turn"] is None:
                books.reserved.pop(event.call, None)
                if earlier["began"]:
                    add_spent(memory_key(event), earlier["tokens"], earlier["dollars"])
                return
        unspent(event, earlier)

    @plugin.request
    def check(event: Any) -> Change | None:
        if event.recorded:
            return None  # a resumed turn reads its reply back: paid for, and counted, when first asked
        earlier_attempt(event)
        request = event.request
        price = None
        if "dollars" in limits:
            price = find(priced, request.model)
            if price is None:
                raise FunctAIError(
                    f"budget {name!r}: no price is known for the model {request.model!r}, so what it costs cannot be "
                    f"counted (it is never counted as free); give it: budget(..., prices={{{request.model!r}: "
                    "(input, output, cached)}) in dollars per million tokens",
                    code="budget-price-unknown", model=request.model)
        prompt = estimate(request)
        own = _reply_limit(request.settings)

        def unless_asking() -> tuple[Change, dict[str, Any]] | tuple[None, tuple[Any, ...]]:
            spent, limit, reply, cost, over, declined = plan(event, price, prompt, own)
            if over and not declined:
                return None, (spent, limit, cost, over)
            return reserve(event, spent, limit, reply, cost, own, "checked")

        allowed, found = at_once(event, unless_asking)
        if allowed is None:
            spent, limit, cost, over = found
            unit = over[0]
            offer = limits[unit]
            answer = event.ask(f"{words(unit, spent, limit, cost)}; allow {_show(unit, offer)} more?",
                               extend=offer, decide=decide)
            decision = "checked"
            if answer is not None:
                if answer.allow and answer.extend:
                    share = answer.extend / offer  # one answer extends every unit past ask_at alike
                    keep(event, "extended", {"extend": {u: limits[u] * share for u in over}}, answer.key)
                    decision = "extended"
                else:
                    keep(event, "declined", {"limits": limit}, answer.key)
                    decision = "declined"

            def after_asking() -> tuple[Change, dict[str, Any]]:
                spent, limit, reply, cost, _, _ = plan(event, price, prompt, own)
                return reserve(event, spent, limit, reply, cost, own, decision)

            allowed, found = at_once(event, after_asking)
        with books.lock:
            books.pending[event.call] = found
        change: Change | None = allowed
        return change

    def reserve(event: Any, spent: dict[str, float], limit: dict[str, float], reply: int, cost: dict[str, float],
                own: int | None, decision: str) -> tuple[Change, dict[str, Any]]:
        """The request fits: its most cost reserved, and what to count when it ends; else ``budget-exceeded``."""
        past = [unit for unit in limits if spent[unit] + cost[unit] > limit[unit]]
        if past:
            raise FunctAIError(
                f"budget {name!r}: {words(past[0], spent, limit, cost)}, past the budget; nothing was sent. Raise "
                f"the budget, or grant more when asked (it asks at {ask_at:.0%})",
                code="budget-exceeded", spent=spent[past[0]], limit=limit[past[0]], unit=past[0])
        pending = {"turn": event.turn if kept_in(event) else None, "call": event.call, "outer": event.outer_call,
                   "tokens": cost["tokens"], "dollars": cost["dollars"], "model": event.request.model,
                   "began": False, "reserved": os.urandom(8).hex()}
        if kept_in(event):  # inside `atomically` with the check
            advance(event, "reserved", {"id": pending["reserved"], "call": event.call, "outer": event.outer_call,
                                        "tokens": cost["tokens"], "dollars": cost["dollars"]},
                    lambda ledger: ledger["flight"].__setitem__(pending["reserved"], [cost["tokens"], cost["dollars"]]))
        else:
            books.reserved[event.call] = (memory_key(event), cost["tokens"], cost["dollars"])
        note = "; ".join(f"{_show(u, spent[u])} + at most {_show(u, cost[u])} of {_show(u, limit[u])}" for u in limits)
        change = Change(decision=decision, note=f"{note} ({per})"[:200],
                        settings={"max_tokens": reply} if own is None else None)
        return change, pending

    @plugin.chunk
    def began(event: Any) -> None:
        if event.part != "text":  # an error's message, reasoning, a refusal: no reply's text began
            return
        if event.final and not event.shown:  # a text fed whole, once (a reply not streamed, a plugin's answer)
            return
        pending = books.pending.get(event.call)
        if pending is not None:
            pending["began"] = True

    @plugin.reply
    def count(event: Any) -> None:
        if event.recorded or event.answered:  # read back, or answered by a plugin: no model was paid now,
            with books.lock:                      # unless the attempt before the answer began to stream
                pending = books.pending.pop(event.call, None)
                books.reserved.pop(event.call, None)
                if pending is not None and pending["turn"] is None and pending["began"]:
                    add_spent(memory_key(event), pending["tokens"], pending["dollars"])
            if pending is not None and pending["turn"] is not None:
                unspent(event, pending)
            return None
        request, usage = event.request, event.reply.usage
        price = find(priced, request.model) if "dollars" in limits else None
        known = "input_tokens" in usage and "output_tokens" in usage
        if known:
            used_in, used_out, cached = usage["input_tokens"], usage["output_tokens"], usage.get("cached_tokens", 0)
        else:  # a reply without usage counts as the most it could have cost, never as free
            used_in, used_out, cached = estimate(request), _reply_limit(request.settings) or MAX_REPLY, 0
        tokens = float(used_in + used_out)
        dollars = price.dollars(used_in, used_out, cached) if price is not None else 0.0
        with books.lock:  # the reservation becomes what was spent in one step: a check between sees one or the other
            pending = books.pending.pop(event.call, None)
            if not kept_in(event):
                books.reserved.pop(event.call, None)
                add_spent(memory_key(event), tokens, dollars)
                return None
        remember_spent(event, event.call, pending, tokens, dollars, request.model, not known)
        return None

    @plugin.call_end
    def forget(event: Any) -> None:
        call = event.record.id
        with books.lock:
            books.reserved.pop(call, None)  # a request that failed: nothing more is on its way
            stopped = books.pending.get(call)
            if stopped is not None and not _unpaid(event.error):
                stopped["began"] = True
            if stopped is not None and stopped["turn"] is None:  # else its turn's end counts it
                del books.pending[call]
                if stopped["began"]:
                    add_spent("process" if per == "process" else stopped["outer"], stopped["tokens"],
                              stopped["dollars"])
            if per != "process":  # books kept in memory for one call outside a conversation
                for kept in (books.spent, books.extended, books.declined):
                    kept.pop(call, None)

    @plugin.turn_wait
    @plugin.turn_end
    def settle(event: Any) -> None:
        """A request of the turn that never got its reply: released, or if its reply began to stream
        and was stopped, counted as the most it could cost. At a wait too: another process may resume
        the turn, and it never knew of the request."""
        with books.lock:
            stopped = {call: p for call, p in books.pending.items() if p["turn"] == event.turn}
            for call in stopped:
                del books.pending[call]
        for pending in stopped.values():
            unspent(event, pending)

    return plugin
