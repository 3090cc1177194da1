"""functai's response cache, written with functai's public API only.

``cache(store="memory:", ttl=None)`` is a plugin: its ``request`` handler
answers a request that was answered before, from its store; its ``reply``
handler holds each reply that ended normally, and once its call is done
(``call_end``) keeps it under the digest of the
request that was sent and of who answered it (`request_key`): a reply from
one server, key or tenant is never handed out for another.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict
from typing import Any

from functai import FunctAIError, Plugin, Reply
from functai.stores import redact

from .key import KEY_VERSION, canonical, request_key
from .stores import CacheStore, Entry, MemoryCache, Stamped, open_cache_store

__version__ = "0.1.0"
#: Where this plugin says what it survived: under functai's logger, silent until the application
#: configures logging.
log = logging.getLogger("functai.cache")

__all__ = ["KEY_VERSION", "cache", "canonical", "request_key"]

#: Replies that ended normally; any other finish (cut, filtered) is asked again next time.
KEPT_FINISHES = frozenset({"stop", "tool_calls"})

#: Calls whose replies wait for the call to end, at most (the oldest are dropped, not kept).
MAX_HELD = 1000


def entry_of(reply: Reply, call: str | None, at: float) -> Entry:
    """What is kept of a reply: enough to answer again and to say who paid for it."""
    return {
        "reply": {
            "text": reply.text,
            "tool_calls": [{"id": c.id, "name": c.name, "input": c.input} for c in reply.tool_calls],
            "finish_reason": reply.finish_reason,
            "usage": dict(reply.usage),
        },
        "call": call,
        "at": at,
    }


def answer_of(entry: Entry) -> Reply:
    """The kept reply, as an answer whose note names the call that paid for it."""
    data = entry["reply"]
    calls = data.get("tool_calls") or ()
    if calls:
        from functai import ToolCall  # built only by caches that kept a tool call

        tool_calls = tuple(ToolCall(id=c["id"], name=c["name"], input=c["input"]) for c in calls)
    else:
        tool_calls = ()
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry["at"]))
    return Reply(text=data.get("text"), tool_calls=tool_calls, finish_reason=data.get("finish_reason"),
                 usage=data.get("usage") or {}, note=f"cached reply of call {entry.get('call')} ({when})"[:200])


def _shown(store: str) -> str:
    """The store as the plugin's description names it: a URL without its password."""
    return redact(store)


def _checked_ttl(ttl: object) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0 or math.isinf(ttl):
        raise FunctAIError(f"cache(ttl=...) takes seconds, a number > 0 (or None: entries never expire), "
                           f"not {ttl!r}", code="cache-ttl")
    return float(ttl)


def cache(store: str | os.PathLike[str] = "memory:", *, ttl: float | None = None, name: str = "cache") -> Plugin:
    """A plugin that answers a request already answered, from ``store``, instead of the model.

    ``store``: ``"memory:"`` (this plugin's own), a folder path, ``"sqlite:///file.db"`` or
    ``"postgresql://..."`` (shared by processes). ``ttl``: seconds an entry answers for (None:
    always). It runs after every other plugin (``last=True``): it looks up the request as they
    left it, as it will be sent, and keeps a reply as the other ``reply`` handlers left it.
    """
    seconds = _checked_ttl(ttl)
    where: CacheStore = open_cache_store(store)
    shown = _shown(store if isinstance(store, str) else os.fspath(store))
    # last: its request handler sees the request as every other plugin left it, as it will be sent
    plugin = Plugin(name, version=__version__, last=True,
                    description=f"cache({shown!r}{'' if seconds is None else f', ttl={ttl}'})")
    # In memory, a text answer is built once and handed out again: a Reply is read-only.
    # (One with tool calls is built afresh each time: a tool may change its input.)
    built: Stamped[Reply] | None = Stamped() if isinstance(where, MemoryCache) else None
    # A call's replies, by call id, until the call ends done (`keep_when_done`).
    held: OrderedDict[str, list[Entry]] = OrderedDict()
    lock = threading.Lock()

    def failed(doing: str, error: Exception) -> None:
        log.warning("plugin %r: %s the cache %r failed (%s: %s); the call goes on without it",
                    name, doing, where, type(error).__name__, error)

    def key_of(event: Any, doing: str) -> str | None:
        try:
            salt = where.salt()
        except Exception as error:  # a store that is down or damaged: the call goes on without it
            failed(doing, error)
            return None
        return request_key(event.request, event.endpoint, salt)

    @plugin.request
    def answer_from_cache(event: Any) -> Reply | None:
        if event.recorded:  # a resumed turn reads this request's reply from its own record, as it was paid for
            return None
        key = key_of(event, "reading")
        if key is None:
            return None
        if built is not None:
            found = built.get(key)
            if found is not None and (seconds is None or time.time() - found[0] <= seconds):
                return found[1]
        try:
            entry = where.get(key)
        except Exception as error:  # a store that is down is a miss: the model still answers
            failed("reading", error)
            return None
        if entry is None or (seconds is not None and time.time() - entry["at"] > seconds):
            return None
        try:
            answer = answer_of(entry)
        except Exception as error:  # an entry the store's checks let through but no reply can be made of
            failed("reading", error)
            return None
        if built is not None and not entry["reply"].get("tool_calls"):
            with lock:  # let go past the ttl, as the store's entries are
                built.keep(key, entry["at"], answer, None if seconds is None else time.time() - seconds)
        return answer

    @plugin.reply
    def keep_reply(event: Any) -> None:
        reply: Reply = event.reply
        if event.recorded:  # read back by a resumed turn: kept when it was asked, for the request it answered
            return
        if event.answered is not None or reply.finish_reason not in KEPT_FINISHES or reply.refusal:
            return
        if not event.log_content and not isinstance(where, MemoryCache):
            return  # a call kept without its content (log_content=False): none of it is written elsewhere
        if not reply.tool_calls and (reply.text is None or (reply.reasoning and not reply.text.strip())):
            return  # no answer (an error when read): asked again next time
        key = key_of(event, "writing to")
        if key is None:
            return
        entry = entry_of(reply, event.call, time.time())
        entry["key"] = key
        with lock:
            held.setdefault(event.call, []).append(entry)
            while len(held) > MAX_HELD:  # calls that never end here (a turn resumed elsewhere)
                held.popitem(last=False)

    @plugin.call_end
    def keep_when_done(event: Any) -> None:
        """Keep the call's replies once it is done: one it could not read as its answer, kept, would
        answer (and fail) every later call alike."""
        with lock:
            kept = held.pop(event.record.id, ())
        if event.error is not None:
            return
        for entry in kept:
            try:
                where.put(entry["key"], entry, -math.inf if seconds is None else time.time() - seconds)
            except Exception as error:  # never stops the call: the reply is good, only not kept
                failed("writing to", error)

    return plugin
