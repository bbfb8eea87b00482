"""The fleet budget across hosts: each session's spend kept in PostgreSQL, summed on every host.

Each host writes its own sessions' spend (task and life) to `herd_spend`, one row per (host,
session), as its budget checks sum it; a row stays when its host dies, so a dead host's spend
still counts. Every host reads the other hosts' rows and adds them to its own fleet sum, so the
fleet's limits stop every host's sessions (each host stops its own). The daemon's budget loop
never waits for the database: a thread here writes and reads, the loop takes the last copy.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

import psycopg

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.budget import Spend
from agentherd.sessions.spending import FleetMember
from agentherd.supervisor.cluster import leases

log = logging.getLogger(__name__)

SYNC_S = 0.5
"""How often a host writes its sessions' changed spend and reads the other hosts'."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS herd_spend (
    host        text NOT NULL,
    session     text NOT NULL,
    task        jsonb NOT NULL,
    life        jsonb NOT NULL,
    active      boolean NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, session)
)
"""


def spend_json(spend: Spend) -> dict[str, Any]:
    """A spend as the row keeps it."""
    usage = dataclasses.asdict(spend.usage)
    usage.pop("output_estimate_tokens", None)  # live only: the total already holds it
    return {"usage": usage, "wall_time_s": spend.wall_time_s, "restarts": spend.restarts}


def spend_of(data: dict[str, Any]) -> Spend:
    """The spend a row keeps."""
    fields = {f.name for f in dataclasses.fields(Usage)}
    usage = Usage(**{k: v for k, v in (data.get("usage") or {}).items() if k in fields})
    return Spend(usage, float(data.get("wall_time_s") or 0.0), int(data.get("restarts") or 0))


def ensure_schema(conn: psycopg.Connection) -> None:
    """Create the spend table (idempotent; serialised across hosts by an advisory lock)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('herd_spend'))")
        conn.execute(SCHEMA)


def write(conn: psycopg.Connection, host: str, members: Mapping[str, FleetMember]) -> None:
    """Keep this host's sessions' spend."""
    with conn.transaction():
        for session, member in members.items():
            conn.execute(
                """
                INSERT INTO herd_spend (host, session, task, life, active)
                VALUES (%s, %s, %s, %s, %s)
                ON CONFLICT (host, session) DO UPDATE SET task = EXCLUDED.task,
                    life = EXCLUDED.life, active = EXCLUDED.active, changed_at = now()
                """,
                (
                    host,
                    session,
                    json.dumps(spend_json(member.task)),
                    json.dumps(spend_json(member.life)),
                    member.active,
                ),
            )


def others(conn: psycopg.Connection, host: str, active_here: set[str]) -> list[FleetMember]:
    """The other hosts' sessions' spend. A dead host's row counts its life; its task counts
    while the session is at work on a live host (or here): the task moved, its spend stays."""
    found = conn.execute(
        """
        SELECT s.host, s.session, s.task, s.life, s.active, coalesce(h.expires_at > now(), false)
        FROM herd_spend s LEFT JOIN herd_hosts h ON h.name = s.host
        WHERE s.host <> %s
        """,
        (host,),
    ).fetchall()
    at_work = set(active_here) | {r[1] for r in found if r[5] and r[4]}
    return [
        FleetMember(spend_of(r[2]), spend_of(r[3]), bool(r[4]) if r[5] else r[1] in at_work)
        for r in found
    ]


class FleetSpend:
    """This host's share of the fleet's spend: what its budget loop hands over, written to the
    database, and the other hosts' spend read back, both in a thread of their own."""

    def __init__(self, url: str, host: str, sync_s: float = SYNC_S) -> None:
        self.url = url
        self.host = host
        self.sync_s = sync_s
        self._lock = threading.Lock()
        self._mine: dict[str, FleetMember] = {}
        self._written: dict[str, FleetMember] = {}
        self._others: list[FleetMember] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def publish(self, members: Mapping[str, FleetMember]) -> None:
        """The budget loop's latest sum of this host's sessions (never blocks on the network)."""
        with self._lock:
            self._mine = dict(members)

    def others(self) -> list[FleetMember]:
        """The other hosts' sessions' spend, as last read (at most a sync or two old)."""
        with self._lock:
            return list(self._others)

    def start(self) -> None:
        """Write and read every `sync_s` until `stop`."""
        self._thread = threading.Thread(target=self._run, name="herd-fleet-spend", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop syncing (a sync under way finishes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def sync(self, conn: psycopg.Connection) -> None:
        """One round: write what changed here, read what the other hosts wrote."""
        with self._lock:
            mine = dict(self._mine)
        changed = {n: m for n, m in mine.items() if self._written.get(n) != m}
        if changed:
            write(conn, self.host, changed)
            self._written.update(changed)
        active_here = {name for name, member in mine.items() if member.active}
        found = others(conn, self.host, active_here)
        with self._lock:
            self._others = found

    def _run(self) -> None:
        conn: psycopg.Connection | None = None
        failing = False
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = leases.connect(self.url, self.sync_s * 4)
                    ensure_schema(conn)
                self.sync(conn)
                failing = False
            except Exception as exc:  # the database is away: keep the last copy, try again
                if not failing:  # once an outage, not twice a second
                    log.warning("fleet spend: cannot sync with the database: %s", exc)
                failing = True
                if conn is not None:
                    conn.close()
                conn = None
            self._stop.wait(self.sync_s)
        if conn is not None:
            conn.close()
