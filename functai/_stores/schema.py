"""What the SQL stores keep beside each record's JSON, and how older schemas are brought up to date.

Schema 2 keeps each record's ``kind``, ``turn`` and (for a turn) ``parent``,
indexed by ``(conversation, turn)``, so a view opened at a turn reads only that
turn's branch. Schema 1 (the JSON only) is migrated by the first write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import _codec as codec
from .._conversations.checks import UNUSABLE as UNUSABLE  # a record_of that is not a record has it
from .._conversations.turndata import FORMAT
from .protocol import not_an_object

#: What adds schema 2's columns to a schema-1 table (both dialects).
ADD_COLUMNS = (
    "ALTER TABLE functai_records ADD COLUMN kind TEXT",
    "ALTER TABLE functai_records ADD COLUMN turn TEXT",
    "ALTER TABLE functai_records ADD COLUMN parent TEXT",
)
INDEX = "CREATE INDEX IF NOT EXISTS functai_records_turn ON functai_records (conversation, turn)"


def columns(record: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(kind, turn, parent)`` of a record, as the indexed columns keep them."""
    kind = record.get("kind")
    turn = record.get("turn")
    parent = record.get("parent") if kind == "turn" else None
    return (
        kind if isinstance(kind, str) else None,
        turn if isinstance(turn, str) else None,
        parent if isinstance(parent, str) else None,
    )


def record_of(data: str | bytes | None) -> dict[str, Any]:
    """A row's record; a row that is not a JSON object keeps its place (positions stay one
    sequence) as a record saying why it cannot be used, which a conversation reports as damage.
    None: the row at that position was removed."""
    if data is None:
        return {"functai_conversation": FORMAT, UNUSABLE: "its row was removed from the store", "text": ""}
    if not isinstance(data, str):  # a value put in by hand: SQLite keeps whatever type it is given
        if not isinstance(data, bytes):
            return {"functai_conversation": FORMAT, UNUSABLE: f"its row is not text (a {type(data).__name__})",
                    "text": ""}
        try:
            data = data.decode()
        except UnicodeDecodeError:
            return {"functai_conversation": FORMAT, UNUSABLE: "its row is not UTF-8 text", "text": ""}
    try:
        record = codec.loads(data)
    except ValueError:
        why = "not JSON" if data.strip() else "an empty line"
    else:
        if isinstance(record, dict):
            return record
        why = not_an_object(record)
    return {"functai_conversation": FORMAT, UNUSABLE: why, "text": data[:200]}


def backfill(rows: Iterable[tuple[str, int, str]]) -> list[tuple[str | None, str | None, str | None, str, int]]:
    """``(kind, turn, parent, conversation, position)`` for each schema-1 row (an UPDATE's parameters)."""
    return [(*columns(record_of(data)), conversation, position) for conversation, position, data in rows]


#: The records of the branch ending at a turn: walk up the parents, then take every record of
#: those turns or of no turn (the header), each an index lookup on (conversation, turn).
#: ``{indexed}`` names that index where the planner needs telling (SQLite, which has no statistics).
BRANCH = """
WITH RECURSIVE branch(id) AS (
    SELECT {tip}
    UNION
    SELECT r.parent FROM branch AS b JOIN functai_records AS r {indexed}
    ON r.conversation = {conversation} AND r.turn = b.id
    WHERE r.kind = 'turn' AND r.parent IS NOT NULL
)
SELECT position, data FROM functai_records {indexed} WHERE conversation = {conversation} AND turn IS NULL
UNION ALL
SELECT r.position, r.data FROM branch AS b JOIN functai_records AS r {indexed}
ON r.conversation = {conversation} AND r.turn = b.id
ORDER BY 1
"""


def branch_sql(old: bool, **names: str) -> str:
    """The query for a branch's ``(position, data)`` rows; on an older schema, every record."""
    if old:
        return "SELECT position, data FROM functai_records WHERE conversation = {conversation} ORDER BY 1".format(
            conversation=names["conversation"])
    return BRANCH.format(**names)
