"""A wall-clock jump of an hour, forward or back, moves no timer: budgets' wall time, the stall
clock and backoff run on the monotonic clock; the times herd writes follow the new wall clock.

The jump is made by shifting the wall clock the daemon reads (`time.time`, through which
`sessions.times.utc_now` reads it too): the daemon runs in this process, the machine's clock is
never touched. File times (which the kernel stamps) are not shifted, so the agents here write
their output before the jump and nothing after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Herd, make_repo, script, wait_until

from agentherd.sessions.times import parse_iso, utc_now

HOUR_S = 3600.0

SILENT = script("""
    import time
    print("started", flush=True)
    time.sleep(120)
""")
"""An agent that says one line, then nothing while it works."""

CRASH = script("""
    print("crashing", flush=True)
    raise SystemExit(3)
""")


class WallClock:
    """Shifts what `time.time()` returns in this process (the daemon's wall clock)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset_s = 0.0
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + self.offset_s)

    def jump(self, seconds: float) -> None:
        self.offset_s += seconds


@pytest.fixture
def wall_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[WallClock]:
    yield WallClock(monkeypatch)


def block(name: str, cwd: str, command: str, extra: str) -> str:
    return f"""
[[session]]
name = "{name}"
cwd = "{cwd}"
command = {command}
stop_grace = "2s"
{extra}
"""


def passes(herd: Herd, count: int) -> None:
    """Let `count` reconcile passes (stall, budget and backoff looks) go by."""
    first = herd.client.call("info")["reconcile_passes"]
    wait_until(lambda: herd.client.call("info")["reconcile_passes"] >= first + count)


def kinds(herd: Herd, name: str) -> list[str]:
    return [e["kind"] for e in herd.events(name)]


@pytest.mark.pidns
def test_a_jump_forward_stops_no_budget_raises_no_stall_ends_no_backoff(
    herd: Herd, tmp_path: Path, wall_clock: WallClock
) -> None:
    for folder in ("A", "B"):
        make_repo(tmp_path / folder)
    herd.write(
        block(
            "a",
            "A",
            SILENT,
            'restart = "never"\nbudget = { wall_time = "50m", stall = "50m" }',
        )
        + block("b", "B", CRASH, 'restart = "on-failure"\nrestart_delay = "50m"')
    )
    client = herd.start()
    client.call("start", name="a")
    client.call("start", name="b")
    herd.wait_state("a", "running")
    wait_until(lambda: herd.status("a")["last_line"] == "started", what="a's one line")
    waiting = herd.wait_state("b", "backoff")
    before_jump = utc_now()

    wall_clock.jump(+HOUR_S)
    passes(herd, 10)

    a = herd.status("a")
    assert a["state"] == "running", (a["state"], a["reason"])
    assert a["budget"]["wall_time"]["spent"] < 600, "an hour of wall clock is not an hour of run"
    assert not {"budget-warning", "budget-stop", "stalled"} & set(kinds(herd, "a"))
    b = herd.status("b")
    assert b["state"] == "backoff" and b["run"] == 1, "a 50-minute backoff is not over"
    assert b["next_restart_at"] == waiting["next_restart_at"], "kept as it was written"

    # What herd writes now follows the new wall clock.
    assert client.call("stop", name="a", socket_timeout_s=None)["state"] == "stopped"
    [stopped] = [e for e in herd.events("a") if e["kind"] == "stopped"]
    at = parse_iso(stopped["at"])
    assert at is not None and (at - before_jump).total_seconds() >= HOUR_S


@pytest.mark.pidns
def test_a_jump_back_delays_no_budget_stop_no_stall_no_restart(
    herd: Herd, tmp_path: Path, wall_clock: WallClock
) -> None:
    for folder in ("A", "S", "C"):
        make_repo(tmp_path / folder)
    herd.write(
        block("a", "A", SILENT, 'restart = "never"\nbudget = { wall_time = "4s" }')
        + block("s", "S", SILENT, 'restart = "never"\nbudget = { stall = "3s" }')
        + block("c", "C", CRASH, 'restart = "on-failure"\nrestart_delay = "2s"\nmax_crashes = 50')
    )
    client = herd.start()
    for name in ("a", "s", "c"):
        client.call("start", name=name)
    herd.wait_state("a", "running")
    herd.wait_state("s", "running")
    herd.wait_state("c", "backoff")
    began_s = time.monotonic()

    wall_clock.jump(-HOUR_S)

    stopped = herd.wait_state("a", "stopped", timeout_s=30)
    assert stopped["reason"] == "budget:wall_time"
    wait_until(lambda: "stalled" in kinds(herd, "s"), timeout_s=30, what="s to stall")
    wait_until(lambda: herd.status("c")["run"] >= 2, timeout_s=30, what="c's next run")
    assert time.monotonic() - began_s < 30
    client.call("stop", name="s", socket_timeout_s=None)
    client.call("stop", name="c", socket_timeout_s=None)
