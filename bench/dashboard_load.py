"""The dashboard under a big fleet: key latency, event-loop lag, and its CPU when nothing changes.

    python bench/dashboard_load.py [--sessions 200] [--seconds 15]

The daemon runs in its own process (`python -m agentherd.supervisor.main`), so this process's
CPU time is the dashboard's: the real app, headless, subscribed to the real daemon. Two fleets:

- busy: light agents that print a line a second and exit after 20-60 s (restart = "always"),
  so rows change state and output all the time while the agents leave the cores free;
- quiet: agents that print one line and sleep; nothing changes but the clock.

The targets (issue 13): a key reaches the screen within 50 ms at p95, the loop lags at most
50 ms at p95, and a quiet dashboard uses under 2 % of a core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import make_repo  # noqa: E402

from agentherd.sessions.config import load_config  # noqa: E402
from agentherd.supervisor.client import Client  # noqa: E402
from agentherd.supervisor.paths import socket_path_for  # noqa: E402
from agentherd.tui.app import HerdApp  # noqa: E402
from agentherd.tui.widgets import SessionTable  # noqa: E402

BUSY_AGENT = (
    "import random, time\n"
    "for i in range(random.randint(20, 60)):\n"
    "    print('step', i, 'of the task', flush=True); time.sleep(1.0)\n"
)
"""A line a second, then after 20-60 s an exit that herd restarts: a few state changes a
second across 200 sessions, output everywhere, and the cores left to the dashboard."""

QUIET_AGENT = "import time; print('waiting', flush=True); time.sleep(3600)\n"
"""One line, then nothing: only the uptimes move."""

LAG_PROBE_S = 0.02
"""The loop-lag probe sleeps this long and measures how late it wakes."""


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


def p95(values: list[float]) -> float:
    """The 95th percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


async def measure(socket_path: Path, sessions: int, seconds: float) -> dict[str, float]:
    """Run the dashboard headless; press j/k throughout; probe the loop; count CPU."""
    app = HerdApp(socket_path)
    key_ms: list[float] = []
    key_cpu_ms: list[float] = []
    lag_ms: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.query_one(SessionTable)
        deadline = time.monotonic() + 60
        while table.row_count < sessions and time.monotonic() < deadline:
            await pilot.pause(0.1)
        stop = time.monotonic() + seconds

        async def probe() -> None:
            while time.monotonic() < stop:
                start = time.monotonic()
                await asyncio.sleep(LAG_PROBE_S)
                lag_ms.append((time.monotonic() - start - LAG_PROBE_S) * 1000)

        prober = asyncio.create_task(probe())
        cpu_start, wall_start = time.process_time(), time.monotonic()
        step = 0
        while time.monotonic() < stop:
            row = table.cursor_row
            key = "j" if step % 20 < 10 else "k"
            start, cpu = time.monotonic(), time.process_time()
            await pilot.press(key)
            while table.cursor_row == row and time.monotonic() - start < 2:
                await asyncio.sleep(0.001)
            key_ms.append((time.monotonic() - start) * 1000)
            key_cpu_ms.append((time.process_time() - cpu) * 1000)
            step += 1
            await asyncio.sleep(0.2)
        await prober
        busy_cpu = (time.process_time() - cpu_start) / (time.monotonic() - wall_start)
        # Idle: no keys, only the feed and the clock.
        cpu_start, wall_start = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        idle_cpu = (time.process_time() - cpu_start) / (time.monotonic() - wall_start)
    return {
        "key_p95_ms": p95(key_ms),
        "key_median_ms": statistics.median(key_ms) if key_ms else 0.0,
        "key_cpu_median_ms": statistics.median(key_cpu_ms) if key_cpu_ms else 0.0,
        "lag_p95_ms": p95(lag_ms),
        "cpu_with_keys": busy_cpu * 100,
        "cpu_no_keys": idle_cpu * 100,
    }


def run(kind: str, sessions: int, seconds: float) -> dict[str, float]:
    """One fleet of `kind` under a daemon process; the dashboard measured against it."""
    root = Path(tempfile.mkdtemp(prefix=f"herd-bench-{kind}-"))
    agent = BUSY_AGENT if kind == "busy" else QUIET_AGENT
    config = load_config(make_fleet(root, sessions, agent))
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
        time.sleep(5.0)  # every agent started
        return asyncio.run(measure(socket_path_for(config.state_dir), sessions, seconds))
    finally:
        client.call("down", socket_timeout_s=None)
        daemon.wait(60)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--only", choices=("busy", "quiet"), default=None)
    args = parser.parse_args()
    for kind in ("busy", "quiet"):
        if args.only not in (None, kind):
            continue
        found = run(kind, args.sessions, args.seconds)
        print(
            f"{kind:5} fleet of {args.sessions}: key p95 {found['key_p95_ms']:.0f} ms "
            f"(median {found['key_median_ms']:.0f}, CPU {found['key_cpu_median_ms']:.0f} ms), "
            f"loop lag p95 {found['lag_p95_ms']:.0f} ms, "
            f"dashboard CPU {found['cpu_with_keys']:.1f} % of a core while keys are pressed, "
            f"{found['cpu_no_keys']:.1f} % without"
        )


if __name__ == "__main__":
    main()
