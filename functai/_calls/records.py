"""Call records, and the call log that keeps them as JSON lines.

With ``log_calls="folder/"`` each record is one line of strict JSON in
``folder/calls.jsonl``, written whole by `functai._appendlog` so concurrent
processes never interleave lines. A line that cannot be read back is skipped
and reported; a write that fails raises ``store-unwritable`` and leaves no
partial line.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from typing import Any, Tuple, TypeVar

import attrs

from .._files import unwritable
from .._logfiles import LOG_FILE
from .._models.keys import SecretURL
from .outputs import to_jsonable


@attrs.define(eq=False)
class CallRecord:
    """What happened in one AI function call."""

    id: str
    function: str
    version: str
    inputs: dict[str, Any]
    started: str
    parent: str | None = None
    path: str = ""
    module: str = ""
    output: Any = None
    error: dict[str, Any] | None = None
    instruction: str | None = None
    model: str | None = None
    settings: dict[str, Any] = attrs.field(factory=dict)
    #: Token counts summed over the call's requests (`functai.Reply.usage` names).
    usage: dict[str, int] = attrs.field(factory=dict)
    #: Why the last reply ended: ``stop``, ``length``, ``tool_calls``, ``content_filter`` …
    finish_reason: str | None = None
    #: What a reasoning model thought before answering (every request's, in order).
    reasoning: str | None = None
    seconds: float | None = None
    tool_calls: list[dict[str, Any]] = attrs.field(factory=list)
    conversation: dict[str, Any] | None = None
    #: Every change made to the call, in order: ``{"plugin", "version", "hook", "change"}`` (and ``µs``).
    changes: list[dict[str, Any]] = attrs.field(factory=list)
    sections: list[str] = attrs.field(factory=list)
    replayable: bool = True
    attempts: int = 0
    #: Hearing handlers that ran, with their time: only with ``record_timing=True``.
    heard: list[dict[str, Any]] = attrs.field(factory=list)
    #: The latest rating, when read with ``read_calls(..., rated=True)`` (never written to the log).
    rating: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON data (``replayable`` only when false; ``heard`` and ``rating`` only when set)."""
        data = {  # written out: attrs.asdict is slower, on every logged call with changes or tool calls
            "id": self.id, "function": self.function, "version": self.version, "inputs": to_jsonable(self.inputs),
            "started": self.started, "parent": self.parent, "path": self.path, "module": self.module,
            "output": to_jsonable(self.output), "error": self.error, "instruction": self.instruction,
            "model": self.model, "settings": self.settings, "usage": self.usage, "finish_reason": self.finish_reason,
            "reasoning": self.reasoning, "seconds": self.seconds, "tool_calls": self.tool_calls,
            "conversation": self.conversation, "changes": self.changes, "sections": self.sections,
            "replayable": self.replayable, "attempts": self.attempts, "heard": self.heard, "rating": self.rating,
        }
        if self.replayable:
            del data["replayable"]
        if not self.heard:
            del data["heard"]
        if self.rating is None:
            del data["rating"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CallRecord":
        """Rebuild a record; keys this version does not know are skipped."""
        known = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


#: A call's value type (``Result[str]`` for a function that returns ``str``).
V = TypeVar("V")


class Result(Tuple[V, CallRecord]):
    """A call's value and its record: ``value, record = fn.run(...)``. (A generic NamedTuple would
    say the same, from Python 3.11 on.)"""

    __slots__ = ()

    def __new__(cls, value: V, record: CallRecord) -> Result[V]:
        return tuple.__new__(cls, (value, record))

    @property
    def value(self) -> V:
        return self[0]

    @property
    def record(self) -> CallRecord:
        return self[1]

    def __repr__(self) -> str:
        return f"Result(value={self[0]!r}, record={self[1]!r})"


def size(value: Any) -> int:
    """How many characters a value takes as text (what ``log_content=False`` keeps)."""
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, default=str))


