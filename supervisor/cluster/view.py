"""The cluster as a viewer reads it: the rows hosts publish (publish.py), merged per session.

A session may have a row on several hosts (it ran on one, then moved). The row that speaks
for it is the one of a live host where it is active; else the one whose run started last.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from agentherd.sessions import status_builder
from agentherd.sessions.records import Event
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import SessionStatus
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster import leases, publish

COMMAND_POLL_S = 0.1
COMMAND_TIMEOUT_S = 120.0
"""A host that has not answered a command in this long is reported, not waited on forever."""


@dataclass(frozen=True)
class Row:
    """One host's status of one session, and whether that host holds its lease."""

    host: str
    status: SessionStatus
    alive: bool
    changed_at: float


def connect(url: str) -> psycopg.Connection:
    """A viewer's connection, the view's tables made if no host has yet."""
    conn = leases.connect(url)
    leases.ensure_schema(conn)
    publish.ensure_schema(conn)
    return conn


def rows(conn: psycopg.Connection, session: str | None = None) -> list[Row]:
    """Every host's row (of one session), with its host's liveness."""
    found = conn.execute(
        """
        SELECT s.host, s.status, coalesce(h.expires_at > now(), false),
               extract(epoch FROM s.changed_at)
        FROM herd_status s LEFT JOIN herd_hosts h ON h.name = s.host
        WHERE %(session)s::text IS NULL OR s.session = %(session)s
        """,
        {"session": session},
    ).fetchall()
    return [Row(r[0], status_builder.on_host(r[1], r[0]), bool(r[2]), float(r[3])) for r in found]


def _rank(row: Row) -> tuple[bool, str, float]:
    active = row.alive and row.status.state in ACTIVE_STATES
    return active, row.status.started_at or "", row.changed_at


def merged(found: list[Row]) -> dict[str, Row]:
    """The row that speaks for each session (see the module's docstring)."""
    best: dict[str, Row] = {}
    for row in found:
        name = row.status.session
        if name not in best or _rank(row) > _rank(best[name]):
            best[name] = row
    return best


def speaking(row: Row) -> SessionStatus:
    """The row's status as a viewer shows it (status_builder.across_hosts)."""
    return status_builder.across_hosts(row.status, row.alive)


def events(conn: psycopg.Connection, since: int, session: str | None, limit: int) -> list[Event]:
    """Events of every host after the fleet-wide `since`, oldest first, each with its host."""
    found = conn.execute(
        """
        SELECT seq, host, event FROM herd_events
        WHERE seq > %(since)s AND (%(session)s::text IS NULL OR session = %(session)s)
        ORDER BY seq LIMIT %(limit)s
        """,
        {"since": since, "session": session, "limit": limit},
    ).fetchall()
    return [Event.model_validate({**r[2], "seq": r[0], "host": r[1]}) for r in found]


def send_command(
    url: str,
    host: str,
    session: str,
    verb: str,
    args: dict[str, Any] | None = None,
    wait: bool = True,
    timeout_s: float = COMMAND_TIMEOUT_S,
) -> Any:
    """Ask `host`'s daemon to do `verb` to `session`; its reply (None with `wait` False).

    The command is one row with an id of ours: the host takes it once, so sending it is
    idempotent; its reply on the row is the acknowledgement.
    """
    command_id = uuid.uuid4().hex
    with connect(url) as conn:
        conn.execute(
            "INSERT INTO herd_commands (id, host, session, verb, args) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (id) DO NOTHING",
            (command_id, host, session, verb, json.dumps(args or {})),
        )
        if not wait:
            return None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT done_at IS NOT NULL, result, error FROM herd_commands WHERE id = %s",
                (command_id,),
            ).fetchone()
            if row and row[0]:
                if row[2]:
                    raise ApiError(row[2]["code"], row[2]["message"])
                return row[1]
            time.sleep(COMMAND_POLL_S)
    raise ApiError(
        "host-timeout",
        f"host {host!r} did not answer `{verb} {session}` within {timeout_s:g}s; "
        f"is `herd daemon --host {host}` running?",
    )
