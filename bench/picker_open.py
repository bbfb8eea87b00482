"""The run picker (`L`) under a busy fleet: how long from the key to the runs on screen.

    python bench/picker_open.py [--sessions 200] [--opens 10] [--settle 40]

A fleet of light agents that exit after a few seconds and are restarted (so every session
gathers runs and events while the cores stay free) runs under a daemon process; the real
dashboard, headless, opens one session's screen and presses `L` `--opens` times. Each open is
timed from the key to the picker's rows filled (wall ms), with the dashboard's CPU ms and the
daemon's CPU ms over the same span. Run it with a baseline's interpreter too (before/after).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dashboard_load import cpu_seconds, make_fleet, percentile  # noqa: E402
from textual import events  # noqa: E402
from textual.widgets import DataTable  # noqa: E402

from agentherd.sessions.config import load_config  # noqa: E402
from agentherd.supervisor.api.client import Client  # noqa: E402
from agentherd.supervisor.files.paths import socket_path_for  # noqa: E402
from agentherd.tui.dashboard.app import HerdApp  # noqa: E402
from agentherd.tui.dashboard.run_picker import RunPicker  # noqa: E402
from agentherd.tui.dashboard.widgets import SessionTable  # noqa: E402

SHORT_AGENT = (
    "import random, time\n"
    "for i in range(random.randint(2, 6)):\n"
    "    print('step', i, 'of the task', flush=True); time.sleep(1.0)\n"
)
"""A line a second, an exit after 2-6 s, a restart a second later: runs pile up."""


def start_profiler(into: Path | None) -> subprocess.Popen[bytes] | None:
    """`py-spy record` of this process into `into` (raw stacks), or None without a path."""
    if into is None:
        return None
    return subprocess.Popen(
        ["py-spy", "record", "-p", str(os.getpid()), "-r", "200", "-f", "raw"]
        + ["-o", str(into), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def open_pickers(
    socket_path: Path, sessions: int, opens: int, daemon_pid: int, profile_to: Path | None
) -> dict:
    """Open the picker `opens` times on one session's screen; the figures of each open (and
    what each side spends per second with no key pressed, to tell the picker's cost apart)."""
    app = HerdApp(socket_path)
    rows_ms: list[float] = []
    """Key to the runs listed (numbers and sizes)."""
    rows_cpu_ms: list[float] = []
    """The dashboard's CPU time from the key to the runs listed."""
    wall_ms: list[float] = []
    """Key to every start and end filled in (the daemon's answer)."""
    cpu_ms: list[float] = []
    daemon_ms: list[float] = []
    rows: list[int] = []
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.query_one(SessionTable)
        deadline = time.monotonic() + 60
        while table.row_count < sessions and time.monotonic() < deadline:
            await pilot.pause(0.1)
        await pilot.press("enter")
        await pilot.pause(1.0)
        # What the dashboard and the daemon spend meanwhile with no key: the fleet's own cost.
        idle_s, cpu, daemon = 3.0, time.process_time(), cpu_seconds(daemon_pid)
        await asyncio.sleep(idle_s)
        idle = (time.process_time() - cpu) / idle_s, (cpu_seconds(daemon_pid) - daemon) / idle_s
        profiler = start_profiler(profile_to)
        if profiler is not None:
            await asyncio.sleep(1.0)
        calls: dict[str, list[float]] = {}
        call = app.client.call

        async def timed_call(op: str, **args: object) -> object:
            start = time.monotonic()
            try:
                return await call(op, **args)
            finally:
                calls.setdefault(op, []).append((time.monotonic() - start) * 1000)

        app.client.call = timed_call  # each request's wall time, to tell waiting from work
        for _ in range(opens):
            start, cpu, daemon = time.monotonic(), time.process_time(), cpu_seconds(daemon_pid)
            app.post_message(events.Key("L", "L"))
            listed = listed_cpu = None
            while time.monotonic() - start < 30:
                screen = app.screen
                found = screen.query(DataTable) if isinstance(screen, RunPicker) else None
                if listed is None and found and found.first().row_count:
                    listed, listed_cpu = time.monotonic(), time.process_time()
                # A picker of before this change has no `answered`: its rows are the answer.
                if listed is not None and getattr(screen, "answered", True):
                    break
                await asyncio.sleep(0.01)
            rows_ms.append(((listed or time.monotonic()) - start) * 1000)
            rows_cpu_ms.append(((listed_cpu or time.process_time()) - cpu) * 1000)
            wall_ms.append((time.monotonic() - start) * 1000)
            cpu_ms.append((time.process_time() - cpu) * 1000)
            daemon_ms.append((cpu_seconds(daemon_pid) - daemon) * 1000)
            rows.append(app.screen.query_one(DataTable).row_count)
            await pilot.press("escape")
            await pilot.pause(0.5)
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(30)
    return {
        "wall_ms": wall_ms,
        "rows_ms": rows_ms,
        "rows_cpu_ms": rows_cpu_ms,
        "cpu_ms": cpu_ms,
        "daemon_ms": daemon_ms,
        "rows": rows,
        "calls": calls,
        "idle_cpu_ms_per_s": idle[0] * 1000,
        "idle_daemon_ms_per_s": idle[1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--opens", type=int, default=10)
    parser.add_argument("--settle", type=float, default=40.0, help="seconds of history first")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the opens into this")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="herd-bench-picker-"))
    config = load_config(make_fleet(root, args.sessions, SHORT_AGENT))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "agentherd.supervisor.main", str(config.path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = Client(socket_path_for(config.state_dir))
    try:
        while not client.ping():
            time.sleep(0.05)
        client.call("up", socket_timeout_s=None)
        time.sleep(args.settle)
        events_total = len(client.call("events", since=0, limit=100_000))
        socket_path = socket_path_for(config.state_dir)
        found = asyncio.run(
            open_pickers(socket_path, args.sessions, args.opens, daemon.pid, args.profile)
        )
    finally:
        client.call("down", socket_timeout_s=None)
        daemon.wait(60)
        shutil.rmtree(root, ignore_errors=True)
    wall, cpu, dmn = found["wall_ms"], found["cpu_ms"], found["daemon_ms"]
    print(
        f"{args.sessions} sessions, {events_total} events, runs listed {found['rows']}, "
        f"load {os.getloadavg()[0]:.1f}:\n"
        f"  L -> runs listed: wall p50 {statistics.median(found['rows_ms']):.0f} ms, "
        f"max {max(found['rows_ms']):.0f} ms; dashboard CPU to there "
        f"p50 {statistics.median(found['rows_cpu_ms']):.0f} ms\n"
        f"  L -> starts and ends filled: wall p50 {statistics.median(wall):.0f} ms, "
        f"max {max(wall):.0f} ms;\n    "
        f"dashboard CPU p50 {statistics.median(cpu):.0f} ms, p95 {percentile(cpu, 0.95):.0f} ms; "
        f"daemon CPU p50 {statistics.median(dmn):.0f} ms, p95 {percentile(dmn, 0.95):.0f} ms\n"
        f"  with no key: dashboard {found['idle_cpu_ms_per_s']:.0f} ms CPU/s, "
        f"daemon {found['idle_daemon_ms_per_s']:.0f} ms CPU/s"
    )
    for op, times in sorted(found["calls"].items()):
        print(f"  {op}: {len(times)} requests, wall p50 {statistics.median(times):.0f} ms")


if __name__ == "__main__":
    main()
