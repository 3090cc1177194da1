"""Stores named by URL: SQLite and PostgreSQL beside the folder and memory stores.

``open_store("sqlite:///convs.db")`` or ``store="postgresql://host/db"`` pick
a store by URL scheme (`urls`); the same URLs name a call log
(``log_calls=``, see `calllog`). Other distributions add schemes through the
``functai.stores`` entry-point group. Nothing here is imported by a plain
call: a module loads when its scheme is first used.
"""

from __future__ import annotations

from .urls import SCHEMA_VERSION, is_url, open_url, redact

__all__ = ["SCHEMA_VERSION", "is_url", "open_url", "redact"]
