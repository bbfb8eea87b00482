"""The dashboard under a big fleet: key latency, event-loop lag, its CPU, and the daemon's.

    python bench/dashboard_load.py [--sessions 200] [--seconds 15] [--only busy|quiet|flood]

The daemon runs in its own process (`python -m agentherd.supervisor.main`), so this process's
CPU time is the dashboard's (the real app, headless, subscribed to the real daemon) and the
daemon's CPU time is read from /proc. Three fleets:

- busy: light agents that print a line a second and exit after 20-60 s (restart = "always"),
  so rows change state and output all the time while the agents leave the cores free. The
  daemon's CPU is measured alone first, then with the dashboard subscribed;
- quiet: agents that print one line and sleep; nothing changes but the clock;
- flood: one agent printing 50,000 lines a second, its output open in the dashboard.

A key press is timed from posting the key event (as the terminal driver does) to the first
screen update after the cursor moved.

The targets (issues 13 and 14): key p95 <= 50 ms, loop lag p95 <= 50 ms, a quiet dashboard
under 2 % of a core, a subscribed dashboard barely raising the daemon's CPU; with the flood,
loop lag p99 <= 100 ms and memory bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from harness import make_repo  # noqa: E402
from textual import events  # noqa: E402

from agentherd.sessions.config import load_config  # noqa: E402
from agentherd.supervisor.api.client import Client  # noqa: E402
from agentherd.supervisor.files.paths import socket_path_for  # noqa: E402
from agentherd.tui.dashboard.app import HerdApp  # noqa: E402
from agentherd.tui.dashboard.widgets import SessionTable  # noqa: E402

BUSY_AGENT = (
    "import random, time\n"
    "for i in range(random.randint(20, 60)):\n"
    "    print('step', i, 'of the task', flush=True); time.sleep(1.0)\n"
)
"""A line a second, then after 20-60 s an exit that herd restarts: a few state changes a
second across 200 sessions, output everywhere, and the cores left to the dashboard."""

QUIET_AGENT = "import time; print('waiting', flush=True); time.sleep(3600)\n"
"""One line, then nothing: only the uptimes move."""

FLOOD_AGENT = (
    "import sys, time\n"
    "w = sys.stdout.write; i = 0; t = time.monotonic()\n"
    "while True:\n"
    "    w(''.join(f'flood line {i + k} of a very chatty agent\\n' for k in range(500)))\n"
    "    sys.stdout.flush(); i += 500; t += 0.01\n"
    "    time.sleep(max(0.0, t - time.monotonic()))\n"
)
"""50,000 lines a second, written 500 at a time every 10 ms."""

LAG_PROBE_S = 0.02
"""The loop-lag probe sleeps this long and measures how late it wakes."""

SETTLE_S = 10.0
"""After `up`, the fleet settles this long before anything is measured."""

KEY_GAP_S = 0.2
"""Time between two key presses: a person moving through the table briskly."""

CLK_TCK = os.sysconf("SC_CLK_TCK")


def make_fleet(root: Path, sessions: int, agent: str) -> Path:
    """`sessions` repos and a herd.toml running `agent` in each, restarted whenever it exits."""
    blocks = []
    for index in range(sessions):
        repo = make_repo(root / f"s{index:03d}")
        blocks.append(
            f'[[session]]\nname = "s{index:03d}"\ncwd = "{repo}"\n'
            f"command = {json.dumps([sys.executable, '-c', agent])}\n"
            'restart = "always"\nrestart_delay = "1s"\nstop_grace = "2s"\n'
        )
    path = root / "herd.toml"
    path.write_text("\n".join(blocks))
    return path


def percentile(values: list[float], fraction: float) -> float:
    """The `fraction` percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class CpuWindow:
    """CPU share of one process over a window of wall time."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu, self.wall = cpu_seconds(pid), time.monotonic()

    def share(self) -> float:
        """% of a core since the window opened."""
        return 100 * (cpu_seconds(self.pid) - self.cpu) / (time.monotonic() - self.wall)


class ScreenClock:
    """Counts the app's screen updates, so a key press can be timed to the screen."""

    def __init__(self, app: HerdApp) -> None:
        self.updates = 0
        self.changed = asyncio.Event()
        original: Callable[..., Any] = app._display

        def display(screen: Any, renderable: Any) -> None:
            original(screen, renderable)
            if renderable is not None:
                self.updates += 1
                self.changed.set()

        app._display = display  # type: ignore[method-assign]


