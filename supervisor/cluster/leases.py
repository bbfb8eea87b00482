"""The host registry in PostgreSQL: each host holds a lease it renews; one that cannot, fences.

Times come from the database's clock (`now()`), so hosts' clocks need not agree. A host's
identity is a token kept in its own `.herd/` folder: its daemon, restarted after a crash,
takes its own lease back at once (and re-adopts its agents as on one machine), while another
machine claiming the same name is refused until that lease has expired.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from agentherd.supervisor.cluster import owners
from agentherd.supervisor.files import private

SCHEMA = """
CREATE TABLE IF NOT EXISTS herd_hosts (
    name        text PRIMARY KEY,
    identity    text NOT NULL,
    sessions    jsonb NOT NULL,
    lease_s     double precision NOT NULL,
    joined_at   timestamptz NOT NULL DEFAULT now(),
    renewed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    recovered   boolean NOT NULL DEFAULT false,
    ready       boolean NOT NULL DEFAULT false
);
ALTER TABLE herd_hosts ADD COLUMN IF NOT EXISTS grace_s double precision NOT NULL DEFAULT 0
"""
DEAD = "expires_at + make_interval(secs => grace_s) < now()"
"""A host is proven dead once its lease and its grace have both run out (SQL)."""
IDENTITY_FILE = "cluster-host-identity"
CONNECT_TIMEOUT_S = 5
APPLICATION_NAME = "herd-lease"
"""How the lease connection shows in pg_stat_activity."""


class HostNameTaken(Exception):
    """Another machine holds a live lease under this host name."""


@dataclass(frozen=True)
class HostRow:
    """One host as the registry sees it."""

    name: str
    sessions: list[str]
    alive: bool
    recovered: bool
    ready: bool


def host_identity(state_dir: Path) -> str:
    """This host's identity token, made once and kept in `.herd/` (survives daemon restarts)."""
    path = state_dir / IDENTITY_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        token = uuid.uuid4().hex
        private.make_folder(state_dir)
        private.write_file(path, token + "\n")
        return token


def connect(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> psycopg.Connection:
    """An autocommit connection that gives up after `timeout_s` (a partition must not hang us)."""
    return psycopg.connect(
        url,
        autocommit=True,
        connect_timeout=max(1, int(timeout_s)),
        application_name=APPLICATION_NAME,
    )


def ensure_schema(conn: psycopg.Connection) -> None:
    """Create the registry and owner tables (idempotent; an advisory lock serialises hosts)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('herd_hosts'))")
        conn.execute(SCHEMA)
        conn.execute(owners.SCHEMA)


def register(
    conn: psycopg.Connection,
    name: str,
    identity: str,
    sessions: list[str],
    lease_s: float,
    grace_s: float = 0.0,
) -> list[str]:
    """Join under `name` with a fresh lease; HostNameTaken if another machine holds it.

    A host proven dead (lease and grace run out) owns nothing when it joins again (the
    sessions it held are returned): the engine may already have moved them, and, in this same
    transaction, nothing can be handed to it under its old tokens.
    """
    with conn.transaction():
        return _register(conn, name, identity, sessions, lease_s, grace_s)


def _register(
    conn: psycopg.Connection,
    name: str,
    identity: str,
    sessions: list[str],
    lease_s: float,
    grace_s: float,
) -> list[str]:
    prior = conn.execute(
        f"SELECT {DEAD} FROM herd_hosts WHERE name = %s FOR UPDATE", (name,)
    ).fetchone()
    row = conn.execute(
        """
        INSERT INTO herd_hosts (name, identity, sessions, lease_s, grace_s, expires_at)
        VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s))
        ON CONFLICT (name) DO UPDATE SET
            identity = EXCLUDED.identity, sessions = EXCLUDED.sessions,
            lease_s = EXCLUDED.lease_s, grace_s = EXCLUDED.grace_s, joined_at = now(),
            renewed_at = now(), expires_at = EXCLUDED.expires_at, recovered = false,
            ready = false
        WHERE herd_hosts.identity = EXCLUDED.identity OR herd_hosts.expires_at
            + make_interval(secs => herd_hosts.grace_s) < now()
        RETURNING name
        """,
        (name, identity, json.dumps(sessions), lease_s, grace_s, lease_s),
    ).fetchone()
    if row is None:
        raise HostNameTaken(
            f"host {name!r} is already in the cluster, held by another machine; give this "
            "one another name with `herd daemon --host NAME`"
        )
    lapsed = prior is not None and bool(prior[0])
    return owners.revoke_host(conn, name) if lapsed else []


def renew(conn: psycopg.Connection, name: str, identity: str, lease_s: float) -> bool:
    """Extend our lease (also within the grace after it); False once lease and grace have run
    out (or the name was taken): we are fenced."""
    row = conn.execute(
        """
        UPDATE herd_hosts SET renewed_at = now(), expires_at = now() + make_interval(secs => %s)
        WHERE name = %s AND identity = %s AND NOT (expires_at + make_interval(secs => grace_s)
            < now())
        RETURNING name
        """,
        (lease_s, name, identity),
    ).fetchone()
    return row is not None


def leave(conn: psycopg.Connection, name: str, identity: str) -> None:
    """Give the lease up at a clean shutdown (its sessions have stopped): the host is dead
    at once, so another host recovers what its engine left pending (a deleted row would
    never be claimed: a task it was coordinating waited for good)."""
    conn.execute(
        "UPDATE herd_hosts SET expires_at = now() - make_interval(secs => grace_s + 1) "
        "WHERE name = %s AND identity = %s",
        (name, identity),
    )


def hosts(conn: psycopg.Connection) -> list[HostRow]:
    """Every registered host, alive (not proven dead: within its lease or grace) or not."""
    rows = conn.execute(
        f"SELECT name, sessions, NOT {DEAD}, recovered, ready FROM herd_hosts ORDER BY name"
    ).fetchall()
    return [HostRow(r[0], list(r[1]), bool(r[2]), bool(r[3]), bool(r[4])) for r in rows]


def mark_ready(conn: psycopg.Connection, name: str, identity: str) -> None:
    """The host's engine runs: tasks may be placed on it."""
    conn.execute(
        "UPDATE herd_hosts SET ready = true WHERE name = %s AND identity = %s", (name, identity)
    )


