"""What a host shows the rest of the cluster, and the commands it takes from it.

Each host's daemon stays the only owner of its sessions; the cluster sees them through three
tables in PostgreSQL that this host keeps, every `PUBLISH_S`:

- `herd_status`: one row per (host, session), the session's `herd status --json` object,
  written only when it changed (a fleet of N sessions costs at most N small rows a tick);
- `herd_events`: this host's event log, copied in order, at most `EVENTS_PAGE` a tick, under
  a fleet-wide `seq` (each row keeps the host's own seq: copying twice is a no-op);
- `herd_commands`: verbs a viewer on any machine addresses to this host (stop, pause,
  resume, approve, reject, ack, report). The host takes each row once, asks its own daemon,
  and writes the reply back (at most `RESULT_MAX_BYTES`): the viewer's acknowledgement.

Output logs and files stay on their host: a report is made by the host's daemon and shipped
back as one bounded reply.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import psycopg

from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster import leases

log = logging.getLogger(__name__)

PUBLISH_S = 0.5
"""How often a host copies changed status rows and new events, and looks for commands."""
EVENTS_PAGE = 1000
"""Events copied per tick at most (a backlog drains over several ticks)."""
RESULT_MAX_BYTES = 4 * 1024 * 1024
"""A command's reply larger than this (a huge report) is refused, not shipped."""
COMMAND_VERBS = ("stop", "pause", "resume", "approve", "reject", "ack", "report")
"""What a viewer may ask a host's daemon to do through the cluster."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS herd_status (
    host        text NOT NULL,
    session     text NOT NULL,
    status      jsonb NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, session)
);
CREATE TABLE IF NOT EXISTS herd_events (
    seq         bigserial PRIMARY KEY,
    host        text NOT NULL,
    identity    text NOT NULL,
    host_seq    bigint NOT NULL,
    event       jsonb NOT NULL,
    session     text,
    UNIQUE (identity, host_seq)
);
CREATE INDEX IF NOT EXISTS herd_events_session ON herd_events (session, seq);
CREATE TABLE IF NOT EXISTS herd_commands (
    id          text PRIMARY KEY,
    host        text NOT NULL,
    session     text NOT NULL,
    verb        text NOT NULL,
    args        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    taken_at    timestamptz,
    done_at     timestamptz,
    result      jsonb,
    error       jsonb
);
CREATE INDEX IF NOT EXISTS herd_commands_open ON herd_commands (host) WHERE taken_at IS NULL;
"""


