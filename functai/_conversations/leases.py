"""Leases: who runs a turn, and how another process knows it is gone.

A claimed turn's record names its owner (pid, host, boot id, process start
time); a daemon thread appends a ``lease`` record each `RENEW` seconds while
it runs. The owner is gone when the last renewal is older than ``ttl``, when
it ran on this host and boot and its pid is gone, a zombie or another
process, or when it is this process and the claim is not one it runs.
Only records are written, so every `Store` has leases without new operations.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping

from .._log import warn

if TYPE_CHECKING:
    from .._stores.protocol import Store

#: Seconds between renewals of a running turn's lease.
RENEW = 10.0
#: Seconds after its last renewal that a lease expires.
TTL = 60.0


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` from the third on (empty where unknown)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def _start_time(pid: int) -> str | None:
    """The process's start time since boot: with the pid and boot id it names one process."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else None  # field 22 of stat; fields[0] is field 3


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _pid_space() -> str:
    """This process's PID namespace: a pid names the same process only inside one (containers that
    share a host name and boot id each have their own)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


_owner: dict[str, Any] | None = None


def owner() -> dict[str, Any]:
    """This process as a lease owner: ``{"pid", "host", "boot", "ns", "start"}``."""
    global _owner
    if _owner is None or _owner["pid"] != os.getpid():
        _owner = {"pid": os.getpid(), "host": socket.gethostname(), "boot": _boot_id(), "ns": _pid_space(),
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
    if _stat(pid)[:1] in (["Z"], ["X"]):  # a zombie
        return True
    return start is not None and _start_time(pid) not in (None, start)


def expired(lease: Mapping[str, Any], claim: str | None, now: float) -> str | None:
    """Why the lease no longer holds, or None while its owner may still run the turn."""
    who = lease.get("owner") or {}
    me = owner()
    pid = who.get("pid")
    if (who.get("host") == me["host"] and who.get("boot") and who.get("boot") == me["boot"]
            and who.get("ns") == me["ns"] and isinstance(pid, int)):  # else its pid cannot be looked up here
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
    if not now - last > ttl:  # not `<=`: a NaN time or ttl compares false both ways, and that lease is kept
        return None
    # Past a day the moment says more than the age, and every reader words it the same.
    when = f"{now - last:.0f} s ago" if now - last < 86400 else time.strftime("at %Y-%m-%d %H:%M:%S UTC",
                                                                              time.gmtime(last))
    return f"its lease (pid {pid} on {who.get('host')}) was last renewed {when} (expires after {ttl:.0f} s)"


#: claim → [store (None: nothing to renew), conversation, turn, when its lease was last written
#: (None until the record that claims the turn is written: no renewal may come before it)]
_running: dict[str, list[Any]] = {}
_lock = threading.Lock()
_wake = threading.Event()
_thread: threading.Thread | None = None


def hold(claim: str, store: "Store | None", conversation: str, turn: str) -> None:
    """Mark ``claim`` as run by this process before its record is written, so no reader here
    takes it for dead; renewed once `claimed` (never when ``store`` is None)."""
    with _lock:
        _running[claim] = [store, conversation, turn, None]


def claimed(claim: str, t: float) -> None:
    """The record claiming ``claim``'s turn (its lease at time ``t``) is written: renew it from
    now on, so no ``lease`` record ever comes before its turn's record."""
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
    """Append a renewal for every turn this process runs whose lease is `RENEW` seconds old."""
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
