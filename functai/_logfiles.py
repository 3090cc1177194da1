"""A call log's files in a folder (``calls.jsonl`` and ``ratings.jsonl``), and how a line that is
not a record is reported. The records themselves are `functai._calls.records`; this is what the
stores need of them too (a folder store shared with a call log leaves its files out; a call log
kept by URL reports its rows as a folder's lines), so it is part of the core."""

from __future__ import annotations


from ._log import warn

LOG_FILE = "calls.jsonl"
#: Beside it in a call log folder: the ratings made of its calls (`functai._evaluation.ratings`).
RATINGS_FILE = "ratings.jsonl"

def report_skipped(path: str, number: int, reason: str, skipped: list[tuple[str, str]] | None) -> None:
    """Add a skipped line to ``skipped``, or warn about it when no list is given."""
    if skipped is not None:
        skipped.append((f"{path}:{number}", reason))
    else:
        warn("log line skipped", at=f"{path}:{number}", reason=reason)
