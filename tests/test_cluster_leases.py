"""The host registry in PostgreSQL: leases, one owner per host name, dead hosts, fencing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import Herd, script, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

import psycopg  # noqa: E402

from agentherd.supervisor.cluster import fencing, leases  # noqa: E402

pytestmark = pytest.mark.cluster

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(60)
""")


def test_a_live_host_name_is_refused_to_another_machine(pg_url: str) -> None:
    with leases.connect(pg_url) as conn:
        leases.ensure_schema(conn)
        leases.register(conn, "h1", "machine-a", ["api"], 30)
        with pytest.raises(leases.HostNameTaken, match="--host NAME"):
            leases.register(conn, "h1", "machine-b", ["api"], 30)
        leases.register(conn, "h1", "machine-a", ["api"], 30)  # its own daemon, restarted
        assert [(h.name, h.sessions, h.alive, h.ready) for h in leases.hosts(conn)] == [
            ("h1", ["api"], True, False)
        ]


def test_an_expired_lease_is_claimed_by_exactly_one_survivor(pg_url: str) -> None:
    with leases.connect(pg_url) as conn, leases.connect(pg_url) as other:
        leases.ensure_schema(conn)
        leases.register(conn, "gone", "machine-a", [], 0.05)
        leases.register(conn, "alive", "machine-b", [], 30)
        wait_until(lambda: not leases.hosts(conn)[1].alive, what="the short lease to expire")
        assert not leases.renew(conn, "gone", "machine-a", 30)  # too late: fenced
        claims = [leases.claim_dead(conn, "alive"), leases.claim_dead(other, "alive")]
        assert sorted(claims, key=len) == [[], ["gone"]]
        leases.register(conn, "gone", "machine-c", [], 30)  # its name is free again


def test_the_identity_survives_a_daemon_restart(tmp_path: Path) -> None:
    first = leases.host_identity(tmp_path)
    assert leases.host_identity(tmp_path) == first and len(first) == 32


def _cut(admin: psycopg.Connection, database: str, allow: bool) -> None:
    """Partition the lease keeper from its database (or end the partition)."""
    admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(allow).lower()}')
    if not allow:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = %s",
            (database, leases.APPLICATION_NAME),
        )


def test_a_host_cut_from_the_database_stops_its_agents_before_its_lease_ends(
    herd: Herd,
    pg_url: str,
) -> None:
    herd.write(f'[[session]]\nname = "api"\ncommand = {SLEEPER}\nrestart = "always"\n')
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "running")
    database = pg_url.rsplit("/", 1)[1]
    fenced_while_leased: list[bool] = []
    monitor = psycopg.connect(pg_url, autocommit=True)  # connected before the cut: stays
    lock = threading.Lock()

    def on_fence() -> None:
        fencing.stop_every_agent(client)
        with lock:
            alive = monitor.execute("SELECT expires_at > now() FROM herd_hosts").fetchone()
        fenced_while_leased.append(bool(alive and alive[0]))

    rejoined = threading.Event()
    keeper = leases.LeaseKeeper(pg_url, "h1", "machine-a", ["api"], 3.0, on_fence, rejoined.set)
    keeper.join()
    keeper.start()
    admin = psycopg.connect(pg_url.rsplit("/", 1)[0] + "/postgres", autocommit=True)
    try:
        wait_until(lambda: keeper.renewals >= 1, what="a first renewal")
        _cut(admin, database, allow=False)
        wait_until(lambda: fenced_while_leased, timeout_s=10, what="the host to fence itself")
        assert fenced_while_leased == [True]  # stopped before the lease ran out
        assert herd.status("api")["state"] == "stopped"
        with lock:
            wait_until(
                lambda: monitor.execute("SELECT expires_at < now() FROM herd_hosts").fetchone()[0],
                what="the lease to expire",
            )
        assert herd.status("api")["state"] == "stopped"  # fenced hosts do not restart agents
        _cut(admin, database, allow=True)
        assert rejoined.wait(10), "the host rejoins once the database answers again"
        assert not keeper.fenced
    finally:
        _cut(admin, database, allow=True)
        keeper.stop()
        admin.close()
        monitor.close()
