"""One `httpx.AsyncClient` per event loop, closed on that loop (an asyncio connection may be
closed only by its own loop): each client has a *watcher*, an async generator left suspended, whose
``finally`` closes it when asyncio closes the loop's generators at shutdown. Closing from elsewhere
is scheduled on the client's loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from contextlib import suppress
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable

if TYPE_CHECKING:
    import httpx

__all__ = ["LoopClients"]


#: A loop's client, and its watcher (held: the loop keeps only a weak reference) or None.
_Entry = tuple["httpx.AsyncClient", Any]


async def _watch(owner: weakref.ref[LoopClients], loop: asyncio.AbstractEventLoop,
                 http: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    """Suspended for the loop's life. Closing a client twice is harmless, so an explicit
    close never stops the watcher first."""
    try:
        yield
    finally:
        clients = owner()
        if clients is not None:
            clients._forget(loop, http)
        await http.aclose()


class LoopClients:
    """The async clients of one model client, by event loop."""

    __slots__ = ("_by_loop", "_lock", "_pending", "__weakref__")

    def __init__(self) -> None:
        self._by_loop: dict[asyncio.AbstractEventLoop, _Entry] = {}
        self._lock = threading.Lock()
        self._pending: set[asyncio.Task[None]] = set()  # closes scheduled on other loops: held till done

    def __len__(self) -> int:
        return len(self._by_loop)

    def get(self, make: Callable[[], httpx.AsyncClient]) -> httpx.AsyncClient:
        """The running loop's client, made with ``make()`` on the loop's first request."""
        loop = asyncio.get_running_loop()
        entry = self._by_loop.get(loop)
        if entry is None:
            entry = self._add(loop, make)
        return entry[0]

    def _add(self, loop: asyncio.AbstractEventLoop, make: Callable[[], httpx.AsyncClient]) -> _Entry:
        with self._lock:
            entry = self._by_loop.get(loop)
            if entry is not None:
                return entry
            for gone in [other for other in self._by_loop if other.is_closed()]:
                del self._by_loop[gone]  # closed without asyncio's shutdown: nothing can close them now
            http = make()
            watcher = None
            if sys.get_asyncgen_hooks().firstiter is not None:  # the loop tracks async generators
                watcher = _watch(weakref.ref(self), loop, http)
                with suppress(StopIteration):
                    watcher.asend(None).send(None)  # to its yield: now the loop will close it at shutdown
            entry = self._by_loop[loop] = (http, watcher)
            return entry

    def _forget(self, loop: asyncio.AbstractEventLoop, http: httpx.AsyncClient) -> None:
        with self._lock:
            entry = self._by_loop.get(loop)
            if entry is not None and entry[0] is http:
                del self._by_loop[loop]

    async def aclose(self) -> None:
        """Close the running loop's client (awaited) and every other loop's (on that loop)."""
        mine = self.close(but=asyncio.get_running_loop())
        if mine is not None:
            await mine.aclose()

    def close(self, but: asyncio.AbstractEventLoop | None = None) -> httpx.AsyncClient | None:
        """Let every client go, each closed on its own loop as soon as that loop runs (not awaited);
        the client of the loop ``but`` is returned instead, for the caller to close."""
        with self._lock:
            entries, self._by_loop = self._by_loop, {}
        mine = entries.pop(but, None) if but is not None else None
        for loop, (http, _) in entries.items():
            with suppress(RuntimeError):  # the loop is closed: nothing can close its connections now
                loop.call_soon_threadsafe(self._start_closing, loop, http)
        return mine[0] if mine is not None else None

    def _start_closing(self, loop: asyncio.AbstractEventLoop, http: httpx.AsyncClient) -> None:
        """On ``loop``'s own thread: close ``http`` in a task held until it is done."""
        task = loop.create_task(http.aclose())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
