"""A dead host's sessions move to the least loaded live hosts, not all to the first by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of
from conftest import script, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

# Three hosts: a long variant.
pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.slow, pytest.mark.timeout(300)]


def test_moved_sessions_go_to_the_least_loaded_hosts(
    tmp_path: Path, hosts: list[HostProc], pg_url: str
) -> None:
    done = tmp_path / "done"
    command = script(f"""
        import os, time
        while not os.path.exists({str(done)!r}):
            time.sleep(0.2)
    """)
    sessions = "".join(
        f"""
        [[session]]
        name = "{name}"
        command = {command}
        cwd = "{name}"
        restart = "never"
        autostart = false
        """
        for name in "abcd"
    )
    toml = cluster_toml(sessions, grace="0s")
    for host_name in ("h1", "h2", "h3"):
        host = HostProc(tmp_path, host_name, toml, pg_url)
        for name in "abcd":  # a folder each: one worktree runs one session at a time
            (host.root / name).mkdir()
        hosts.append(host)
    for host in hosts:
        host.start()
    fleet = fleet_of(hosts[0], pg_url)

    def running_on(name: str) -> str | None:
        status = fleet.status(name)
        return status.host if status.state == "running" else None  # type: ignore[union-attr]

    try:
        for name in "abcd":
            fleet.start(name)  # each to the least loaded host (ties: the first name)
            wait_until(lambda n=name: running_on(n) is not None, 60, f"{name} to run")
        on = {name: str(running_on(name)) for name in "abcd"}
        busy = max(("h1", "h2", "h3"), key=lambda h: list(on.values()).count(h))
        assert list(on.values()).count(busy) == 2, on
        first, last = sorted(h for h in ("h1", "h2", "h3") if h != busy)
        idle = next(n for n, h in on.items() if h == last)
        fleet.stop(idle)  # `last` is idle now, `first` runs one: by name alone it would win
        wait_until(lambda: fleet.status(idle).state == "stopped", 30, f"{idle} to stop")  # type: ignore[union-attr]
        moving = [n for n, h in on.items() if h == busy]
        hosts[["h1", "h2", "h3"].index(busy)].kill()
        wait_until(
            lambda: all(running_on(n) not in (None, busy) for n in moving),
            90,
            f"{moving} to run again elsewhere",
        )
        moved_to = sorted(str(running_on(n)) for n in moving)
        assert last in moved_to, f"both moved to the first host by name: {moved_to}"
    finally:
        done.touch()
        fleet.close()
