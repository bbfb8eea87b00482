"""Sessions renamed or removed from herd.toml while their agents run stay supervised until they
are stopped: through `herd up`, and through a new daemon that finds their runs alive."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from conftest import Herd, make_repo, script, wait_until

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(120)
""")


def block(name: str, cwd: str) -> str:
    return f"""
[[session]]
name = "{name}"
cwd = "{cwd}"
command = {SLEEPER}
stop_grace = "2s"
"""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def sessions(herd: Herd) -> dict[str, str]:
    return {s["session"]: s["state"] for s in herd.client.call("ls")}


@pytest.mark.pidns
def test_up_after_renaming_and_removing_running_sessions(herd: Herd, tmp_path: Path) -> None:
    for folder in ("A", "B", "C"):
        make_repo(tmp_path / folder)
    herd.write(block("a", "A") + block("b", "B"))
    herd.start()
    assert herd.cli("up", "--no-tui").returncode == 0
    pids = {name: herd.wait_state(name, "running")["pid"] for name in ("a", "b")}

    # `a` renamed to `a2` (same folder), `b` removed, `c` added; both old agents still run.
    herd.write(block("a2", "A") + block("c", "C"))
    up = herd.cli("up", "--no-tui")
    assert up.returncode == 2, "a2 cannot start beside a's agent in one worktree"
    assert "cannot start a2: session a is running in the same worktree" in up.stderr
    assert "still running: a, b" in up.stdout
    herd.wait_state("c", "running")
    assert sessions(herd) == {"a": "running", "b": "running", "a2": "idle", "c": "running"}

    # A new daemon finds their runs alive: it keeps supervising them.
    herd.stop_daemon()
    assert not gone(pids["a"]) and not gone(pids["b"])
    herd.start()
    assert sessions(herd) == {"a": "running", "b": "running", "a2": "idle", "c": "running"}
    assert herd.status("b")["pid"] == pids["b"]
    stopped = herd.cli("stop", "b")
    assert stopped.returncode == 0, stopped.stderr
    assert gone(pids["b"])

    # Once stopped, `herd up` lets them go, and a2 starts in a's folder.
    assert herd.cli("stop", "a").returncode == 0
    up = herd.cli("up", "--no-tui")
    assert up.returncode == 0, up.stderr
    assert "removed: a, b" in up.stdout or "removed: b, a" in up.stdout
    herd.wait_state("a2", "running")
    assert set(sessions(herd)) == {"a2", "c"}


@pytest.mark.pidns
def test_down_stops_a_removed_session_a_new_daemon_found_running(
    herd: Herd, tmp_path: Path
) -> None:
    make_repo(tmp_path / "B")
    herd.write(block("b", "B"))
    herd.start().call("start", name="b")
    pid = herd.wait_state("b", "running")["pid"]
    herd.write(block("x", "B").replace('name = "x"', 'name = "x"\nautostart = false'))
    herd.stop_daemon()
    herd.start()
    assert sessions(herd).get("b") == "running", "its agent runs: herd still owns it"
    herd.down()
    wait_until(lambda: gone(pid), timeout_s=10, what="b's agent to be stopped by herd down")
