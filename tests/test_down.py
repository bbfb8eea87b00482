"""`herd down` waits for the longest stop_grace, or names exactly which pids it left running."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
from conftest import FAST, Herd, processes_of_test, script, wait_until

from agentherd.sessions.status import DownReply
from agentherd.tui.cli.cli import left_running_line

IGNORES_TERM = script("""
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
""")


def stubborn_fleet(tmp_path: Path, stop_grace: str, down_margin_s: float) -> Herd:
    herd = Herd(tmp_path, replace(FAST, down_margin_s=down_margin_s))
    herd.write(f"""
        [[session]]
        name = "stubborn"
        command = {IGNORES_TERM}
        stop_grace = "{stop_grace}"
    """)
    herd.start().call("up")
    wait_until(lambda: herd.status("stubborn")["last_line"] == "ready", what="SIGTERM ignored")
    return herd


def down(herd: Herd) -> tuple[dict[str, Any], float]:
    """Call `down` on the daemon; return its reply and how long it took."""
    started = time.monotonic()
    try:
        result = herd.client.call("down", socket_timeout_s=None)
    finally:
        herd.down()  # the daemon's thread ends; nothing to do when `down` already ended it
    return result, time.monotonic() - started


def test_down_waits_for_the_longest_stop_grace(tmp_path: Path, no_leftover_processes: str) -> None:
    """Case 5: down gave up after its own 60 s even when stop_grace was 90 s, and returned 0
    with the agent running; here the margin is 0.1 s, so only the grace can keep it waiting."""
    herd = stubborn_fleet(tmp_path, stop_grace="2s", down_margin_s=0.1)
    result, took_s = down(herd)
    assert processes_of_test(no_leftover_processes) == [], "down returned with the agent alive"
    assert result["left"] == []
    assert [s["state"] for s in result["stopped"]] == ["stopped"]
    assert 2.0 <= took_s < result["waited_s"] + 2.0
    assert result["waited_s"] == 2.0 + 2 * FAST.kill_wait_s + 0.1


def test_down_names_every_pid_it_could_not_stop(tmp_path: Path, no_leftover_processes: str) -> None:
    """Case 5: a stop that cannot finish in time (here: a deadline shorter than the grace, as a
    process in uninterruptible sleep would cause) is reported with its pids, never silently."""
    herd = stubborn_fleet(
        tmp_path, stop_grace="10s", down_margin_s=0.5 - (10.0 + 2 * FAST.kill_wait_s)
    )
    result, took_s = down(herd)
    alive = processes_of_test(no_leftover_processes)
    try:
        assert took_s < 9.0  # not the 10 s grace; room for a loaded machine's slow exit
        assert result["waited_s"] == 0.5
        assert [(e["session"], e["state"]) for e in result["left"]] == [("stubborn", "stopping")]
        assert result["left"][0]["pids"] == sorted(p.pid for p in alive) != []
        pids = ", ".join(str(p.pid) for p in sorted(alive, key=lambda p: p.pid))
        reply = DownReply.model_validate(result)
        assert left_running_line(reply.left, reply.waited_s) == (
            f"the daemon stopped, but after 0.5s these still run: stubborn (pids {pids}); "
            "end them with `kill PID`, see .herd/daemon.log"
        )
    finally:
        for proc in alive:
            proc.kill()
        psutil.wait_procs(alive, timeout=5)


def test_down_writes_every_stopped_sessions_report(
    tmp_path: Path, no_leftover_processes: str
) -> None:
    """Each task that `herd down` ends gets its report in `.herd/reports/`, as any ended task
    does: the daemon used to exit with the reports still being written (0 of 200 written)."""
    herd = Herd(tmp_path, FAST)
    names = [f"s{i}" for i in range(12)]
    herd.write(
        "".join(
            f"""
        [[session]]
        name = "{name}"
        command = {script('print("ready", flush=True); import time; time.sleep(60)')}
        cwd = "{name}"
        """
            for name in names
        )
    )
    for name in names:
        (tmp_path / name).mkdir()
    herd.start().call("up")
    for name in names:
        wait_until(lambda n=name: herd.status(n)["last_line"] == "ready", what=f"{name} to run")
    herd.down()
    reports = tmp_path / ".herd" / "reports"
    written = sorted(p.stem for p in reports.glob("*.md")) if reports.exists() else []
    assert written == sorted(names)
    assert all("stopped" in (reports / f"{name}.md").read_text() for name in names)
