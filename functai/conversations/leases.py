"""Leases: who runs a turn, and how another process knows it is gone.

A turn that starts (or is resumed) is *claimed*: its record carries a claim
id and the owner — pid, host, boot id and the process's start time. While
it runs, one daemon thread per process appends a ``lease`` record for it
each time its lease is `RENEW` seconds old. A reader decides the owner is gone when

* the last renewal is older than the lease's ``ttl`` (default `TTL`), or
* the owner ran on this host in this boot and its pid is gone, is a zombie,
  or is now another process (another start time) — known at once, or
* the owner is this very process and the claim is not one it runs.

Only records are written, through the `Store` protocol, so every store
(folders, databases) has leases without new operations.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping

from ..log import warn

if TYPE_CHECKING:
    from ..stores.protocol import Store

#: Seconds between renewals of a running turn's lease.
RENEW = 10.0
#: Seconds after its last renewal that a lease expires.
TTL = 60.0


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _boot_id() -> str:
    return _read("/proc/sys/kernel/random/boot_id").strip()


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None where unknown.

    With the pid and the boot id it names one process: a pid reused later has another start time.
    """
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of stat; fields[0] is field 3


def _zombie(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("Z", "X")


_owner: dict[str, Any] | None = None


def owner() -> dict[str, Any]:
    """This process as a lease owner: ``{"pid", "host", "boot", "start"}``."""
    global _owner
    if _owner is None or _owner["pid"] != os.getpid():
        _owner = {"pid": os.getpid(), "host": socket.gethostname(), "boot": _boot_id(),
                  "start": _start_time(os.getpid())}
    return dict(_owner)


def new_lease() -> dict[str, Any]:
    """The lease fields a claiming record carries."""
    return {"claim": os.urandom(6).hex(), "owner": owner(), "t": round(time.time(), 3), "ttl": TTL}


def _pid_gone(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it exists
        pass
    except OSError:
        return False
    if _zombie(pid):
        return True
    return start is not None and _start_time(pid) not in (None, start)


def expired(lease: Mapping[str, Any] | None, claim: str | None, now: float | None = None) -> str | None:
    """Why the lease no longer holds, or None while its owner may still run the turn."""
    if not lease:
        return "the turn was started by a version of functai that keeps no lease"
    now = time.time() if now is None else now
    who = lease.get("owner") or {}
    me = owner()
    pid = who.get("pid")
    if who.get("host") == me["host"] and who.get("boot") and who.get("boot") == me["boot"] and isinstance(pid, int):
        if pid == me["pid"] and who.get("start") == me["start"]:
            if claim is not None and claim not in _running:
                return f"this process (pid {pid}) no longer runs it"
            return None
        if _pid_gone(pid, who.get("start")):
            return f"its process (pid {pid} on {who.get('host')}) is gone"
    elif who.get("host") == me["host"] and who.get("boot") and me["boot"] and who.get("boot") != me["boot"]:
        return f"its host {who.get('host')} restarted since it ran"
    try:
        last, ttl = float(lease.get("t", 0)), float(lease.get("ttl", TTL))
    except (TypeError, ValueError):
        return "its lease cannot be read"
    if now - last > ttl:
        return (
            f"its lease (pid {pid} on {who.get('host')}) was last renewed {now - last:.0f} s ago "
            f"(expires after {ttl:.0f} s)"
        )
    return None


# -- the turns this process runs, and the thread that renews their leases ------------

#: claim → [store (None: nothing to renew), conversation, turn, when its lease was last written
#: (None until the record that claims the turn is written: no renewal may come before it)]
_running: dict[str, list[Any]] = {}
_lock = threading.Lock()
_wake = threading.Event()
_thread: threading.Thread | None = None


def hold(claim: str, store: "Store | None", conversation: str, turn: str) -> None:
    """Mark ``claim`` as run by this process, before the record that claims the turn is
    written, so no reader here takes it for dead; it is renewed only once `claimed` says
    that record is written (and never when ``store`` is None: a store that dies with the
    process needs no lease)."""
    with _lock:
        _running[claim] = [store, conversation, turn, None]


def claimed(claim: str, t: float) -> None:
    """The record claiming ``claim``'s turn (its lease at time ``t``) is written: renew it from now on.

    Until then no ``lease`` record is appended, so none ever comes before its turn's record
    (however long the hooks before that record, or the store, take)."""
    global _thread
    with _lock:
        entry = _running.get(claim)
        if entry is None:
            return
        entry[3] = t
        if entry[0] is not None and (_thread is None or not _thread.is_alive()):
            _thread = threading.Thread(target=_renew_forever, name="functai-leases", daemon=True)
            _thread.start()


def release(claim: str) -> None:
    """The turn of ``claim`` ended, waited, or was never written."""
    with _lock:
        _running.pop(claim, None)


def renew_due() -> None:
    """Append a renewal for every turn this process runs whose lease is `RENEW` seconds old
    (a turn shorter than that writes none)."""
    now = time.time()
    with _lock:
        due = [(claim, list(entry)) for claim, entry in _running.items()
               if entry[0] is not None and entry[3] is not None and now - entry[3] >= RENEW]
    for claim, (store, conversation, turn, _) in due:
        record = {"functai_conversation": 1, "kind": "lease", "turn": turn, "claim": claim, "t": round(now, 3)}
        try:
            store.append(conversation, [record])
            with _lock:
                if claim in _running:
                    _running[claim][3] = now
        except Exception as error:  # a renewal that fails is retried next time; the turn goes on
            warn("lease renewal failed", conversation=conversation, turn=turn,
                 error=f"{type(error).__name__}: {error}")


def _renew_forever() -> None:
    global _thread
    while True:
        _wake.wait(RENEW / 4)
        _wake.clear()
        with _lock:
            if not any(entry[0] is not None and entry[3] is not None for entry in _running.values()):
                _thread = None  # nothing to renew: the thread ends (the next hold starts another)
                return
        renew_due()


def _after_fork() -> None:
    global _thread, _lock
    _lock = threading.Lock()
    _running.clear()  # the parent's turns are the parent's
    _thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
