"""The warnings table: each written event opens, counts or closes its session's warning records."""

from __future__ import annotations

import json
import sqlite3

from agentherd.sessions import open_warnings
from agentherd.sessions.open_warnings import WarningRecord
from agentherd.sessions.records import Event


def fold_warnings(db: sqlite3.Connection, event: Event) -> None:
    """Open, count or close the session's warning records for a written event (same tx)."""
    if event.session is None or not open_warnings.concerns(event.kind):
        return
    current = {record.kind: record for record in open_records(db, event.session)}
    for record in open_warnings.fold(current, event):
        db.execute(
            "INSERT OR REPLACE INTO warnings(session, kind, opened_seq, opened_at, "
            "last_seq, last_at, message, count, closed_seq, closed_at, acked_seq, acked_at) "
            "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.session,
                record.kind,
                record.opened_seq,
                record.opened_at,
                record.last_seq,
                record.last_at,
                record.message,
                record.count,
                record.closed_seq,
                record.closed_at,
                record.acked_seq,
                record.acked_at,
            ),
        )


def open_records(db: sqlite3.Connection, session: str) -> list[WarningRecord]:
    """The session's open warnings, oldest latest-occurrence first."""
    rows = db.execute(
        "SELECT session, kind, opened_seq, opened_at, last_seq, last_at, message, count, "
        "closed_seq, closed_at, acked_seq, acked_at FROM warnings "
        "WHERE session=? AND closed_seq IS NULL "
        "ORDER BY last_seq",
        (session,),
    ).fetchall()
    names = tuple(WarningRecord.model_fields)
    return [WarningRecord.model_validate(dict(zip(names, row, strict=True))) for row in rows]


def backfill_warnings(db: sqlite3.Connection) -> None:
    """Fold the event log of an older herd into warning records (once, at the upgrade)."""
    rows = db.execute(
        "SELECT seq, at, session, run, kind, message, data FROM events "
        "WHERE session IS NOT NULL ORDER BY seq"
    )
    for seq, at, session, run, kind, message, data in rows.fetchall():
        if open_warnings.concerns(kind):
            fold_warnings(
                db,
                Event(
                    seq=seq,
                    at=at,
                    session=session,
                    run=run,
                    kind=kind,
                    message=message,
                    data=json.loads(data),
                ),
            )
