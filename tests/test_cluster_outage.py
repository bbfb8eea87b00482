"""The database is away for less than the grace: every host keeps its agents, no host takes
another's work, and the fleet goes on when it answers again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of, through
from conftest import script, wait_until
from netcut import CuttableLink
from pgcluster import require_cluster_extra

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.timeout(240)]
LEASE_S = 3.0
GRACE_S = 8.0
OUTAGE_S = 5.0
"""Longer than the lease (a host that fenced at its lease would stop its agent), shorter than
the grace."""


def beater(marks: Path, done: Path) -> str:
    """A session that notes where it starts and beats every 0.1 s until `done` exists."""
    return script(f"""
        import os, time
        host = os.path.basename(os.path.dirname(os.getcwd()))
        def mark(what):
            with open({str(marks)!r}, "a") as f:
                f.write(f"{{what}} {{host}} {{time.time()}}\\n")
        mark("start")
        while not os.path.exists({str(done)!r}):
            mark("beat")
            time.sleep(0.1)
        mark("end")
    """)


def test_a_database_outage_shorter_than_the_grace_stops_nothing(
    tmp_path: Path, link: CuttableLink, hosts: list[HostProc], pg_url: str
) -> None:
    marks, done = tmp_path / "marks.txt", tmp_path / "done"
    toml = cluster_toml(
        f"""
        [[session]]
        name = "job"
        command = {beater(marks, done)}
        cwd = "work"
        restart = "never"
        autostart = false
        """,
        lease=f"{LEASE_S:g}s",
        grace=f"{GRACE_S:g}s",
    )
    through_link = through(link, pg_url)
    for name in ("h1", "h2"):
        host = HostProc(tmp_path, name, toml, through_link)
        (host.root / "work").mkdir()
        hosts.append(host)
    for host in hosts:
        host.start()
    fleet = fleet_of(hosts[0], pg_url)  # the viewer reaches the database directly
    try:
        handle = fleet.start("job").handle  # both idle: the tie goes to h1
        wait_until(lambda: marks.exists() and "start h1" in marks.read_text(), 60, "h1 runs")
        link.cut()
        cut_at = time.time()
        wait_until(lambda: time.time() - cut_at > OUTAGE_S, OUTAGE_S + 5, "the outage")
        link.restore()
        restored_at = time.time()
        wait_until(
            lambda: (
                fleet.status("job").state == "running"  # type: ignore[union-attr]
                and time.time() - restored_at > LEASE_S
            ),
            30,
            "the fleet to answer again",
        )
        status = hosts[0].client.call("status", target="job")
        assert (status["state"], status["run"]) == ("running", 1), status
        done.touch()
        waited = fleet.wait(handle, timeout_s=60)
        assert (waited.state, waited.exit) == ("completed", 0), waited
    finally:
        done.touch()
        fleet.close()
    lines = marks.read_text().splitlines()
    assert [line.split()[1] for line in lines if line.startswith("start")] == ["h1"], lines
    beats = [float(line.split()[2]) for line in lines if line.startswith("beat")]
    gaps = [b - a for a, b in zip(beats, beats[1:], strict=False)]
    assert max(gaps) < 2.0, f"the agent stopped for {max(gaps):.1f}s during the outage"
