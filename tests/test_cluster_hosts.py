"""Host daemons in a cluster (`herd daemon --host NAME`): placement and the global limit.

Each host is a separate `herd daemon --host` process with its own folder and PID namespace;
the sessions are tiny real programs; the engine is DBOS on a private PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of, herd_cli
from conftest import HERD, script
from pgcluster import require_cluster_extra

require_cluster_extra()


pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]  # two hosts start on a loaded CI

QUICK = script("""
    print("done", flush=True)
""")


def spell(marks: Path) -> str:
    """A session that notes when it runs into `marks` (shared by every host) for a while."""
    code = f"""
        import os, time
        with open({str(marks)!r}, "a") as f:
            f.write(f"start {{os.environ['HERD_SESSION']}} {{time.time()}}\\n")
        time.sleep(1.0)
        with open({str(marks)!r}, "a") as f:
            f.write(f"end {{os.environ['HERD_SESSION']}} {{time.time()}}\\n")
    """
    return script(code)


def test_a_session_naming_a_host_runs_there_and_nowhere_else(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    toml = cluster_toml(f"""
        [[session]]
        name = "pinned"
        command = {QUICK}
        restart = "never"
        autostart = false
        host = "h2"
    """)
    # Each host joins the list as it starts: a failed second start leaves none running.
    hosts.extend(HostProc(tmp_path, n, toml, pg_url).start() for n in ("h1", "h2"))
    fleet = fleet_of(hosts[0], pg_url)
    try:
        for _ in range(2):
            handle = fleet.start("pinned").handle
            waited = fleet.wait(handle, timeout_s=60)
            assert (waited.state, waited.exit) == ("completed", 0)
            assert fleet.task_host(handle) == "h2"
    finally:
        fleet.close()
    assert hosts[0].client.call("status", target="pinned")["run"] in (0, None)
    assert hosts[1].client.call("status", target="pinned")["run"] == 2


def test_herd_start_and_wait_go_through_the_engine(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    toml = cluster_toml(f"""
        [[session]]
        name = "pinned"
        command = {QUICK}
        restart = "never"
        autostart = false
        host = "h2"
    """)
    # Each host joins the list as it starts: a failed second start leaves none running.
    hosts.extend(HostProc(tmp_path, n, toml, pg_url).start() for n in ("h1", "h2"))
    herd = herd_cli(hosts[0].root, pg_url)
    started = herd([HERD, "start", "pinned"])  # asked on h1: placed on h2
    assert (started.returncode, started.stdout) == (0, "pinned/1\n"), started.stderr
    waited = herd([HERD, "wait", "pinned/1"])
    assert (waited.returncode, waited.stdout) == (0, "pinned/1: completed\n"), waited.stderr
    assert hosts[1].client.call("status", target="pinned")["state"] == "completed"
    nowhere = herd_cli(hosts[0].root, "")([HERD, "start", "pinned"])
    assert nowhere.returncode == 2 and "$HERD_TEST_DB is not set" in nowhere.stderr


def test_the_global_limit_holds_across_hosts(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    blocks = "".join(
        f"""
        [[session]]
        name = "s{i}"
        command = {spell(marks)}
        cwd = "w{i}"
        restart = "never"
        autostart = false
        """
        for i in range(4)
    )
    toml = cluster_toml(blocks, max_sessions=2)
    for name in ("h1", "h2"):
        host = HostProc(tmp_path, name, toml, pg_url)
        for i in range(4):  # one folder per session: two sessions never share a worktree
            (host.root / f"w{i}").mkdir()
        hosts.append(host.start())
    fleet = fleet_of(hosts[0], pg_url)
    try:
        handles = [fleet.start(f"s{i}").handle for i in range(4)]
        for handle in handles:
            assert fleet.wait(handle, timeout_s=90).state == "completed"
        placed = {fleet.task_host(h) for h in handles}
    finally:
        fleet.close()
    running, most = 0, 0
    for line in sorted(marks.read_text().splitlines(), key=lambda mark: float(mark.split()[2])):
        running += 1 if line.startswith("start") else -1
        most = max(most, running)
    assert most == 2, marks.read_text()  # never three, and the limit was reached
    assert placed == {"h1", "h2"}  # spread over both hosts


def _most_at_once(marks: Path) -> int:
    running, most = 0, 0
    for line in sorted(marks.read_text().splitlines(), key=lambda mark: float(mark.split()[2])):
        running += 1 if line.startswith("start") else -1
        most = max(most, running)
    return most


def test_the_per_host_limit_holds(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    blocks = "".join(
        f"""
        [[session]]
        name = "s{i}"
        command = {spell(marks)}
        cwd = "w{i}"
        restart = "never"
        autostart = false
        """
        for i in range(3)
    )
    host = HostProc(tmp_path, "h1", cluster_toml(blocks, max_sessions_per_host=1), pg_url)
    for i in range(3):
        (host.root / f"w{i}").mkdir()
    hosts.append(host.start())
    fleet = fleet_of(host, pg_url)
    try:
        handles = [fleet.start(f"s{i}").handle for i in range(3)]
        assert [fleet.wait(h, timeout_s=90).state for h in handles] == ["completed"] * 3
    finally:
        fleet.close()
    assert _most_at_once(marks) == 1, marks.read_text()
