"""A SQLite call log made readable in datasette: two views with a column per field, and metadata.

``python -m functai_console.datasette calls.db`` adds the views ``calls`` and ``ratings`` (``CREATE
VIEW IF NOT EXISTS``: no row is changed, and functai reads and writes its tables as before) and
writes ``metadata.json`` beside the file, with facets for function, model and error code; then
``datasette calls.db -m metadata.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from typing import Any

#: Each view column and the JSON path of the call log line it reads.
CALL_COLUMNS = [
    ("id", None), ("started", "$.started"), ("function", "$.function"), ("module", "$.module"),
    ("model", "$.model"), ("seconds", "$.seconds"), ("error_code", "$.error.code"),
    ("error_message", "$.error.message"), ("prompt_tokens", "$.usage.prompt_tokens"),
    ("completion_tokens", "$.usage.completion_tokens"), ("total_tokens", "$.usage.total_tokens"),
    ("attempts", "$.attempts"), ("parent", "$.parent"), ("conversation", "$.conversation.id"),
    ("turn", "$.conversation.turn"), ("version", "$.version"), ("inputs", "$.inputs"), ("output", "$.output"),
    ("instruction", "$.instruction"), ("changes", "$.changes"), ("tool_calls", "$.tool_calls"),
    ("finish_reason", "$.finish_reason"),
]
RATING_COLUMNS = [("call", None), ("good", "$.good"), ("by", "$.by"), ("correction", "$.correction"),
                  ("at", "$.at")]


def _select(table: str, columns: list[tuple[str, str | None]]) -> str:
    """The view's SELECT: json_extract gives text and numbers as they are, objects and lists as
    JSON text (which datasette shows as JSON)."""
    parts = [f'"{name}"' if path is None else f"json_extract(line, '{path}') AS \"{name}\"" for name, path in columns]
    return f"SELECT seq, {', '.join(parts)} FROM {table}"


VIEWS = {
    "calls": _select("functai_calls", CALL_COLUMNS),
    "ratings": _select("functai_ratings", RATING_COLUMNS),
}


def metadata(database: str) -> dict[str, Any]:
    """datasette's metadata for the call log in ``database`` (the file's name without ``.db``)."""
    return {
        "title": "functai call log",
        "description": "One row per AI function call (the view calls), and the ratings people gave them.",
        "databases": {database: {"tables": {
            "calls": {
                "description": "Every call: what was asked, which model answered, how long it took, how it ended.",
                "facets": ["function", "model", "error_code"],
                "sort_desc": "seq",
                "label_column": "function",
                "columns": {
                    "error_code": "the FunctAIError code of a failed call (empty when it answered)",
                    "changes": "every change a plugin made: plugin, version, hook, change, note",
                    "tool_calls": "each tool call: name, input, output (or blocked/refused/error)",
                    "seconds": "wall-clock seconds of the whole call",
                },
            },
            "ratings": {"description": "Ratings given with functai.rate or functai rate.", "facets": ["good", "by"]},
            "functai_calls": {"hidden": True},
            "functai_ratings": {"hidden": True},
            "functai_records": {"hidden": True},
            "functai_meta": {"hidden": True},
        }}},
    }


def prepare(path: str) -> str:
    """Add the views to the SQLite file at ``path`` and write ``metadata.json`` beside it; its path."""
    if path.startswith("sqlite:///"):
        path = path[len("sqlite:///"):]
    if not os.path.isfile(path):
        raise SystemExit(f"no SQLite call log {path}")
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "functai_calls" not in tables:
            raise SystemExit(f"{path} holds no functai call log (no functai_calls table)")
        for name, select in VIEWS.items():
            db.execute(f'CREATE VIEW IF NOT EXISTS "{name}" AS {select}')
    database = os.path.splitext(os.path.basename(path))[0]
    target = os.path.join(os.path.dirname(os.path.abspath(path)), "metadata.json")
    with open(target, "w", encoding="utf-8") as file:
        json.dump(metadata(database), file, indent=2)
        file.write("\n")
    return target


def main(argv: list[str] | None = None) -> None:
    """``python -m functai_console.datasette PATH.db`` (``--help`` says what it does)."""
    parser = argparse.ArgumentParser(
        prog="python -m functai_console.datasette",
        description="Make a SQLite call log readable in datasette: add the views calls and ratings (no row is "
                    "changed) and write metadata.json beside the file.")
    parser.add_argument("path", metavar="PATH.db", help="the SQLite file log_calls writes (sqlite:///PATH.db)")
    path = parser.parse_args(argv).path
    written = prepare(path)
    print(f"views calls and ratings added; wrote {written}\nnow: datasette {path} -m {written}")


if __name__ == "__main__":
    main()