def ensure_schema(conn: psycopg.Connection) -> None:
    """Create the view's tables (idempotent; serialised across hosts by an advisory lock)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('herd_view'))")
        conn.execute(SCHEMA)


class Publisher:
    """Copies this host's status and events to PostgreSQL and runs the commands sent to it."""

    def __init__(self, url: str, host: str, identity: str, client: Client) -> None:
        self.url = url
        self.host = host
        self.identity = identity
        self.client = client
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None
        self._shown: dict[str, str] = {}
        self._event_seq: int | None = None
        self._stop = threading.Event()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = leases.connect(self.url)
            ensure_schema(self._conn)
            self._shown = {}  # after a partition, write every row again
        return self._conn

    def flush(self) -> None:
        """Publish what changed now (also called before a step returns, so a viewer that
        saw the task end sees its events)."""
        with self._lock:
            try:
                conn = self._connection()
                # One transaction: a viewer that sees a state sees the events that led to it.
                with conn.transaction():
                    self._publish_status(conn)
                    self._publish_events(conn)
            except ApiError as exc:  # the daemon is starting or stopping: next tick
                log.info("cluster: nothing to publish now: %s", exc.message)
                self._shown, self._event_seq = {}, None  # the transaction was rolled back
            except (psycopg.Error, OSError) as exc:
                log.warning("cluster: cannot publish to PostgreSQL: %s", exc)
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                self._event_seq = None  # read back from PostgreSQL: nothing is skipped

    def _publish_status(self, conn: psycopg.Connection) -> None:
        statuses: list[dict[str, Any]] = self.client.call("ls")
        names = [s["session"] for s in statuses]
        for status in statuses:
            text = json.dumps({**status, "host": self.host}, sort_keys=True)
            if self._shown.get(status["session"]) == text:
                continue
            conn.execute(
                """
                INSERT INTO herd_status (host, session, status) VALUES (%s, %s, %s)
                ON CONFLICT (host, session) DO UPDATE
                SET status = EXCLUDED.status, changed_at = now()
                """,
                (self.host, status["session"], text),
            )
            self._shown[status["session"]] = text
        gone = [name for name in self._shown if name not in names]
        if gone:  # sessions taken out of this host's herd.toml by a reload
            conn.execute(
                "DELETE FROM herd_status WHERE host = %s AND NOT (session = ANY(%s))",
                (self.host, names),
            )
            for name in gone:
                del self._shown[name]

    def _publish_events(self, conn: psycopg.Connection) -> None:
        if self._event_seq is None:
            row = conn.execute(
                "SELECT coalesce(max(host_seq), 0) FROM herd_events WHERE identity = %s",
                (self.identity,),
            ).fetchone()
            self._event_seq = int(row[0]) if row else 0
        events: list[dict[str, Any]] = self.client.call(
            "events", since=self._event_seq, limit=EVENTS_PAGE
        )
        if not events:
            return
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                """
                INSERT INTO herd_events (host, identity, host_seq, event, session)
                VALUES (%s, %s, %s, %s, %s) ON CONFLICT (identity, host_seq) DO NOTHING
                """,
                [
                    (self.host, self.identity, e["seq"], json.dumps(e), e.get("session"))
                    for e in events
                ],
            )
        self._event_seq = int(events[-1]["seq"])

    def take_commands(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        """The commands sent to this host not yet taken, now marked taken (each runs once)."""
        with self._lock:
            try:
                rows = (
                    self._connection()
                    .execute(
                        """
                        UPDATE herd_commands SET taken_at = now()
                        WHERE id IN (
                            SELECT id FROM herd_commands WHERE host = %s AND taken_at IS NULL
                            ORDER BY created_at FOR UPDATE SKIP LOCKED
                        )
                        RETURNING id, session, verb, args
                        """,
                        (self.host,),
                    )
                    .fetchall()
                )
            except (psycopg.Error, OSError):
                return []
        return [(r[0], r[1], r[2], dict(r[3])) for r in rows]

    def run_command(self, command_id: str, session: str, verb: str, args: dict[str, Any]) -> None:
        """Ask this host's daemon, then write its reply (or its error) on the command's row."""
        result: Any = None
        error: dict[str, str] | None = None
        try:
            if verb not in COMMAND_VERBS:
                raise ApiError("bad-request", f"the cluster does not pass {verb!r} to a host")
            result = self.client.call(verb, name=session, socket_timeout_s=None, **args)
            if len(json.dumps(result)) > RESULT_MAX_BYTES:
                raise ApiError(
                    "too-large",
                    f"the reply is over {RESULT_MAX_BYTES} bytes; run it on {self.host}",
                )
        except ApiError as exc:
            error, result = {"code": exc.code, "message": exc.message}, None
        except Exception as exc:  # the host's daemon is gone: say so, never hang the viewer
            error, result = {"code": "host-failed", "message": f"{self.host}: {exc}"}, None
        self.flush()  # the viewer that reads the reply then sees the state it caused
        try:
            with leases.connect(self.url) as conn:
                conn.execute(
                    "UPDATE herd_commands SET done_at = now(), result = %s, error = %s "
                    "WHERE id = %s",
                    (json.dumps(result), json.dumps(error) if error else None, command_id),
                )
        except (psycopg.Error, OSError) as exc:
            log.warning("cluster: cannot acknowledge command %s: %s", command_id, exc)

    def tick(self) -> None:
        """One round: publish, then start every new command in its own thread (a stop
        waits out its grace; a report may run git)."""
        self.flush()
        for command in self.take_commands():
            threading.Thread(
                target=self.run_command, args=command, name="herd-command", daemon=True
            ).start()

    def run(self) -> None:
        """In a thread, until `stop`."""
        while not self._stop.wait(PUBLISH_S):
            try:
                self.tick()
            except Exception as exc:  # the daemon is stopping; keep trying until told
                log.warning("cluster: publishing failed: %s", exc)

    def stop(self) -> None:
        """Stop the loop and drop the connection."""
        self._stop.set()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