def without_content(record: CallRecord) -> None:
    """Replace values with their sizes, and drop the content of changes (and their notes, which a
    plugin may have written from it)."""
    record.inputs = {name: {"chars": size(value)} for name, value in record.inputs.items()}
    if record.output is not None:
        record.output = {"chars": size(record.output)}
    if record.instruction is not None:
        record.instruction = {"chars": size(record.instruction)}  # type: ignore[assignment]
    record.sections = [{"chars": size(s)} for s in record.sections]  # type: ignore[misc]
    if record.reasoning is not None:
        record.reasoning = {"chars": size(record.reasoning)}  # type: ignore[assignment]
    record.changes = [{k: v for k, v in item.items() if k != "change" and k != "note"} for item in record.changes]
    if record.error is not None:  # an error message may quote inputs or the reply
        record.error = {"code": record.error.get("code"), "chars": size(record.error.get("message", ""))}
    for call in record.tool_calls:
        for key in ("input", "output"):
            if key in call and call[key] is not None:
                call[key] = {"chars": size(call[key])}
        if isinstance(call.get("error"), str):  # "<code or exception type>: <message>", which may quote them
            call["error"] = {"code": call["error"].partition(":")[0], "chars": len(call["error"])}
    conversation = record.conversation
    if conversation and conversation.get("waited"):  # what a person was asked and answered: input, question, edit
        conversation["waited"] = [
            {**wait, "approvals": [_sized(a, ("input", "question")) for a in wait["approvals"]],
             "answers": {key: _sized(answer, ("inputs", "reason")) for key, answer in wait["answers"].items()}}
            for wait in conversation["waited"]]


def _sized(item: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: {"chars": size(v)} if k in keys and v is not None else v for k, v in item.items()}


def not_kept(value: Any) -> bool:
    """Whether a recorded value is the size `without_content` left in its place."""
    return isinstance(value, dict) and value.keys() == {"chars"}


def _what(path: str) -> str:
    return "call log" if os.path.basename(path) == LOG_FILE else "log file"


_logs_lock = threading.Lock()
_logs: dict[str, Any] = {}  # absolute path -> functai._appendlog.LineFile, open for the process
_by_folder: dict[str, Any] = {}  # an absolute log_calls folder, as given -> its calls.jsonl LineFile


def _forget_logs() -> None:
    """In a forked child: open the files anew (the parent's descriptors share its file offsets)."""
    global _logs_lock
    _logs_lock = threading.Lock()
    for log in set(_logs.values()):
        log.lock = threading.Lock()  # another thread may have held it at the fork
        try:
            log.close()
        except OSError:
            pass
    _logs.clear()
    _by_folder.clear()


os.register_at_fork(after_in_child=_forget_logs)


_encode_line: Any = None  # functai._calls.logline's encoder, made with the first record logged (it imports msgspec)


def _line_encoder() -> Any:
    global _encode_line
    from .logline import line_encoder

    _encode_line = line_encoder([field.name for field in attrs.fields(CallRecord)])
    return _encode_line


def append(folder: str | os.PathLike[str] | SecretURL, record: CallRecord) -> None:
    """Append one record to the call log in ``folder`` (or at a store URL, see `functai._stores.calllog`)."""
    log = _by_folder.get(folder) if type(folder) is str else None
    # A log URL with a password is a SecretURL (see `functai._models.keys`): revealed only to open its store.
    if log is None and (isinstance(folder, SecretURL) or (
        isinstance(folder, str) and (":" in folder or folder.endswith((".db", ".sqlite", ".sqlite3")))
    )):
        from .._stores import calllog

        if calllog.is_log_url(folder):
            calllog.append_call(folder, record.to_dict())
            return
    line = (_encode_line or _line_encoder())(record) + b"\n"
    if log is None or not log.append(line):  # not open yet, or the file was removed
        _append(os.path.join(os.fspath(folder), LOG_FILE), line, folder)  # type: ignore[arg-type]


def append_line(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Append one JSON line to the file at ``path`` (non-finite numbers as text, see `functai._codec`)."""
    from .. import _codec as codec  # here, not at import: a plain call writes and reads no JSON lines

    _append(path, codec.dumps(data, non_finite="text") + b"\n")


def _append(path: str | os.PathLike[str], line: bytes, folder: Any = None) -> None:
    """Append through the file kept open for ``path``: opened on first use, and again when it was removed."""
    from .._appendlog import LineFile

    key = os.path.abspath(os.fspath(path))
    log: Any
    for _ in range(2):
        with _logs_lock:
            log = _logs.get(key)
            if log is None:
                log = _logs[key] = LineFile(key, _what(key))
            if type(folder) is str and os.path.isabs(folder):
                _by_folder[folder] = log  # found by the folder's own name next time: no path to build
        if log.append(line):
            return
        with _logs_lock:
            if _logs.get(key) is log:
                del _logs[key]
                _by_folder.clear()
        log.close()
    raise unwritable(key, FileNotFoundError(errno.ENOENT, "removed while being written", key), _what(key))


def close_log(folder: str | os.PathLike[str]) -> None:
    """Close the call log file kept open for ``folder`` (a test's folder: one per test would pile up)."""
    key = os.path.abspath(os.path.join(os.fspath(folder), LOG_FILE))
    with _logs_lock:
        log = _logs.pop(key, None)
        _by_folder.clear()
    if log is not None:
        log.close()
    from .._stores.logindex import close_index

    close_index(os.path.abspath(os.fspath(folder)))
