"""The child process of ``functai plugins doctor``: loads one entry point and says, as one JSON
object on its standard output, what became of it.

Run by path (``python doctor_child.py SYS_PATH GROUP NAME DISTRIBUTION TIMEOUT``), not as a module
of ``functai._cli``, so that what is loaded before the clock starts is what a program has when it
loads its plugins, ``import functai``: the time measured is the plugin's own import.

It keeps its own time limit, and on Linux it is a subreaper: whatever the import started — in a
session of its own too — is its descendant to the end, and is killed before it answers.
"""

from __future__ import annotations

import json
import sys

if __name__ == "__main__":  # first: the parent's sys.path (the same distributions), not this script's folder
    sys.path[:] = json.loads(sys.argv[1])

import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import functai  # noqa: E402,F401  (what a program has imported when its plugins load)
from functai._errors import FunctAIError  # noqa: E402
from functai._hooks import installed  # noqa: E402
from functai._hooks.installed import FAILED, GROUP, InstalledPlugin  # noqa: E402

PROVIDERS = "functai.providers"

#: ``Type: [code] message``: how `InstalledPlugin` keeps a FunctAIError that stopped a plugin loading.
_REASON = re.compile(r"^\w+: \[([a-z0-9][a-z0-9-]*)\] (.*)$", re.S)


class _Timed:
    """An entry point whose ``load`` is timed and whose import error is kept (the rest is the entry point's)."""

    def __init__(self, entry_point: Any) -> None:
        self._entry_point = entry_point
        self.seconds: float | None = None
        self.error: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._entry_point, name)

    def load(self) -> Any:
        start = time.perf_counter()
        try:
            return self._entry_point.load()
        except BaseException as error:
            self.error = error
            raise
        finally:
            self.seconds = time.perf_counter() - start


def _said(error: BaseException) -> tuple[str | None, str]:
    """A FunctAIError's code and message, else None and ``Type: message``."""
    if isinstance(error, FunctAIError):
        return error.code, error.message
    return None, f"{type(error).__name__}: {error}"


def _examine_plugin(entry_point: _Timed) -> dict[str, Any]:
    """An entry point of the ``functai`` group, loaded as a call would load it."""
    item = InstalledPlugin(entry_point)
    item.load()
    if item.state == FAILED:
        if entry_point.error is not None:  # its import (or the object it names) failed
            code, message = _said(entry_point.error)
            return {"code": code or "plugin-load", "message": message}
        said = _REASON.match(item.reason or "")
        if said:
            return {"code": said.group(1), "message": said.group(2)}
        return {"code": item.code, "message": item.reason}
    plugin = item.plugin
    assert plugin is not None  # loaded
    return {"code": None, "hooks": list(plugin.hooks), "api": plugin.api,
            "requires": list(getattr(plugin, "requires", ()))}


def _examine_other(group: str, entry_point: _Timed) -> dict[str, Any]:
    """An entry point of another group: it imports, and names what that group calls (or hookimpls)."""
    try:
        found = entry_point.load()
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # an import error, even SystemExit
        code, message = _said(error)
        return {"code": code or "plugin-load", "message": message}
    if group == PROVIDERS:
        import pluggy

        from functai._models.providers import ProviderSpec

        manager = pluggy.PluginManager(group)
        manager.add_hookspecs(ProviderSpec)
        try:
            manager.register(found)
            manager.check_pending()
        except (pluggy.PluginValidationError, ValueError) as error:
            return {"code": "plugin-hook", "message": "pluggy refuses its hookimpls: " + " ".join(str(error).split())}
        return {"code": None}
    if not callable(found):
        kind = type(found).__name__
        return {"code": "plugin-load", "message": f"it gives an object of type {kind}, not a function to call"}
    return {"code": None}


def examine(group: str, name: str, distribution: str) -> dict[str, Any]:
    """Load the entry point ``name`` of ``distribution`` in ``group``: its code (None when it is fine) and more."""
    matches = [point for point in installed.entry_points(group)
               if point.name == name and str(getattr(point.dist, "name", None)) == distribution]
    if not matches:
        return {"code": "plugin-load", "message": "a new process does not find it"}
    if group == PROVIDERS:  # functai's side of providers, loaded before a provider is (and the clock starts)
        import functai._models.providers  # noqa: F401
    timed = _Timed(matches[0])
    found = _examine_plugin(timed) if group == GROUP else _examine_other(group, timed)
    found["seconds"] = timed.seconds
    return found


#: ``prctl`` option: orphaned descendants are re-parented to this process, not to init.
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children() -> list[int]:
    """This process's children, from /proc (on Linux: every descendant left, once their parents end)."""
    me, found = os.getpid(), list[int]()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rpartition(b")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                found.append(int(entry))
    return found


def _end_descendants() -> None:
    """Kill whatever the import started, until nothing is left (children of the killed come to us)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = _children()
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
        while True:  # reap them, so a dead one is not counted again
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break


def main(argv: list[str]) -> None:
    group, name, distribution, timeout = argv
    result = os.fdopen(os.dup(1), "w")  # not inherited: only this process holds the parent's pipe
    os.dup2(2, 1)  # what the plugin prints goes to stderr, away from the result
    _become_subreaper()
    answered = threading.Lock()

    def answer(found: dict[str, Any]) -> None:
        if not answered.acquire(blocking=False):
            answered.acquire()  # the other answer came first, and ends the process: wait for it
            return
        _end_descendants()
        result.write(json.dumps(found, default=str))
        result.flush()
        os._exit(0)  # nothing the plugin left behind (threads, atexit handlers) may change the verdict

    limit = float(timeout)
    watchdog = threading.Timer(limit, answer, [{"code": "plugin-timeout", "message": f"its import did not finish "
                                                f"within {limit:g} s; its process was stopped"}])
    watchdog.daemon = True
    watchdog.start()
    answer(examine(group, name, distribution))


if __name__ == "__main__":
    main(sys.argv[2:])
