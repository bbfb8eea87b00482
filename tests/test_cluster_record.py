"""The engine's record matches what ran: an attempt cancelled by nobody's `herd stop` (the
engine's own cancel, as after a host was judged dead) moves the task on; it is never recorded
`stopped (user)` while its agent goes on running."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of
from conftest import script, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


def test_an_attempt_cancelled_by_the_engine_is_not_a_user_stop(
    tmp_path: Path, hosts: list[HostProc], pg_url: str
) -> None:
    marks, done = tmp_path / "marks.txt", tmp_path / "done"
    command = script(f"""
        import os, time
        open({str(marks)!r}, "a").write("start\\n")
        while not os.path.exists({str(done)!r}):
            time.sleep(0.1)
    """)
    toml = cluster_toml(f"""
        [[session]]
        name = "job"
        command = {command}
        cwd = "work"
        restart = "never"
        autostart = false
    """)
    host = HostProc(tmp_path, "h1", toml, pg_url)
    (host.root / "work").mkdir()
    hosts.append(host)
    host.start()
    fleet = fleet_of(host, pg_url)
    try:
        handle = fleet.start("job").handle
        wait_until(lambda: marks.exists() and "start" in marks.read_text(), 60, "h1 runs it")
        (attempt,) = fleet._attempts("herd:job:1")
        fleet.dbos.cancel_workflow(attempt.workflow_id)  # nobody ran `herd stop`
        waited = fleet.wait(handle, timeout_s=3)
        assert waited.reason != "user", waited
        assert host.client.call("status", target="job")["state"] == "running"
        done.touch()
        waited = fleet.wait(handle, timeout_s=60)
        assert (waited.state, waited.exit) == ("completed", 0), waited
    finally:
        done.touch()
        fleet.close()
    assert marks.read_text().splitlines() == ["start"]
