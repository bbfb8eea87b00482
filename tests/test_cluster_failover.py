"""A host dies whole (its PID namespace killed): its session is finished on another host,
after its lease has expired, and never runs on two hosts at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of, through
from conftest import script, wait_until
from netcut import CuttableLink
from pgcluster import require_cluster_extra

require_cluster_extra()

from agentherd.sessions.status import SessionStatus  # noqa: E402
from agentherd.supervisor.cluster.fleet import ClusterFleet  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.timeout(180)]
LEASE_S = 3.0


def marker(marks: Path, held_on: str) -> str:
    """A session that notes where and when it starts, beats every 0.1 s while it runs, and
    ends (the folder names the host). On host `held_on` it runs until its host dies or fences
    it; elsewhere it ends after half a second. Its beats say when it last ran."""
    return script(f"""
        import os, time
        host = os.path.basename(os.path.dirname(os.getcwd()))
        def mark(what):
            with open({str(marks)!r}, "a") as f:
                f.write(f"{{what}} {{host}} {{time.time()}}\\n")
        mark("start")
        ends = time.time() + (3600 if host == {held_on!r} else 0.5)
        while time.time() < ends:
            mark("beat")
            time.sleep(0.1)
        mark("end")
    """)


def start_job_on_two_hosts(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
    marks: Path,
    extra: str = "",
    h1_url: str | None = None,
) -> None:
    """Hosts h1 and h2 (appended to `hosts`, started) serving session `job`, a `marker` held
    on h1 with `extra` TOML lines, not started yet; h1 reaches PostgreSQL at `h1_url`."""
    toml = cluster_toml(f"""
        [[session]]
        name = "job"
        command = {marker(marks, held_on="h1")}
        cwd = "work"
        restart = "never"
        autostart = false
        {extra}
    """)
    for name, url in (("h1", h1_url or pg_url), ("h2", pg_url)):
        host = HostProc(tmp_path, name, toml, url)
        (host.root / "work").mkdir()
        hosts.append(host)
    for host in hosts:
        host.start()


def last_beat(lines: list[str], host: str) -> float:
    """When the session last showed it ran on `host` (epoch seconds, the agent's clock)."""
    return max(float(line.split()[2]) for line in lines if line.startswith(f"beat {host} "))


def lease_expiry(url: str, host: str) -> float:
    """When `host`'s last lease ran out, in epoch seconds (the database's clock)."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM expires_at) FROM herd_hosts WHERE name = %s", (host,)
        ).fetchone()
    assert row is not None
    return float(row[0])


def seen(fleet: ClusterFleet) -> tuple[str, str | None]:
    """The session's state and host as any viewer sees them."""
    status = fleet.status("job")
    assert isinstance(status, SessionStatus)
    return status.state, status.host


def seen_rows(fleet: ClusterFleet) -> list[tuple[str, str | None]]:
    """Every host's own row of the session: its state and reason there."""
    from agentherd.supervisor.cluster import view

    with view.connect(fleet.url) as conn:
        return [(r.status.state, r.status.reason) for r in view.rows(conn, "job")]


def test_a_killed_hosts_session_finishes_on_another_host_once(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    start_job_on_two_hosts(tmp_path, hosts, pg_url, marks)
    fleet = fleet_of(hosts[0], pg_url)
    try:
        handle = fleet.start("job").handle  # both idle: the tie goes to h1
        wait_until(lambda: marks.exists() and "start h1" in marks.read_text(), 60, "h1 to run")
        wait_until(lambda: seen(fleet) == ("running", "h1"), 30, "the view to show it on h1")
        killed_at = time.time()
        hosts[0].kill()  # daemon and agent, as a machine's death
        waited = fleet.wait(handle, timeout_s=90)
        assert (waited.state, waited.exit) == ("completed", 0)
        assert fleet.task_host(handle) in ("h1", "h2")
        assert seen(fleet) == ("completed", "h2")  # h1's stale row no longer speaks for it
        started_on = [e.host for e in fleet.events(session="job") if e.kind == "run-started"]
        assert started_on == ["h1", "h2"]
    finally:
        fleet.close()
    lines = marks.read_text().splitlines()
    starts = [line.split() for line in lines if line.startswith("start")]
    assert [s[1] for s in starts] == ["h1", "h2"], lines  # once on h1, once (moved) on h2
    assert [line.split()[1] for line in lines if line.startswith("end")] == ["h2"], lines
    moved_at = float(starts[1][2])
    assert last_beat(lines, "h1") < moved_at, "h1's agent died with its host, before the move"
    # The lease runs from h1's last renewal (every LEASE_S/3), not from the kill.
    grace_s = LEASE_S  # herd.toml names none: as long as the lease
    assert moved_at >= lease_expiry(pg_url, "h1") + grace_s, "moved only after lease and grace"
    assert moved_at - killed_at >= LEASE_S * 2 / 3 + grace_s - 0.1
    print(f"recovery: {moved_at - killed_at:.1f}s after the kill (lease {LEASE_S:g}s)")


def test_a_partitioned_host_stops_its_agent_and_the_session_moves_once(
    tmp_path: Path,
    link: CuttableLink,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    start_job_on_two_hosts(tmp_path, hosts, pg_url, marks, h1_url=through(link, pg_url))
    fleet = fleet_of(hosts[1], pg_url)
    try:
        handle = fleet.start("job").handle  # both idle: the tie goes to h1
        wait_until(lambda: marks.exists() and "start h1" in marks.read_text(), 60, "h1 runs")
        link.cut()
        cut_at = time.time()
        wait_until(
            lambda: hosts[0].client.call("status", target="job")["state"] == "stopped",
            LEASE_S * 3,
            "h1 to stop its agent (fencing)",
        )
        fenced_at = time.time()
        # The grace is the lease here (herd.toml names none): no other host may take the
        # session before both have run out, and h1 stops its agent before that.
        assert fenced_at - cut_at < LEASE_S * 2, "fenced before lease and grace ran out"
        assert hosts[0].client.call("status", target="job")["reason"] == "fenced"
        waited = fleet.wait(handle, timeout_s=90)
        assert (waited.state, waited.exit) == ("completed", 0)
        link.restore()  # h1 returns: fenced, it does not take the session back
        wait_until(lambda: hosts[0].ready(), 30, "h1 to rejoin")
        wait_until(lambda: ("stopped", "fenced") in seen_rows(fleet), 30, "h1 to publish again")
        assert seen(fleet) == ("completed", "h2")
    finally:
        fleet.close()
    lines = marks.read_text().splitlines()
    starts = [line.split() for line in lines if line.startswith("start")]
    assert [s[1] for s in starts] == ["h1", "h2"], lines
    assert [line.split()[1] for line in lines if line.startswith("end")] == ["h2"], lines
    assert float(starts[1][2]) > fenced_at, "h2 began only after h1 had stopped its agent"
    assert last_beat(lines, "h1") < fenced_at, "the fence stopped h1's agent, not only its record"
    assert hosts[0].client.call("status", target="job")["state"] == "stopped"