def claim_dead(conn: psycopg.Connection, me: str) -> list[str]:
    """Hosts proven dead (lease and grace run out) nobody has recovered yet, now marked so.

    Exactly one caller claims each dead host (the row lock and the flag), so its workflows are
    recovered once.
    """
    rows = conn.execute(
        f"""
        UPDATE herd_hosts SET recovered = true
        WHERE name IN (
            SELECT name FROM herd_hosts
            WHERE {DEAD} AND NOT recovered AND name <> %s
            FOR UPDATE SKIP LOCKED
        )
        RETURNING name
        """,
        (me,),
    ).fetchall()
    return sorted(r[0] for r in rows)


class LeaseKeeper:
    """Renews this host's lease every third of it, in a thread; fences when it cannot.

    Fencing: once lease and grace together have less than a third of the lease left by our
    own (monotonic) reckoning, counted from before the last renewal that succeeded,
    `on_fence` runs: it stops this host's agents before any other host may take their work
    (only after lease and grace), so a session moved elsewhere never runs twice, and a
    database outage shorter than the grace stops nothing.
    """

    def __init__(
        self,
        url: str,
        name: str,
        identity: str,
        sessions: list[str],
        lease_s: float,
        on_fence: Callable[[], None],
        on_rejoin: Callable[[], None] = lambda: None,
        ownership: owners.Ownership | None = None,
        grace_s: float = 0.0,
    ) -> None:
        self.url = url
        self.name = name
        self.identity = identity
        self.sessions = sessions
        self.lease_s = lease_s
        self.grace_s = grace_s
        self.on_fence = on_fence
        self.on_rejoin = on_rejoin
        self.ownership = ownership or owners.Ownership(name, sessions)
        """What this host owns, read again at every renewal."""
        self.revoked: list[str] = []
        """The sessions taken from this host at its last join after its lease had lapsed."""
        self.fenced = False
        self.was_ready = False
        self.renewals = 0
        self._valid_until = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection | None = None

    @property
    def interval_s(self) -> float:
        """How often the lease is renewed."""
        return self.lease_s / 3

    def join(self) -> None:
        """Create the registry if needed and take the lease (HostNameTaken if held elsewhere)."""
        conn = self._connection()
        ensure_schema(conn)
        began = time.monotonic()
        self.revoked = self._register(conn)
        self._valid_until = began + self.lease_s
        self.ownership.refresh(conn)  # before the daemon reconciles: it asks `owns`
        self.ownership.fenced = False

    def _register(self, conn: psycopg.Connection) -> list[str]:
        return register(conn, self.name, self.identity, self.sessions, self.lease_s, self.grace_s)

    def ready(self) -> None:
        """Say the engine runs (and again after each rejoin)."""
        self.was_ready = True
        mark_ready(self._connection(), self.name, self.identity)

    def start(self) -> None:
        """Renew in a background thread until `stop`."""
        self._thread = threading.Thread(target=self._loop, name="herd-lease", daemon=True)
        self._thread.start()

    def stop(self, leave_cluster: bool = True) -> None:
        """Stop renewing; with `leave_cluster`, give the lease up."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.lease_s)
        if leave_cluster and not self.fenced:
            try:
                leave(self._connection(), self.name, self.identity)
            except psycopg.Error:
                pass
        if self._conn is not None:
            self._conn.close()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.url, self.interval_s)
        return self._conn

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.tick()

    def tick(self) -> None:
        """One renewal attempt, then fence when the lease is about to run out."""
        began = time.monotonic()
        if not self.fenced and began > self.fence_at:
            # Past the point already (this host was frozen, or its clock stood still): stop
            # the agents before anything else, a renewal's round trip included.
            self._fence()
        try:
            conn = self._connection()
            if self.fenced:
                self.revoked = self._register(conn)
                self.fenced = False
                self._valid_until = began + self.lease_s
                self.ownership.refresh(conn)
                self.ownership.fenced = False
                if self.was_ready:
                    mark_ready(conn, self.name, self.identity)
                self.on_rejoin()
            elif renew(conn, self.name, self.identity, self.lease_s):
                self._valid_until = began + self.lease_s
                self.renewals += 1
                self.ownership.refresh(conn)
            else:
                self._fence()
        except (psycopg.Error, HostNameTaken, OSError):
            if self._conn is not None:
                self._conn.close()
            self._conn = None
        if not self.fenced and time.monotonic() > self.fence_at:
            self._fence()

    @property
    def fence_at(self) -> float:
        """When this host stops its agents unless it renews first (monotonic seconds)."""
        return self._valid_until + self.grace_s - self.interval_s

    def _fence(self) -> None:
        self.fenced = True
        self.ownership.fenced = True  # before the agents stop: none may restart meanwhile
        self.on_fence()
