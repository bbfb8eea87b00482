"""What a crash and a stop wait for (issue 14: crash -> relaunch, `herd down` at 200 agents).

A run's end no longer waits out its log's rest between reads, and a stop does not scan every
process on the machine while its agent's wrapper (the daemon's own child) is still alive.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from conftest import FAST, Herd, script, wait_until

from agentherd.supervisor.process import proctable

SLOW_READS = dataclasses.replace(FAST, tail_gap_s=60.0, tail_poll_s=60.0, drain_wait_s=40.0)
"""A log rests a minute between reads: an end that waited for the rest (or gave up on the last
output after `drain_wait_s`) would take 40 s, far beyond what a loaded machine adds."""


def session(name: str, command: str, restart: str = "never") -> str:
    return (
        f'[[session]]\nname = "{name}"\ncommand = {command}\ncwd = "."\n'
        f'restart = "{restart}"\nstop_grace = "5s"\n'
    )


@pytest.mark.pidns
def test_a_crash_is_recorded_without_waiting_for_the_logs_rest(tmp_path: Path) -> None:
    herd = Herd(tmp_path, SLOW_READS)
    go, working = tmp_path / "go", tmp_path / "working"
    herd.write(
        session(
            "crashy",
            script(f"""
                import os, pathlib, sys, time
                print("working", flush=True)
                pathlib.Path({str(working)!r}).touch()
                while not os.path.exists({str(go)!r}):
                    time.sleep(0.01)
                print("giving up", flush=True)
                sys.exit(3)
            """),
        )
    )
    herd.start()
    try:
        herd.client.call("start", name="crashy")
        # The file, not the status: a line written after the log's first read waits its rest.
        wait_until(working.exists, what="the agent to be working")
        go.touch()
        began = time.monotonic()
        ended = herd.wait_state("crashy", "failed", timeout_s=30)
        waited_s = time.monotonic() - began
        assert ended["exit_code"] == 3
        assert ended["last_line"] == "giving up", "the last read still took the final output"
        assert waited_s < 20.0, f"the end waited {waited_s:.1f}s for the log's minute of rest"
    finally:
        herd.down()


@pytest.mark.pidns
def test_a_stop_scans_the_processes_only_once_its_agent_has_exited(tmp_path: Path) -> None:
    herd = Herd(tmp_path)
    ready = tmp_path / "ready"
    herd.write(
        session(
            "slow",
            script(f"""
                import pathlib, signal, sys, time
                def later(*_):
                    time.sleep(1.0)  # a clean shutdown that takes a while
                    sys.exit(0)
                signal.signal(signal.SIGTERM, later)
                pathlib.Path({str(ready)!r}).touch()
                while True:
                    time.sleep(0.05)
            """),
        )
    )
    herd.start()
    try:
        herd.client.call("start", name="slow")
        wait_until(ready.exists, what="the agent's SIGTERM handler")
        before = proctable.SHARED.scans
        began = time.monotonic()
        stopped = herd.client.call("stop", name="slow")
        took_s = time.monotonic() - began
        scans = proctable.SHARED.scans - before
        assert stopped["state"] == "stopped"
        assert took_s >= 1.0, "the agent had its second to shut down"
        # One scan for what escaped the group when signalled, one or two once the agent left;
        # polling scans at stop_poll_s (0.02 s) over its second would be fifty.
        assert scans <= 4, f"{scans} process scans for one stop"
        assert herd.client.call("info")["sessions"] == ["slow"]
        left = [p for p in proctable.scan().entries if p.run_dir and "slow" in p.run_dir]
        assert left == [], "nothing of the run is left"
    finally:
        herd.down()
