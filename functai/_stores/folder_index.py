"""What one process knows of one folder-store file (`Index`), and how its lines are checked:
a chunk of sound lines is decoded in one go (as rows or dicts), any other line by line, each
bad one named."""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, cast

from .. import _codec as codec
from .protocol import not_an_object

#: Written after a torn last line before appending. A NUL is never valid JSON, so the
#: terminated line (even a whole object missing only its newline) is never counted.
TORN_END = b"\x00\n"


class _Lines:
    """The text of every valid record of a file, in order; a chunk of sound lines is kept
    as read and split only when one of its lines is asked for (an open never asks)."""

    __slots__ = ("_firsts", "_parts", "_count")

    def __init__(self) -> None:
        self._firsts: list[int] = []  # the index of each part's first line
        self._parts: list[tuple[bytes, int] | list[str | bytes]] = []  # (data, end): the lines of data[:end]
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add_chunk(self, data: bytes, end: int, count: int) -> None:
        """``count`` lines, newline-separated in ``data[:end]``."""
        self._firsts.append(self._count)
        self._parts.append((data, end))
        self._count += count

    def extend(self, lines: Sequence[str | bytes]) -> None:
        if not lines:
            return
        if not self._parts or type(self._parts[-1]) is not list:
            self._firsts.append(self._count)
            self._parts.append([])
        self._parts[-1].extend(lines)  # type: ignore[union-attr]
        self._count += len(lines)

    def append(self, line: str | bytes) -> None:
        self.extend((line,))

    def _split(self, at: int) -> list[str | bytes]:
        part = self._parts[at]
        if type(part) is tuple:
            data, end = part
            part = self._parts[at] = cast("list[str | bytes]", data[:end].split(b"\n"))
        return part  # type: ignore[return-value]

    def line(self, index: int) -> str | bytes:
        """The text of record ``index``."""
        at = bisect_right(self._firsts, index) - 1
        if index < 0 or at < 0 or index >= self._count:
            raise IndexError(index)
        part, offset = self._parts[at], index - self._firsts[at]
        if offset == 0 and type(part) is tuple:  # a file's header: no need to split the chunk for it
            data, end = part
            found = data.find(b"\n", 0, end)
            return data[: end if found < 0 else found]
        return self._split(at)[offset]

    def since(self, start: int) -> list[str | bytes]:
        """The text of every record from index ``start`` on."""
        out: list[str | bytes] = []
        for at, first in enumerate(self._firsts):
            size = (self._firsts[at + 1] if at + 1 < len(self._firsts) else self._count) - first
            if first + size <= start:
                continue
            out.extend(self._split(at)[max(0, start - first):])
        return out


class _Numbers:
    """The file line (1-based) of each record, kept as runs of consecutive lines."""

    __slots__ = ("_firsts", "_lines", "_count")

    def __init__(self) -> None:
        self._firsts: list[int] = []  # the record index each run starts at
        self._lines: list[int] = []  # and its line
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, line: int, count: int = 1) -> None:
        """Records on ``count`` lines from ``line`` on."""
        if count <= 0:
            return
        if not self._firsts or self._lines[-1] + (self._count - self._firsts[-1]) != line:
            self._firsts.append(self._count)
            self._lines.append(line)
        self._count += count

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self._count:
            raise IndexError(index)
        at = bisect_right(self._firsts, index) - 1
        return self._lines[at] + index - self._firsts[at]


@dataclass
class Index:
    """What one process knows of one conversation file.

    ``offset`` is how many bytes were parsed: always just after a newline, so a torn last
    line is re-read once it is terminated.
    """

    dev: int
    ino: int
    offset: int = 0
    lines: _Lines = field(default_factory=_Lines)
    #: The file line (1-based) of each valid record, and how many complete lines were parsed.
    numbers: _Numbers = field(default_factory=_Numbers)
    parsed_lines: int = 0
    #: Complete lines that are not records: ``(line, reason)``.
    skipped: list[tuple[int, str]] = field(default_factory=list)
    #: The records parsed by the last refresh (lines[fresh_from:]), handed out once by `read`
    #: or `read_rows`, so an open parses each line once.
    fresh: list[Any] = field(default_factory=list)
    fresh_from: int = 0
    #: Whether ``fresh`` holds rows (`functai._conversations.rows`) rather than dicts.
    fresh_rows: bool = False


_BOM = "\ufeff"


#: ``scan_once``, which JSONDecoder sets on each instance (typeshed does not declare it).
_scan: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]


def parse_lines(data: bytes, end: int, index: Index, parsed: list[Any], rows: bool = False) -> list[tuple[int, str]]:
    """Add the lines of ``data[:end]`` that are JSON objects to ``parsed`` (as rows when ``rows``);
    the others are returned as ``(line number, reason)``."""
    skipped: list[tuple[int, str]] = []
    if _parse_sound(data, end, index, parsed, rows):
        return skipped
    number = index.parsed_lines
    for raw in data[:end].split(b"\n"):
        number += 1
        try:
            text = raw.decode("utf-8")
            if text.startswith(_BOM):  # an editor's byte-order mark hides nothing
                text = text[1:]
            try:
                record, end = _scan(text, 0)  # the parser of json.loads, without its checks around
            except StopIteration:
                raise ValueError("no JSON value") from None
            if end != len(text) and text[end:].strip():
                raise ValueError("more after the JSON value")
        except (ValueError, RecursionError):  # not UTF-8, not JSON (or nested past the parser): a torn or foreign line
            skipped.append((number, why_not_json(raw)))
            continue
        if isinstance(record, dict):
            index.lines.append(text)
            index.numbers.add(number)
            parsed.append(record)
        else:
            skipped.append((number, not_an_object(record)))
    index.parsed_lines = number
    return skipped


def _parse_sound(data: bytes, end: int, index: Index, parsed: list[Any], rows: bool = False) -> bool:
    """Decode lines (``data[:end]``) that are all JSON objects in one go; False (nothing added)
    when any is not, for the line-by-line path to say which and why.

    One decode of the lot may read two values from one line or skip a blank one, so it is only
    taken when every newline is in ``}\\n{`` and there are as many values as lines.
    """
    lines = data.count(b"\n", 0, end) + 1
    if (not data.startswith(b"{") or data[end - 1 : end] != b"}"
            or data.count(b"}\n{", 0, end) != lines - 1):
        return False
    view = data if end == len(data) else memoryview(data)[:end]  # no copy of the lot
    records: list[Any] | None = None
    if rows:
        from .._conversations import rows as row_codec  # the fold's row decoder: see tests/test_layers.py

        try:
            records = row_codec.decode_lines(view)  # each an object of a known kind, or it raises
        except (ValueError, RecursionError):  # another kind, say: as dicts, which the fold takes too
            pass
    if records is None:
        try:
            records = codec.loads_lines(view)
        except (ValueError, RecursionError):
            return False
        if not all(map(dict.__instancecheck__, records)):
            return False
    if len(records) != lines:
        return False
    first = index.parsed_lines + 1
    index.lines.add_chunk(data, end, lines)
    index.numbers.add(first, lines)
    index.parsed_lines += lines
    parsed.extend(records)
    return True


def why_not_json(raw: bytes) -> str:
    if raw.endswith(TORN_END[:1]):
        return "a write cut short (a crash while writing); the next writer ended it"
    if not raw.strip():
        return "an empty line"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    return "not JSON"
