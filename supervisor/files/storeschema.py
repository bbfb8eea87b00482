"""The state database's tables, the migrations from an older herd's, and its transactions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentherd.supervisor.files.storewarnings import backfill_warnings

SCHEMA_VERSION = 3
"""Bump with a migration in `_MIGRATIONS` whenever the tables change."""

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks(
    handle TEXT PRIMARY KEY, session TEXT NOT NULL, first_run INTEGER NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(
    session TEXT NOT NULL, run INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY(session, run));
CREATE TABLE IF NOT EXISTS events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, session TEXT, run INTEGER,
    kind TEXT NOT NULL, message TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_session ON events(session, seq);
CREATE TABLE IF NOT EXISTS checkpoints(
    id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL, sha TEXT NOT NULL,
    data TEXT NOT NULL, verified INTEGER, verification TEXT, UNIQUE(session, sha));
"""

_MIGRATIONS: dict[int, str] = {
    2: """
CREATE TABLE IF NOT EXISTS warnings(
    session TEXT NOT NULL, kind TEXT NOT NULL, opened_seq INTEGER NOT NULL,
    opened_at TEXT NOT NULL, last_seq INTEGER NOT NULL, last_at TEXT NOT NULL,
    message TEXT NOT NULL, count INTEGER NOT NULL, closed_seq INTEGER, closed_at TEXT,
    PRIMARY KEY(session, kind, opened_seq));
CREATE INDEX IF NOT EXISTS warnings_open ON warnings(session, closed_seq);
""",
    3: """
ALTER TABLE warnings ADD COLUMN acked_seq INTEGER;
ALTER TABLE warnings ADD COLUMN acked_at TEXT;
""",
}
"""Statements that take the schema from version N-1 to N."""


class StoreError(Exception):
    """The database cannot be used (newer schema, corruption); the message says what to do."""


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Create the tables, or bring those of an older herd up to SCHEMA_VERSION, in one
    transaction; StoreError when a newer herd wrote them."""
    with Transaction(db):
        db.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} was written by a newer herd (schema {version}, this herd knows "
                f"{SCHEMA_VERSION}); upgrade herd or move .herd/ aside"
            )
        if version == 0:
            for statement in _SCHEMA_V1.strip().split(";"):
                if statement.strip():
                    db.execute(statement)
            version = 1
        backfill = False
        while version < SCHEMA_VERSION:
            version += 1
            for statement in _MIGRATIONS[version].split(";"):
                if statement.strip():
                    db.execute(statement)
            backfill = backfill or version == 2
        if backfill:  # once the warnings table has all its columns
            backfill_warnings(db)
        db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK when the body raised."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self._rollback()
            return
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error:
            self._rollback()  # a failed COMMIT leaves the transaction open: end it, keep nothing
            raise

    def _rollback(self) -> None:
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # sqlite rolled back already (it does on some I/O errors)
