"""The SQLite memory: session and run records, tasks, and the append-only event log (WAL)."""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.open_warnings import WarningRecord
from agentherd.sessions.records import Event, RunRecord, SessionRecord, TaskRecord
from agentherd.supervisor.files.storeschema import StoreError, Transaction, migrate
from agentherd.supervisor.files.storewarnings import fold_warnings, open_records

log = logging.getLogger("herd.store")

MAX_PENDING_EVENTS = 10_000
"""Events held in memory while the disk is full; beyond this the oldest are dropped (counted)."""

_WRITE_FAILURES = frozenset({"SQLITE_FULL", "SQLITE_IOERR"})
"""sqlite error names (extended ones start with these) that mean "the disk refused the write"."""


class StoreUnavailable(StoreError):
    """A write the disk refused (full); the caller re-derives it later from its source."""


def _disk_refused(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return any(name.startswith(prefix) for prefix in _WRITE_FAILURES) or "disk" in str(exc)


@dataclass
class Outage:
    """A time the disk refused writes: when it began, and what was held back meanwhile."""

    since: float
    error: str
    held_changes: int = 0
    dropped_events: int = 0


@dataclass(frozen=True)
class Verification:
    """A checkpoint's verdict, written with its event."""

    sha: str
    passed: bool
    result: dict[str, Any]


@dataclass
class Change:
    """Everything one state change writes, committed in one transaction before it is announced.

    With a `checkpoint`, the events belong to it: a checkpoint known already writes nothing.
    """

    session: SessionRecord | None = None
    run: RunRecord | None = None
    task: TaskRecord | None = None
    events: tuple[Event, ...] = ()
    checkpoint: tuple[str, Checkpoint] | None = None
    """(session name, commit) of a commit seen in the session's worktree."""
    verification: tuple[str, Verification] | None = None
    """(session name, verdict) of a checkpoint's verification."""


class Store:
    """One writer over `.herd/state.db`; the daemon's event loop is its only user."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._pending: list[Change | Callable[[], None]] = []
        """Changes the disk refused, oldest first, written before any newer one."""
        self.outage: Outage | None = None
        self.recovered: Outage | None = None
        migrate(self._db, path)

    def _transaction(self) -> Transaction:
        return Transaction(self._db)

    def close(self) -> None:
        """Close the database file."""
        self._db.close()

    def reader(self) -> Store:
        """A read-only connection of its own, for one worker thread; the caller closes it.

        WAL lets it read a consistent snapshot while the loop writes, so a long read (a report
        over thousands of events) need not run on the loop. It has no writes to hold back.
        """
        reader = Store.__new__(Store)
        reader.path = self.path
        uri = self.path.resolve().as_uri() + "?mode=ro"
        reader._db = sqlite3.connect(uri, uri=True, isolation_level=None)
        reader._db.execute("PRAGMA busy_timeout=5000")
        reader._pending = []
        reader.outage = None
        reader.recovered = None
        return reader

    @property
    def unavailable(self) -> bool:
        """True while the disk refuses writes (changes wait in memory, in order)."""
        return bool(self._pending)

    def commit(self, change: Change) -> list[Event]:
        """Write a change and its events atomically; returns the events with their seq.

        When the disk refuses the write, the change waits in memory (reads see it) and is
        written, after every change before it, by the next commit or `retry` that succeeds;
        its events are returned with seq 0 (not written yet).
        """
        if self._pending and not self.retry():
            self._hold(change)
            return list(change.events)
        try:
            with self._transaction():
                return self._write(change)
        except sqlite3.Error as exc:
            if not _disk_refused(exc):
                raise
            self._refused(exc)
            self._hold(change)
            return list(change.events)

    def retry(self) -> bool:
        """Write the changes held back while the disk was full; True when none is left."""
        if not self._pending:
            return True
        try:
            with self._transaction():
                for change in self._pending:
                    if isinstance(change, Change):
                        self._write(change)
                    else:
                        change()
        except sqlite3.Error as exc:
            if not _disk_refused(exc):
                raise
            return False
        outage = self.outage
        assert outage is not None
        outage.held_changes = len(self._pending)
        self._pending = []
        self.recovered = outage
        self.outage = None
        log.info(
            "the disk takes writes again after %.0fs; %d held change(s) written",
            time.monotonic() - outage.since,
            outage.held_changes,
        )
        return True

    def take_recovery(self) -> Outage | None:
        """The outage that just ended (once), so the daemon can report it and catch up."""
        recovered, self.recovered = self.recovered, None
        return recovered

    def _refused(self, exc: sqlite3.Error) -> None:
        if self.outage is None:
            self.outage = Outage(time.monotonic(), str(exc))
            log.error(
                "%s: %s; changes are held in memory and written when space returns",
                self.path,
                exc,
            )

    def _hold(self, change: Change | Callable[[], None]) -> None:
        self._pending.append(change)
        events = sum(len(c.events) for c in self._pending if isinstance(c, Change))
        if events > MAX_PENDING_EVENTS:  # the records stay (small, needed); old events go
            for index, held in enumerate(self._pending):
                if isinstance(held, Change) and held.events:
                    self._pending[index] = dataclasses.replace(held, events=())
                    assert self.outage is not None
                    self.outage.dropped_events += len(held.events)
                    break

    def _held_changes(self) -> list[Change]:
        return [c for c in reversed(self._pending) if isinstance(c, Change)]

    def _write(self, change: Change) -> list[Event]:
        written: list[Event] = []
        if change.checkpoint is not None:
            name, checkpoint = change.checkpoint
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO checkpoints(session, sha, data) VALUES(?, ?, ?)",
                (name, checkpoint.sha, checkpoint.model_dump_json()),
            )
            if cursor.rowcount == 0:
                return written  # known already (seen again after a full disk): no news
        if change.verification is not None:
            name, verdict = change.verification
            self._db.execute(
                "UPDATE checkpoints SET verified=?, verification=? WHERE session=? AND sha=?",
                (int(verdict.passed), json.dumps(verdict.result), name, verdict.sha),
            )
        if change.session is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO sessions(name, data) VALUES(?, ?)",
                (change.session.name, change.session.model_dump_json()),
            )
        if change.run is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO runs(session, run, data) VALUES(?, ?, ?)",
                (change.run.session, change.run.run, change.run.model_dump_json()),
            )
        if change.task is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO tasks(handle, session, first_run, data) VALUES(?, ?, ?, ?)",
                (
                    change.task.handle,
                    change.task.session,
                    change.task.first_run,
                    change.task.model_dump_json(),
                ),
            )
        for event in change.events:
            cursor = self._db.execute(
                "INSERT INTO events(at, session, run, kind, message, data) "
                "VALUES(?, ?, ?, ?, ?, ?)",
                (
                    event.at,
                    event.session,
                    event.run,
                    event.kind,
                    event.message,
                    json.dumps(event.data),
                ),
            )
            stored = event.model_copy(update={"seq": cursor.lastrowid})
            fold_warnings(self._db, stored)
            written.append(stored)
        return written

    def open_warnings(self, session: str) -> list[WarningRecord]:
        """The session's open warnings, oldest latest-occurrence first (a new daemon loads them)."""
        return open_records(self._db, session)

    def sessions(self) -> dict[str, SessionRecord]:
        """Every session record, by name."""
        rows = self._db.execute("SELECT data FROM sessions").fetchall()
        records = (SessionRecord.model_validate_json(row[0]) for row in rows)
        found = {record.name: record for record in records}
        for held in reversed(self._held_changes()):
            if held.session is not None:
                found[held.session.name] = held.session.model_copy()
        return found

    def run(self, session: str, run: int) -> RunRecord | None:
        """One run's record."""
        for held in self._held_changes():
            if held.run is not None and (held.run.session, held.run.run) == (session, run):
                return held.run.model_copy()
        row = self._db.execute(
            "SELECT data FROM runs WHERE session=? AND run=?", (session, run)
        ).fetchone()
        return RunRecord.model_validate_json(row[0]) if row else None

    def runs(self, session: str) -> list[RunRecord]:
        """All runs of a session, oldest first."""
        rows = self._db.execute(
            "SELECT data FROM runs WHERE session=? ORDER BY run", (session,)
        ).fetchall()
        found = {r.run: r for r in (RunRecord.model_validate_json(row[0]) for row in rows)}
        for held in reversed(self._held_changes()):
            if held.run is not None and held.run.session == session:
                found[held.run.run] = held.run.model_copy()
        return [found[number] for number in sorted(found)]

    def session_of_tag(self, tag: str) -> str | None:
        """The session one of whose runs carries the tag `tag`, or None (another daemon's)."""
        for held in self._held_changes():
            if held.run is not None and held.run.tag == tag:
                return held.run.session
        row = self._db.execute(
            "SELECT session FROM runs WHERE json_extract(data, '$.tag') = ? LIMIT 1", (tag,)
        ).fetchone()
        return str(row[0]) if row else None

    def task(self, handle: str) -> TaskRecord | None:
        """One task by its handle."""
        for held in self._held_changes():
            if held.task is not None and held.task.handle == handle:
                return held.task.model_copy()
        row = self._db.execute("SELECT data FROM tasks WHERE handle=?", (handle,)).fetchone()
        return TaskRecord.model_validate_json(row[0]) if row else None

    def events(
        self,
        since_seq: int = 0,
        session: str | None = None,
        kinds: Iterable[str] | None = None,
        limit: int = 1000,
        among: Iterable[str] | None = None,
    ) -> list[Event]:
        """Events after `since_seq`, oldest first, optionally of one session or some kinds;
        with `among`, only events of those sessions (none of the daemon's own)."""
        query = "SELECT seq, at, session, run, kind, message, data FROM events WHERE seq > ?"
        params: list[Any] = [since_seq]
        if session is not None:
            query += " AND session = ?"
            params.append(session)
        if among is not None:
            names = list(among)
            query += f" AND session IN ({','.join('?' * len(names))})"
            params.extend(names)
        kind_list = list(kinds or ())
        if kind_list:
            query += f" AND kind IN ({','.join('?' * len(kind_list))})"
            params.extend(kind_list)
        query += " ORDER BY seq LIMIT ?"
        params.append(limit)
        return [
            Event(
                seq=r[0],
                at=r[1],
                session=r[2],
                run=r[3],
                kind=r[4],
                message=r[5],
                data=json.loads(r[6]),
            )
            for r in self._db.execute(query, params).fetchall()
        ]

    def add_checkpoint(self, session: str, checkpoint: Checkpoint) -> bool:
        """Record a commit seen in the session's worktree; False when it was known already.

        Raises StoreUnavailable while the disk is full: git still has the commit, and the
        observer reads it again once space returns.
        """
        if not self.retry():
            raise StoreUnavailable(f"{self.path}: the disk is full; checkpoint not recorded yet")
        try:
            with self._transaction():
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO checkpoints(session, sha, data) VALUES(?, ?, ?)",
                    (session, checkpoint.sha, checkpoint.model_dump_json()),
                )
        except sqlite3.Error as exc:
            if not _disk_refused(exc):
                raise
            self._refused(exc)
            raise StoreUnavailable(f"{self.path}: {exc}; checkpoint not recorded yet") from None
        return cursor.rowcount > 0

    def checkpoints(self, session: str, limit: int = 10_000) -> list[Checkpoint]:
        """The session's checkpoints, oldest first, with their verification verdicts."""
        rows = self._db.execute(
            "SELECT data, verified FROM checkpoints WHERE session=? ORDER BY id DESC LIMIT ?",
            (session, limit),
        ).fetchall()
        return [
            Checkpoint.model_validate_json(data).model_copy(
                update={"verified": None if verified is None else bool(verified)}
            )
            for data, verified in reversed(rows)
        ]

    def checkpoint(self, session: str, sha: str) -> Checkpoint | None:
        """One recorded checkpoint of the session, with its verdict; None when unknown."""
        row = self._db.execute(
            "SELECT data, verified FROM checkpoints WHERE session=? AND sha=?", (session, sha)
        ).fetchone()
        if row is None:
            return None
        verified = None if row[1] is None else bool(row[1])
        return Checkpoint.model_validate_json(row[0]).model_copy(update={"verified": verified})

    def verifications(self, session: str) -> dict[str, dict[str, Any]]:
        """Verification results by checkpoint sha."""
        rows = self._db.execute(
            "SELECT sha, verification FROM checkpoints WHERE session=? AND verification "
            "IS NOT NULL",
            (session,),
        ).fetchall()
        return {sha: json.loads(result) for sha, result in rows}

    def verification(self, session: str, sha: str) -> dict[str, Any] | None:
        """The stored verification result of one checkpoint, or None when it has none yet."""
        row = self._db.execute(
            "SELECT verification FROM checkpoints WHERE session=? AND sha=? AND verification "
            "IS NOT NULL",
            (session, sha),
        ).fetchone()
        return json.loads(row[0]) if row else None

    def last_verified(self, session: str) -> str | None:
        """The newest checkpoint whose verification passed."""
        row = self._db.execute(
            "SELECT sha FROM checkpoints WHERE session=? AND verified=1 ORDER BY id DESC LIMIT 1",
            (session,),
        ).fetchone()
        return str(row[0]) if row else None
