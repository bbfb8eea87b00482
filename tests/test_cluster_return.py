"""A host killed whole comes back after its sessions moved: it runs none of them again
(it asks the database what it still owns before it restarts or re-adopts anything)."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of
from conftest import script, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.timeout(240)]
SAMPLE_S = 0.5
WATCH_S = 8.0
"""How long the returned host is watched (more than two 3 s leases)."""


def forever(marks: Path, done: Path) -> str:
    """A session that notes where it starts and runs until `done` exists (on any host)."""
    return script(f"""
        import os, time
        host = os.path.basename(os.path.dirname(os.getcwd()))
        with open({str(marks)!r}, "a") as f:
            f.write(f"start {{host}} {{time.time()}}\\n")
        while not os.path.exists({str(done)!r}):
            time.sleep(0.1)
    """)


def live_agents(hosts: list[HostProc], token: str) -> list[str]:
    """The hosts on which an agent of the session lives now (one entry per agent)."""
    found: list[str] = []
    for host in hosts:
        if host.process is None or host.process.poll() is not None:
            continue
        try:
            for child in psutil.Process(host.process.pid).children(recursive=True):
                try:
                    argv = child.cmdline()
                    # The agent itself, not the shell wrapper that waits for it (tail argv).
                    if argv[:1] != ["/bin/sh"] and token in " ".join(argv):
                        found.append(host.name)
                except psutil.NoSuchProcess:
                    pass
        except psutil.NoSuchProcess:
            pass
    return found


def test_a_returning_host_does_not_run_its_moved_session_again(
    tmp_path: Path, hosts: list[HostProc], pg_url: str
) -> None:
    marks, done = tmp_path / "marks.txt", tmp_path / "done"
    toml = cluster_toml(f"""
        [[session]]
        name = "job"
        command = {forever(marks, done)}
        cwd = "work"
        restart = "on-failure"
        autostart = false
    """)
    for name in ("h1", "h2"):
        host = HostProc(tmp_path, name, toml, pg_url)
        (host.root / "work").mkdir()
        hosts.append(host)
    for host in hosts:
        host.start()
    fleet = fleet_of(hosts[0], pg_url)
    token = str(done)
    try:
        handle = fleet.start("job").handle  # both idle: the tie goes to h1
        wait_until(lambda: marks.exists() and "start h1" in marks.read_text(), 60, "h1 runs")
        hosts[0].kill()  # daemon and agent, as a machine's death
        wait_until(lambda: live_agents(hosts, token) == ["h2"], 90, "the session to move to h2")
        hosts[0].start()  # the machine comes back with its old state folder
        seen: list[list[str]] = []
        ends = time.monotonic() + WATCH_S
        while time.monotonic() < ends:
            seen.append(live_agents(hosts, token))
            assert len(seen[-1]) <= 1, f"two live agents for one session: {seen[-1]}"
            time.sleep(SAMPLE_S)
        assert seen[-1] == ["h2"], seen
        status = hosts[0].client.call("status", target="job")
        assert (status["state"], status["reason"]) == ("stopped", "host-lost"), status
        done.touch()
        waited = fleet.wait(handle, timeout_s=60)
        assert waited.state == "completed", waited
    finally:
        done.touch()
        fleet.close()
    starts = [line.split()[1] for line in marks.read_text().splitlines()]
    assert starts == ["h1", "h2"], starts
