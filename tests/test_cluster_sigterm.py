"""A host's SIGTERM shutdown: it stops its agents within their stop grace, takes no new work,
ends, and its session goes on once on another host."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from clusterhosts import HostProc, fleet_of
from conftest import wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

from test_cluster_failover import last_beat, seen, start_job_on_two_hosts  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.timeout(180)]


def daemon_of(host: HostProc) -> psutil.Process:
    """The host's `herd daemon` process inside its namespace."""
    assert host.process is not None
    for child in psutil.Process(host.process.pid).children(recursive=True):
        if "daemon" in child.cmdline():
            return child
    raise AssertionError(f"no daemon under host {host.name}")


def logged(host: HostProc) -> str:
    """The host's log lines, without the tracebacks between them."""
    return "\n".join(line for line in host.log().splitlines() if line[:2] == "20")


def test_a_sigterm_ends_the_host_within_its_stop_grace_and_the_session_moves_once(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    start_job_on_two_hosts(tmp_path, hosts, pg_url, marks, extra='stop_grace = "2s"')
    fleet = fleet_of(hosts[0], pg_url)
    try:
        handle = fleet.start("job").handle
        wait_until(lambda: marks.exists() and "start h1" in marks.read_text(), 60, "h1 to run")
        termed_at = time.time()
        os.kill(daemon_of(hosts[0]).pid, signal.SIGTERM)
        assert hosts[0].process is not None
        hosts[0].process.wait(30)
        ended_in = time.time() - termed_at
        waited = fleet.wait(handle, timeout_s=90)
        logs = "\n".join(f"== {h.name}\n{logged(h)}" for h in hosts)
        assert (waited.state, waited.exit) == ("completed", 0), logs
        assert seen(fleet) == ("completed", "h2")
    finally:
        fleet.close()
    lines = marks.read_text().splitlines()
    starts = [line.split() for line in lines if line.startswith("start")]
    assert [s[1] for s in starts] == ["h1", "h2"], lines
    moved_at = float(starts[1][2])
    assert last_beat(lines, "h1") < moved_at, "h1's agent stopped before the move"
    # herd stopped it (the namespace's end would kill it too, but not on a real machine)
    assert "job stopped: stopped (host-lost)" in logged(hosts[0]), logged(hosts[0])
    print(f"SIGTERM: host ended in {ended_in:.1f}s, moved {moved_at - termed_at:.1f}s after")
    assert ended_in < 2 + 5
