"""Case 10: a `herd down` cut short by kill -9 of the daemon still ends as `down`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import HERD, Herd, make_repo, script, wait_until

from agentherd.sessions.states import State
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.files.store import Change, Store


def herd_cli(root: Path, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HERD, *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def listing(root: Path) -> dict[str, dict[str, Any]]:
    return {s["session"]: s for s in json.loads(herd_cli(root, "ls", "--json").stdout)}


# Run 1 ignores SIGTERM ("stubborn") or leaves only when told ("polite"), so `herd down` stays
# in its stop for as long as the test needs; later runs stop at once.
STUBBORN = script("""
    import os, signal, time
    if os.environ["HERD_RUN"] == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(120)
""")


def polite(go: Path) -> str:
    return script(f"""
        import os, pathlib, signal, sys, time
        def leave_when_told(*_):
            while not pathlib.Path({str(go)!r}).exists():
                time.sleep(0.02)
            sys.exit(0)
        if os.environ["HERD_RUN"] == "1":
            signal.signal(signal.SIGTERM, leave_when_told)
        print("ready", flush=True)
        time.sleep(120)
    """)


@pytest.mark.pidns
@pytest.mark.timeout(120)
def test_kill_9_during_down_leaves_sessions_that_the_next_up_starts(tmp_path: Path) -> None:
    go = tmp_path / "polite-may-leave"
    blocks = []
    for name, command in (("stubborn", STUBBORN), ("polite", polite(go))):
        blocks.append(f"""
[[session]]
name = "{name}"
cwd = "{make_repo(tmp_path / name)}"
command = {command}
stop_grace = "4s"
""")
    (tmp_path / "herd.toml").write_text("".join(blocks))
    assert herd_cli(tmp_path, "up", "--no-tui").returncode == 0
    try:
        wait_until(
            lambda: all(s["last_line"] == "ready" for s in listing(tmp_path).values()),
            what="both agents running",
        )
        first_pids = {name: s["pid"] for name, s in listing(tmp_path).items()}
        daemon_pid = int((tmp_path / ".herd" / "daemon.lock").read_text())
        down = subprocess.Popen(
            [HERD, "down"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        wait_until(
            lambda: all(s["state"] == "stopping" for s in listing(tmp_path).values()),
            what="`herd down` to be stopping both",
        )
        os.kill(daemon_pid, signal.SIGKILL)
        down.communicate(timeout=30)
        # "polite" ends while no daemon runs; "stubborn" still runs when the next daemon starts.
        go.write_text("go")
        wait_until(
            lambda: (tmp_path / ".herd/runs/polite/1/exit_status").exists(),
            what="polite to exit while no daemon runs",
        )
        os.kill(first_pids["stubborn"], 0)  # still alive

        up = herd_cli(tmp_path, "up", "--no-tui")
        assert up.returncode == 0, up.stdout + up.stderr
        statuses = wait_until(
            lambda: (
                (found := listing(tmp_path))
                and all(s["state"] == "running" and s["run"] == 2 for s in found.values())
                and found
            ),
            timeout_s=20,
            what="the next `herd up` to start both again",
        )
        assert statuses["stubborn"]["handle"] == "stubborn/2"
        events = [
            json.loads(line)
            for line in herd_cli(tmp_path, "events", "--json").stdout.split("\n")
            if line
        ]
        stopped = {e["session"]: e["data"]["reason"] for e in events if e["kind"] == "stopped"}
        assert stopped == {"stubborn": "down", "polite": "down"}, stopped
    finally:
        herd_cli(tmp_path, "down")


def test_a_stop_whose_run_ended_before_the_daemon_died_ends_with_its_reason(herd: Herd) -> None:
    """The store a daemon leaves when killed after writing the run's end, before the task's."""
    go = herd.root / "go"
    herd.write(f"""
        [[session]]
        name = "api"
        command = {
        script(f'''
            import pathlib, time
            print("ready", flush=True)
            while not pathlib.Path({str(go)!r}).exists():
                time.sleep(0.02)
        ''')
    }
    """)
    herd.start().call("start", name="api")
    wait_until(lambda: herd.status("api")["last_line"] == "ready")
    herd.stop_daemon()
    go.write_text("go")
    wait_until(lambda: (herd.root / ".herd/runs/api/1/exit_status").exists())
    store = Store(herd.root / ".herd" / "state.db")
    try:
        record = store.sessions()["api"]
        record.state, record.reason = State.STOPPING, "down"
        run = store.run("api", 1)
        assert run is not None
        run.stop_requested, run.stop_reason = True, "down"
        run.ended_at, run.exit_code = iso(utc_now()), 0
        store.commit(Change(session=record, run=run))
    finally:
        store.close()
    client = herd.start()
    status = herd.wait_state("api", "stopped", "failed")
    assert (status["state"], status["reason"]) == ("stopped", "down")
    assert client.call("up") == [{"session": "api", "handle": "api/2"}]
