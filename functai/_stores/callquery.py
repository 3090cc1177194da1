"""Which calls a read of the call log asks for, as one SQL query that every kind of log answers
from its index: a SQL store's ``functai_calls`` table, or the index file beside a folder log
(`functai._stores.logindex`), whose table has the same columns.

Each record found is checked against the filters (`CallQuery.matches`): what the index says of it
is never taken on trust.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

#: The columns a call is found by, kept beside its line (in this order).
COLUMNS = ("started", "function", "module", "model", "code", "parent", "plugins")

#: The indexes on them (both dialects): by time (pages), by id (one call), and the filters.
INDEXES = (
    "CREATE INDEX IF NOT EXISTS functai_calls_started ON functai_calls (started, seq)",
    "CREATE INDEX IF NOT EXISTS functai_calls_id ON functai_calls (id)",
    "CREATE INDEX IF NOT EXISTS functai_calls_function ON functai_calls (function, started, seq)",
    "CREATE INDEX IF NOT EXISTS functai_calls_model ON functai_calls (model, started, seq)",
    "CREATE INDEX IF NOT EXISTS functai_calls_code ON functai_calls (code, started, seq)",
    "CREATE INDEX IF NOT EXISTS functai_calls_parent ON functai_calls (parent)",
    "CREATE INDEX IF NOT EXISTS functai_ratings_call ON functai_ratings (call)",
)

#: Above every character a call id can hold: the end of the range of ids that start with a prefix.
_TOP = "\U0010ffff"


def columns(data: Mapping[str, Any]) -> tuple[str | None, ...]:
    """The indexed columns of a call record's data (see `COLUMNS`): ``code`` is the error's code
    (``""`` for an error without one), ``plugins`` the names of the plugins that changed it,
    each between spaces."""
    error = data.get("error")
    code = None if not isinstance(error, dict) else indexable(str(error.get("code") or ""))
    plugins = {indexable(str(change.get("plugin"))) for change in data.get("changes") or ()
               if isinstance(change, dict)}
    text = [data.get(name) for name in ("started", "function", "module", "model", "parent")]
    found = [indexable(value) if isinstance(value, str) else None for value in text]
    return (*found[:4], code, found[4], f" {' '.join(sorted(plugins))} " if plugins else None)


#: What an index keeps of a call, in `call_row`'s order (a read of the folder log's index checks them all).
ROW = ", ".join(("id", *COLUMNS))


def call_row(data: Mapping[str, Any]) -> tuple[str | None, ...]:
    """A call record's id and its `columns`, as an index keeps them (and as a read checks them)."""
    return (indexable(str(data.get("id", ""))), *columns(data))


def rating_row(data: Mapping[str, Any]) -> tuple[str]:
    """What an index keeps of a rating: the call it rates."""
    return (indexable(str(data.get("call", ""))),)


def indexable(text: str) -> str:
    """``text`` as an index keeps it: as it is, or with each lone surrogate (which UTF-8 cannot hold,
    so no database takes it) written as its escape, ``\\ud800``."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _indexed(value: Any) -> Any:
    """A filter's text as the index keeps text (`indexable`); anything else as it is."""
    return indexable(value) if isinstance(value, str) else value


@attrs.frozen
class CallQuery:
    """The calls to read: every filter given must hold. ``newest``: the newest that many (by
    ``started``, then the log's order), newest first; else every one, in the log's order. ``before``: a call id,
    the calls that started before it (the next page of a list that ended at it)."""

    id: str | None = attrs.field(default=None, converter=_indexed)
    #: ``id`` is the start of the ids wanted, not a whole one.
    prefix: bool = False
    function: str | None = attrs.field(default=None, converter=_indexed)
    module: str | None = attrs.field(default=None, converter=_indexed)
    model: str | None = attrs.field(default=None, converter=_indexed)
    #: An error code, or True: every failed call.
    error: str | bool | None = attrs.field(default=None, converter=_indexed)
    parent: str | None = attrs.field(default=None, converter=_indexed)
    plugin: str | None = attrs.field(default=None, converter=_indexed)
    #: ``YYYY-MM-DD``: calls that started that day.
    day: str | None = None
    rated: bool = False
    newest: int | None = None
    before: str | None = attrs.field(default=None, converter=_indexed)

    @property
    def whole_log(self) -> bool:
        """Whether every call is wanted (or every rated one), in the log's order: a read of the whole
        log, no index needed."""
        return self in _WHOLE_LOG

    def sql(self, payload: str, marker: str) -> tuple[str, list[Any]]:
        """The query over ``functai_calls`` selecting ``payload``, with its parameters."""
        where: list[str] = []
        params: list[Any] = []

        def add(condition: str, *values: Any) -> None:
            where.append(condition)
            params.extend(values)

        if self.id is not None:
            if self.prefix:
                add("id >= ? AND id < ?", self.id, self.id + _TOP)
            else:
                add("id = ?", self.id)
        for name in ("function", "module", "model", "parent"):
            if getattr(self, name) is not None:
                add(f"{name} = ?", getattr(self, name))
        if self.error is True:
            add("code IS NOT NULL")
        elif isinstance(self.error, str):
            add("code = ?", self.error)
        if self.plugin is not None:  # SQLite's LIKE ignores case: a search for the name itself does not
            add("instr(plugins, ?) > 0" if marker == "?" else "strpos(plugins, ?) > 0", f" {self.plugin} ")
        if self.day is not None:
            add("started >= ? AND started < ?", self.day, self.day + "\x7f")
        if self.rated:
            add("EXISTS (SELECT 1 FROM functai_ratings AS r WHERE r.call = functai_calls.id)")
        if self.before is not None:
            add("(started, seq) < (SELECT started, seq FROM functai_calls AS b WHERE b.id = ? ORDER BY b.seq LIMIT 1)",
                self.before)
        text = f"SELECT {payload} FROM functai_calls"
        if where:
            text += " WHERE " + " AND ".join(where)
        if self.newest is not None:
            text += " ORDER BY started DESC, seq DESC LIMIT ?"
            params.append(self.newest)
        else:
            text += " ORDER BY seq"
        return text.replace("?", marker), params

    def matches(self, data: Mapping[str, Any]) -> bool:
        """Whether a record's data passes the filters (not ``rated``, ``newest`` or ``before``,
        which need the rest of the log): what an index said of a record, checked on the record."""
        identity, *values = call_row(data)
        found = dict(zip(COLUMNS, values))
        if self.id is not None and not (str(identity).startswith(self.id) if self.prefix else identity == self.id):
            return False
        if any(getattr(self, name) is not None and found[name] != getattr(self, name)
               for name in ("function", "module", "model", "parent")):
            return False
        if self.error is not None and (found["code"] is None if self.error is True else found["code"] != self.error):
            return False
        if self.plugin is not None and f" {self.plugin} " not in (found["plugins"] or ""):
            return False
        return self.day is None or (found["started"] or "").startswith(self.day)

_WHOLE_LOG = (CallQuery(), CallQuery(rated=True))