async def press_and_time(app: HerdApp, table: SessionTable, clock: ScreenClock, key: str) -> float:
    """Post a key as the driver does; ms until a screen update after the cursor moved."""
    row = table.cursor_row
    start = time.monotonic()
    app.post_message(events.Key(key, key))
    while time.monotonic() - start < 5:
        clock.changed.clear()
        await clock.changed.wait()
        if table.cursor_row != row:
            break
    return (time.monotonic() - start) * 1000


async def probe_lag(lag_ms: list[float], stop: float) -> None:
    """How late the loop wakes a sleeper, in ms, until `stop`."""
    while time.monotonic() < stop:
        start = time.monotonic()
        await asyncio.sleep(LAG_PROBE_S)
        lag_ms.append((time.monotonic() - start - LAG_PROBE_S) * 1000)


async def measure(
    socket_path: Path,
    sessions: int,
    seconds: float,
    daemon_pid: int,
    raw: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Run the dashboard headless; press j/k throughout; probe the loop; count CPU. `raw`, if
    given, gets every key's and every probe's milliseconds (the distributions)."""
    app = HerdApp(socket_path)
    key_ms: list[float] = []
    key_cpu_ms: list[float] = []
    """The dashboard's CPU time from a key to the screen: what a loaded machine multiplies."""
    lag_ms: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        clock = ScreenClock(app)
        table = app.query_one(SessionTable)
        deadline = time.monotonic() + 60
        while table.row_count < sessions and time.monotonic() < deadline:
            await pilot.pause(0.1)
        await asyncio.sleep(1.0)
        stop = time.monotonic() + seconds
        prober = asyncio.create_task(probe_lag(lag_ms, stop))
        own, daemon = CpuWindow(os.getpid()), CpuWindow(daemon_pid)
        down = True
        while time.monotonic() < stop:
            row = table.cursor_row
            if row in (0, table.row_count - 1):  # turn at either end of the table
                down = row == 0
            cpu = time.process_time()
            key_ms.append(await press_and_time(app, table, clock, "j" if down else "k"))
            key_cpu_ms.append((time.process_time() - cpu) * 1000)
            await asyncio.sleep(KEY_GAP_S)
        await prober
        with_keys, daemon_with_keys = own.share(), daemon.share()
        # No keys: only the feed and the clock.
        own, daemon = CpuWindow(os.getpid()), CpuWindow(daemon_pid)
        updates = clock.updates
        await asyncio.sleep(seconds)
        no_keys, daemon_no_keys = own.share(), daemon.share()
        frames_s = (clock.updates - updates) / seconds
    if raw is not None:
        raw["key_ms"], raw["lag_ms"] = key_ms, lag_ms
    return {
        "key_p50_ms": statistics.median(key_ms) if key_ms else 0.0,
        "key_p95_ms": percentile(key_ms, 0.95),
        "keys": len(key_ms),
        "key_cpu_p50_ms": statistics.median(key_cpu_ms) if key_cpu_ms else 0.0,
        "key_cpu_p95_ms": percentile(key_cpu_ms, 0.95),
        "lag_p95_ms": percentile(lag_ms, 0.95),
        "lag_p99_ms": percentile(lag_ms, 0.99),
        "cpu_with_keys": with_keys,
        "cpu_no_keys": no_keys,
        "frames_s": frames_s,
        "daemon_with_keys": daemon_with_keys,
        "daemon_no_keys": daemon_no_keys,
        "rss_mb": rss_mb(os.getpid()),
    }


async def measure_flood(
    socket_path: Path, seconds: float, raw: dict[str, list[float]] | None = None
) -> dict[str, float]:
    """The flooding session's output open in the dashboard: loop lag and memory over time."""
    app = HerdApp(socket_path)
    lag_ms: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.query_one(SessionTable)
        deadline = time.monotonic() + 60
        while table.row_count < 1 and time.monotonic() < deadline:
            await pilot.pause(0.1)
        await pilot.press("l")  # the output pane, following the flood
        await asyncio.sleep(2.0)
        rss_start = rss_mb(os.getpid())
        own = CpuWindow(os.getpid())
        await probe_lag(lag_ms, time.monotonic() + seconds)
        cpu = own.share()
        rss_end = rss_mb(os.getpid())
    if raw is not None:
        raw["lag_ms"] = lag_ms
    return {
        "lag_p95_ms": percentile(lag_ms, 0.95),
        "lag_p99_ms": percentile(lag_ms, 0.99),
        "cpu": cpu,
        "rss_start_mb": rss_start,
        "rss_end_mb": rss_end,
    }


def profile(folder: Path | None, name: str, pid: int, seconds: float) -> Any:
    """`py-spy record` of a process into `folder` (collapsed stacks), or None without one."""
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        ["py-spy", "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "100", "-f", "raw"]
        + ["-o", str(folder / f"{name}.txt"), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run(
    kind: str,
    sessions: int,
    seconds: float,
    profile_dir: Path | None = None,
    settle_s: float = SETTLE_S,
    raw: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """One fleet of `kind` under a daemon process; the dashboard measured against it, after
    the fleet settled `settle_s`; `raw` gets the latency samples (see `measure`)."""
    root = Path(tempfile.mkdtemp(prefix=f"herd-bench-{kind}-"))
    agent = {"busy": BUSY_AGENT, "quiet": QUIET_AGENT, "flood": FLOOD_AGENT}[kind]
    config = load_config(make_fleet(root, 1 if kind == "flood" else sessions, agent))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "agentherd.supervisor.main", str(config.path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    socket_path = socket_path_for(config.state_dir)
    client = Client(socket_path)
    try:
        while not client.ping():
            time.sleep(0.05)
        client.call("up", socket_timeout_s=None)
        time.sleep(min(5.0, settle_s))  # every agent started
        if kind == "flood":
            profiler = profile(profile_dir, "dashboard", os.getpid(), seconds + 5)
            found = asyncio.run(measure_flood(socket_path, seconds, raw))
            if profiler is not None:
                profiler.wait(60)
            return found
        # The daemon alone before and after the dashboard, so a drift in the fleet's own
        # cost (restarts come and go) does not pass for the dashboard's.
        time.sleep(settle_s)
        alone = CpuWindow(daemon.pid)
        time.sleep(seconds)
        before = alone.share()
        profilers = [profile(profile_dir, "dashboard", os.getpid(), 2 * seconds)]
        profilers.append(profile(profile_dir, "daemon", daemon.pid, 2 * seconds))
        found = asyncio.run(measure(socket_path, sessions, seconds, daemon.pid, raw))
        for profiler in profilers:
            if profiler is not None:
                profiler.wait(60)
        alone = CpuWindow(daemon.pid)
        time.sleep(seconds)
        found["daemon_alone"] = (before + alone.share()) / 2
        found["daemon_alone_before"], found["daemon_alone_after"] = before, alone.share()
        return found
    finally:
        client.call("down", socket_timeout_s=None)
        daemon.wait(60)
        shutil.rmtree(root, ignore_errors=True)


def report(kind: str, sessions: int, found: dict[str, float]) -> str:
    """One fleet's figures as a few lines."""
    if kind == "flood":
        return (
            f"flood, one agent at 50,000 lines/s, its output open: loop lag "
            f"p95 {found['lag_p95_ms']:.0f} ms, p99 {found['lag_p99_ms']:.0f} ms; "
            f"dashboard CPU {found['cpu']:.1f} % of a core; "
            f"RSS {found['rss_start_mb']:.0f} -> {found['rss_end_mb']:.0f} MB"
        )
    return (
        f"{kind} fleet of {sessions}:\n"
        f"  key -> screen p50 {found['key_p50_ms']:.0f} ms, p95 {found['key_p95_ms']:.0f} ms "
        f"({found['keys']:.0f} keys; the dashboard's CPU time per key p50 "
        f"{found['key_cpu_p50_ms']:.0f} ms, p95 {found['key_cpu_p95_ms']:.0f} ms)\n"
        f"  loop lag p95 {found['lag_p95_ms']:.0f} ms, p99 {found['lag_p99_ms']:.0f} ms\n"
        f"  dashboard CPU {found['cpu_with_keys']:.1f} % of a core while keys are pressed, "
        f"{found['cpu_no_keys']:.1f} % without ({found['frames_s']:.1f} screen updates/s); "
        f"its RSS {found.get('rss_mb', 0.0):.0f} MB\n"
        f"  daemon CPU {found['daemon_alone']:.1f} % alone "
        f"({found['daemon_alone_before']:.1f} before the dashboard, "
        f"{found['daemon_alone_after']:.1f} after), "
        f"{found['daemon_no_keys']:.1f} % with the dashboard subscribed "
        f"({found['daemon_with_keys']:.1f} % while keys are pressed)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--only", choices=("busy", "quiet", "flood"), default=None)
    parser.add_argument("--profile", type=Path, default=None, help="py-spy both sides into here")
    args = parser.parse_args()
    for kind in ("busy", "quiet", "flood"):
        if args.only not in (None, kind):
            continue
        profile_dir = args.profile / kind if args.profile else None
        found = run(kind, args.sessions, args.seconds, profile_dir)
        print(report(kind, args.sessions, found), flush=True)


if __name__ == "__main__":
    main()
