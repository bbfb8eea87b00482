"""Who may run a session: one owner per session in PostgreSQL, with a fencing token per attempt.

The engine grants each attempt in a transaction that moves the session to its host and raises
the session's token. A host starts an attempt only while the token it was handed is still the
session's current one, and its daemon restarts or re-adopts a session only while the session
is its own. A host whose lease lapsed loses all it owned when it joins again (`revoke_host`,
in the same transaction as the join), so a machine that comes back never runs again a
session that moved, nor one the engine is about to move.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import psycopg

SCHEMA = """
CREATE TABLE IF NOT EXISTS herd_owners (
    session     text PRIMARY KEY,
    host        text,
    token       bigint NOT NULL,
    attempt     text NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS herd_waiting (
    session     text PRIMARY KEY,
    task        text NOT NULL,
    reason      text NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS herd_stops (
    task        text PRIMARY KEY,
    reason      text NOT NULL,
    stopped_at  timestamptz NOT NULL DEFAULT now()
)
"""


def grant(conn: psycopg.Connection, session: str, host: str, attempt: str) -> int:
    """Give the session to `host` for `attempt`; the attempt's fencing token."""
    row = conn.execute(
        """
        INSERT INTO herd_owners (session, host, token, attempt) VALUES (%s, %s, 1, %s)
        ON CONFLICT (session) DO UPDATE SET
            host = EXCLUDED.host, token = herd_owners.token + 1,
            attempt = EXCLUDED.attempt, granted_at = now()
        RETURNING token
        """,
        (session, host, attempt),
    ).fetchone()
    assert row is not None  # an upsert always returns its row
    return int(row[0])


FLEET_LIMIT = "fleet-limit"
"""Queued: the task waits for a fleet-wide slot (`[cluster] max_sessions`)."""
HOST_LIMIT = "host-limit"
"""Queued: the attempt waits for a slot on its host (`max_sessions_per_host`)."""


def wait_for_slot(conn: psycopg.Connection, session: str, task: str, reason: str) -> None:
    """Say the session's task `task` waits for a slot (`FLEET_LIMIT` or `HOST_LIMIT`)."""
    conn.execute(
        """
        INSERT INTO herd_waiting (session, task, reason) VALUES (%s, %s, %s)
        ON CONFLICT (session) DO UPDATE SET
            task = EXCLUDED.task, reason = EXCLUDED.reason, since = now()
        """,
        (session, task, reason),
    )


def slot_taken(conn: psycopg.Connection, session: str) -> None:
    """The session waits for no slot any more (its attempt begins, or it was stopped)."""
    conn.execute("DELETE FROM herd_waiting WHERE session = %s", (session,))


def waiting(conn: psycopg.Connection) -> dict[str, tuple[str, str]]:
    """Session -> (task, reason) of every task waiting for a slot."""
    found = conn.execute("SELECT session, task, reason FROM herd_waiting").fetchall()
    return {str(r[0]): (str(r[1]), str(r[2])) for r in found}


def grant_waiting(
    conn: psycopg.Connection, session: str, host: str, attempt: str, task: str
) -> int:
    """`grant`, and the task's attempt waits for its host's slot, in one transaction."""
    with conn.transaction():
        token = grant(conn, session, host, attempt)
        wait_for_slot(conn, session, task, HOST_LIMIT)
    return token


def holds(conn: psycopg.Connection, session: str, host: str, token: int) -> bool:
    """Whether `host` still holds the session under `token` (a later grant makes it stale)."""
    row = conn.execute(
        "SELECT 1 FROM herd_owners WHERE session = %s AND host = %s AND token = %s",
        (session, host, token),
    ).fetchone()
    return row is not None


def record_stop(conn: psycopg.Connection, task: str, reason: str) -> None:
    """Say who ended the task `task` (a workflow id) before its workflow is cancelled: a
    cancel with no such record is the engine's own (its host was proven dead)."""
    conn.execute(
        "INSERT INTO herd_stops (task, reason) VALUES (%s, %s) ON CONFLICT (task) DO NOTHING",
        (task, reason),
    )


def stop_reason(conn: psycopg.Connection, task: str) -> str | None:
    """Why a person (or a budget) ended the task; None when nobody did."""
    row = conn.execute("SELECT reason FROM herd_stops WHERE task = %s", (task,)).fetchone()
    return str(row[0]) if row else None


def revoke_host(conn: psycopg.Connection, host: str) -> list[str]:
    """Take every session away from `host` (its lease lapsed): the sessions it held."""
    rows = conn.execute(
        "UPDATE herd_owners SET host = NULL, token = token + 1 WHERE host = %s RETURNING session",
        (host,),
    ).fetchall()
    return sorted(r[0] for r in rows)


def may_push(conn: psycopg.Connection, session: str, host: str, token: int | None) -> bool:
    """Whether `host` may push the session's herd refs: it still owns the session, under
    `token` when it knows the attempt's (a session the engine never placed is the host's)."""
    row = conn.execute("SELECT host, token FROM herd_owners WHERE session = %s", (session,))
    found = row.fetchone()
    if found is None:
        return True
    return bool(found[0] == host and (token is None or int(found[1]) == token))


def not_mine(conn: psycopg.Connection, host: str, sessions: Iterable[str]) -> set[str]:
    """Of `sessions`, those the engine has given to another host or taken from this one.

    A session the engine never placed has no owner row: it is the host's own (started on its
    daemon directly), as on one machine.
    """
    rows = conn.execute(
        "SELECT session FROM herd_owners WHERE session = ANY(%s) AND host IS DISTINCT FROM %s",
        (list(sessions), host),
    ).fetchall()
    return {r[0] for r in rows}


class Ownership:
    """This host's view of what it owns, read at join and at every lease renewal.

    The daemon asks `owns` before it restarts or re-adopts a session (from its own threads and
    the event loop): a set lookup, never a query. Nothing is owned while the lease is lost.
    """

    def __init__(self, host: str, sessions: list[str]) -> None:
        self.host = host
        self.sessions = sessions
        self.elsewhere: set[str] = set()
        """Sessions this host must not run: another host holds them, or nobody does."""
        self.fenced = True
        """The lease is lost (or not taken yet): nothing is this host's."""
        self._mine_at: dict[str, float] = {}
        """When the engine last handed this host each session (monotonic seconds)."""
        self._tokens: dict[str, int] = {}
        """The fencing token of each session's attempt this host was handed."""
        self._lock = threading.Lock()

    def owns(self, session: str) -> bool:
        """Whether this host may restart or re-adopt `session` now."""
        with self._lock:
            return not self.fenced and session not in self.elsewhere

    def refresh(self, conn: psycopg.Connection) -> set[str]:
        """Read the owners again; the sessions that are not this host's."""
        began = time.monotonic()
        found = not_mine(conn, self.host, self.sessions)
        with self._lock:
            # A session handed to us while the query ran is ours: the query saw the old owner.
            self.elsewhere = {s for s in found if self._mine_at.get(s, 0.0) < began}
            return set(self.elsewhere)

    def mine(self, session: str, token: int | None = None) -> None:
        """The engine handed this host `session` (its token checked): it is ours until a
        refresh says otherwise."""
        with self._lock:
            self.elsewhere.discard(session)
            self._mine_at[session] = time.monotonic()
            if token is not None:
                self._tokens[session] = token

    def token(self, session: str) -> int | None:
        """The token of the attempt this host was last handed for `session` (None: none)."""
        with self._lock:
            return self._tokens.get(session)

    def may_push(self, conn: psycopg.Connection, session: str) -> bool:
        """Whether this host may push the session's herd refs now (asked of the database)."""
        return self.owns(session) and may_push(conn, session, self.host, self.token(session))
