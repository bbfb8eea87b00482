"""A cluster task waiting for a slot shows `queued`, with the limit it waits for: `host-limit`
(its host is full) or `fleet-limit` (`max_sessions` run already), never `idle`."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of
from conftest import script, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.timeout(240)]


def test_a_task_waiting_for_a_slot_is_queued_with_the_limit_it_waits_for(
    tmp_path: Path, hosts: list[HostProc], pg_url: str
) -> None:
    done = tmp_path / "done"
    forever = script(f"""
        import os, time
        while not os.path.exists({str(done)!r}):
            time.sleep(0.1)
    """)
    toml = cluster_toml(
        "".join(
            f'[[session]]\nname = "{n}"\ncommand = {forever}\nrestart = "never"\n'
            "autostart = false\n\n"
            for n in ("a", "b", "c")
        ),
        max_sessions=2,
        max_sessions_per_host=1,
    )
    host = HostProc(tmp_path, "h1", toml, pg_url)
    hosts.append(host)
    host.start()
    fleet = fleet_of(host, pg_url)
    try:
        handles = {}
        for name in ("a", "b", "c"):
            handles[name] = fleet.start(name).handle
            if name == "a":
                wait_until(lambda: fleet.status("a").state == "running", 60, "a to run")
        # b takes the fleet's second slot (fleet-limit until then), then waits for h1's one.
        shown = wait_until(
            lambda: (
                (s := {n: (fleet.status(n).state, fleet.status(n).reason) for n in "abc"})["b"]
                == ("queued", "host-limit")
                and s
            ),
            60,
            "b to wait for its host's slot",
            poll_s=0.3,
        )
        assert shown == {
            "a": ("running", None),
            "b": ("queued", "host-limit"),
            "c": ("queued", "fleet-limit"),
        }, shown
        listed = {s.session: (s.state, s.reason, s.handle) for s in fleet.list()}
        assert listed["c"] == ("queued", "fleet-limit", handles["c"]), listed
        task = fleet.status(handles["b"])
        assert (task.state, task.reason) == ("queued", "host-limit"), task
        done.touch()
        for handle in handles.values():
            assert fleet.wait(handle, timeout_s=90).state == "completed"
        assert {fleet.status(n).state for n in "abc"} == {"completed"}
    finally:
        done.touch()
        fleet.close()
