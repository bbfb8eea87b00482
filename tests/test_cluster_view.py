"""One view across hosts: the CLI in a folder with no daemon, only the cluster's PostgreSQL,
lists, follows and acts on the sessions of every host (docs/cluster.md)."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of, herd_cli
from conftest import HERD, SIMAGENT, script, sim_repo, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(3600)  # ended by the test: 120 s ran out on a loaded machine mid-test
""")


def viewer(tmp_path: Path, toml: str, url: str) -> functools.partial[Any]:
    """`herd ARGS` run in a folder of its own that has the same herd.toml and no daemon."""
    folder = tmp_path / "laptop"
    folder.mkdir()
    (folder / "herd.toml").write_text(toml)
    return herd_cli(folder, url, COLUMNS="200")


def ls_json(herd: functools.partial[Any]) -> dict[str, dict[str, Any]]:
    listed = herd([HERD, "ls", "--json"])
    assert listed.returncode == 0, listed.stderr
    return {s["session"]: s for s in json.loads(listed.stdout)}


def test_a_viewer_lists_stops_and_reads_sessions_of_other_hosts(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    toml = cluster_toml(f"""
        [[session]]
        name = "far"
        command = {SLEEPER}
        restart = "never"
        host = "h2"

        [[session]]
        name = "near"
        command = {SLEEPER}
        restart = "never"
        host = "h1"

        [[session]]
        name = "never"
        command = {SLEEPER}
        restart = "never"
        autostart = false
    """)
    # Each host joins the list as it starts: a failed second start leaves none running.
    hosts.extend(HostProc(tmp_path, n, toml, pg_url).start() for n in ("h1", "h2"))
    herd = viewer(tmp_path, toml, pg_url)
    up = herd([HERD, "up", "--no-tui"])
    assert up.returncode == 0, up.stderr
    assert "far/1" in up.stdout and "near/1" in up.stdout and "never" not in up.stdout
    wait_until(
        lambda: (
            {n: (s["state"], s["host"]) for n, s in ls_json(herd).items()}
            == {"far": ("running", "h2"), "near": ("running", "h1"), "never": ("idle", None)}
        ),
        60,
        "both sessions to run, each on its host",
    )
    again = herd([HERD, "up", "--no-tui"])  # a second `up` starts nothing twice
    assert "far/1" in again.stdout and "far/2" not in again.stdout
    table = herd([HERD, "ls"]).stdout.splitlines()
    assert table[0].split()[:3] == ["SESSION", "HOST", "STATE"]
    assert any(line.split()[:3] == ["far", "h2", "running"] for line in table), table

    began = time.monotonic()
    stopped = herd([HERD, "stop", "far"])  # asked here, done by h2's daemon
    print(f"herd stop across hosts: {time.monotonic() - began:.2f}s")
    assert (stopped.returncode, stopped.stdout) == (0, "far: stopped (user)\n"), stopped.stderr
    assert hosts[1].client.call("status", target="far")["state"] == "stopped"
    waited = herd([HERD, "wait", "far/1"])
    assert (waited.returncode, waited.stdout) == (3, "far/1: stopped (user)\n"), waited.stderr
    assert hosts[0].client.call("status", target="near")["state"] == "running"  # untouched

    events = herd([HERD, "events", "--session", "far", "--json"])
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    ran = [(e["kind"], e["host"]) for e in lines if e["kind"] in ("run-started", "stopped")]
    assert ran == [("run-started", "h2"), ("stopped", "h2")], lines
    every = herd([HERD, "events", "--json"]).stdout.splitlines()
    seqs = [json.loads(line)["seq"] for line in every]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # one numbering for the fleet

    report = herd([HERD, "report", "far"])
    assert report.returncode == 0 and "far" in report.stdout, report.stderr
    status = herd([HERD, "status", "near", "--json"])
    assert json.loads(status.stdout)["host"] == "h1"
    unknown = herd([HERD, "stop", "nosuch"])
    assert unknown.returncode == 2 and "nosuch" in unknown.stderr


def test_a_viewer_approves_a_plan_change_on_another_host(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    agent = json.dumps([*SIMAGENT, "--delay", "0.3", "--tamper-at", "2"])
    toml = cluster_toml(f"""
        [[session]]
        name = "api"
        cwd = "repo"
        command = {agent}
        agent = "claude"
        restart = "never"
        autostart = false
        host = "h2"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        on_drift = {{ plan-tampered = "pause" }}
        stop_grace = "2s"
    """)
    h1 = HostProc(tmp_path, "h1", toml, pg_url)
    h2 = HostProc(tmp_path, "h2", toml, pg_url)
    sim_repo(h2.root / "repo")
    (h1.root / "repo").mkdir()  # every host's herd.toml names the folder; only h2 runs it
    hosts.append(h1.start())  # each as it starts: a failed second start leaves none running
    hosts.append(h2.start())
    herd = viewer(tmp_path, toml, pg_url)
    assert herd([HERD, "start", "api"]).stdout == "api/1\n"
    wait_until(lambda: ls_json(herd)["api"]["state"] == "waiting-approval", 60, "the gate on h2")
    assert ls_json(herd)["api"]["reason"] == "plan-tampered"
    approved = herd([HERD, "approve", "api"])
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith("api: plan approved")
    waited = herd([HERD, "wait", "api/1", "--timeout", "60"])
    assert (waited.returncode, waited.stdout) == (0, "api/1: completed\n"), waited.stderr
    again = herd([HERD, "reject", "api"])  # nothing to reject now: h2's own answer comes back
    assert again.returncode == 2 and again.stderr.strip(), again.stdout


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


@pytest.mark.anyio
async def test_the_dashboard_shows_hosts_and_starts_and_stops_through_the_engine(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    from test_dashboard import cell, select, until

    from agentherd.supervisor.cluster.dashclient import AsyncClusterClient
    from agentherd.tui.dashboard.app import HerdApp

    toml = cluster_toml(f"""
        [[session]]
        name = "far"
        command = {SLEEPER}
        restart = "never"
        autostart = false
        host = "h2"
    """)
    await anyio.to_thread.run_sync(  # each as it starts: a failed second start leaves none running
        lambda: hosts.extend(HostProc(tmp_path, n, toml, pg_url).start() for n in ("h1", "h2"))
    )
    started = list(hosts)
    fleet = fleet_of(started[0], pg_url)
    app = HerdApp(client=AsyncClusterClient(fleet, poll_s=0.2), config_label="cluster")
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: app.table.row_count == 1, "the row")
            assert "host" in app.table.column_keys and cell(app, "far", "host") == "-"
            await select(pilot, app, "far")
            await pilot.press("s")  # start: placed by the engine on h2
            await until(pilot, lambda: cell(app, "far", "state") == "running", "far running")
            assert cell(app, "far", "host") == "h2"
            await pilot.press("s")  # stop: h2's daemon stops it
            await until(pilot, lambda: cell(app, "far", "state").startswith("stopped"), "stop")
    finally:
        await anyio.to_thread.run_sync(fleet.close)
    status = started[1].client.call("status", target="far")
    assert (status["state"], status["reason"]) == ("stopped", "user")
