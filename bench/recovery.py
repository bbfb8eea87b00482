"""How fast herd recovers: re-adopting live agents after the daemon died, relaunching a crash.

    python bench/recovery.py [--agents 5] [--crashes 20]

1. Re-adoption: N agents run under a daemon that is then stopped without touching them (as a
   `kill -9` would leave them); a new daemon starts on the same state folder and the time from
   its start to the last `adopted` event is measured (inside the daemon: no CLI start-up).
2. Crash to relaunch with zero backoff: an agent writes the wall time just before it exits 1;
   the relaunched run writes the time it started; the difference is the full gap (exit
   detection, rescue of the dirty tree, worktree reset, spawn, interpreter start-up excluded by
   measuring at the first line of the new process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agentherd.sessions.times import parse_iso
from agentherd.supervisor.session.context import Timings

sys.path.insert(0, str(Path(__file__).parent))
from harness import Served, make_fleet, make_repo  # noqa: E402


def readoption(root: Path, agents: int) -> float:
    """Seconds from a new daemon's start to the last of `agents` adoptions."""
    sleeper = json.dumps([sys.executable, "-c", "import time; time.sleep(120)"])
    blocks = [
        f'[[session]]\nname = "a{i}"\ncwd = "{make_repo(root / f"a{i}")}"\n'
        f'command = {sleeper}\nstop_grace = "2s"\n'
        for i in range(agents)
    ]
    config = root / "herd.toml"
    config.write_text("\n".join(blocks))
    first = Served(config, Timings())
    first.client.call("up")
    first.stop(down=False)  # the agents keep running, as after a kill -9
    began = time.time()
    second = Served(config, Timings())
    try:
        while True:
            events = second.client.call("events", limit=100_000)
            adopted = [e for e in events if e["kind"] == "adopted"]
            if len(adopted) == agents:
                break
            time.sleep(0.005)
        last = max(adopted, key=lambda e: e["at"])
        return _iso_s(last["at"]) - began
    finally:
        second.stop(down=True)


def _iso_s(text: str) -> float:
    moment = parse_iso(text)
    assert moment is not None, text
    return moment.timestamp()


def crash_gaps(root: Path, crashes: int, running: int) -> tuple[list[float], list[Phases]]:
    """Per crash: seconds from the agent's last moment to the relaunched agent's first, and
    where herd's part of it went (from its events), with `running` busy sessions beside it."""
    marks = root / "marks.jsonl"
    agent = (
        "import json, os, pathlib, sys, time\n"
        f"marks = pathlib.Path({str(marks)!r})\n"
        "with marks.open('a') as f: f.write(json.dumps(['start', time.time()]) + '\\n')\n"
        "pathlib.Path('dirty.txt').write_text(os.environ['HERD_RUN'])\n"
        f"if int(os.environ['HERD_RUN']) > {crashes}: time.sleep(120)\n"
        "time.sleep(0.5)\n"  # one crash at a time, with the fleet's output flowing between
        "with marks.open('a') as f: f.write(json.dumps(['exit', time.time()]) + '\\n')\n"
        "sys.exit(1)\n"
    )
    fleet = make_fleet(root / "fleet", running).read_text() if running else ""
    config = root / "crash.toml"
    config.write_text(
        f'{fleet}\n[[session]]\nname = "crashy"\ncwd = "{make_repo(root / "crashy")}"\n'
        f"command = {json.dumps([sys.executable, '-c', agent])}\n"
        f'restart_delay = 0\nmax_crashes = {crashes + 5}\nstop_grace = "2s"\n'
    )
    served = Served(config, Timings())
    try:
        served.client.call("up")
        while sum(1 for _ in marks.open()) < 2 * crashes + 1 if marks.exists() else True:
            time.sleep(0.01)
        events = served.client.call("events", session="crashy", limit=100_000)
    finally:
        served.stop(down=True)
    rows = [json.loads(line) for line in marks.read_text().splitlines()]
    gaps, phases = [], []
    for a, b in zip(rows, rows[1:], strict=False):
        if a[0] != "exit" or b[0] != "start":
            continue
        gaps.append(b[1] - a[1])
        after = [(_iso_s(e["at"]), e["kind"]) for e in events if _iso_s(e["at"]) >= a[1] - 0.01]
        seen = {kind: at for at, kind in reversed(after)}  # the first of each kind after the exit
        exited, started = seen.get("run-exited"), seen.get("run-started")
        if exited is not None and started is not None:
            phases.append(Phases(exited - a[1], started - exited, b[1] - started))
    return gaps, phases


@dataclass
class Phases:
    """Where one crash's relaunch went, by herd's event times (wall clock, ms precision)."""

    exit_seen_s: float
    """The agent's last moment to `run-exited` (exit noticed, output drained, recorded)."""
    relaunch_s: float
    """`run-exited` to `run-started` (rescue, reset, spawn, the wrapper's exec of the agent)."""
    interpreter_s: float
    """`run-started` to the new agent's first line (its interpreter's start-up)."""


def _p(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--crashes", type=int, default=20)
    parser.add_argument("--running", type=int, default=50, help="busy sessions beside the crash")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="herd-bench-") as folder:
        root = Path(folder)
        adopt_s = readoption(root / "adopt", args.agents) if args.agents else 0.0
        print(
            f"re-adopted {args.agents} live agents: the last adoption was recorded "
            f"{adopt_s * 1000:.0f} ms after the new daemon began (store, socket, reconcile)"
        )
        gaps, phases = crash_gaps(root / "crash", args.crashes, args.running)
        gaps_ms = sorted(g * 1000 for g in gaps)
        print(
            f"crash -> relaunch (restart_delay 0, rescue + reset in a git repo), "
            f"{len(gaps_ms)} crashes among {args.running} busy sessions: "
            f"p50 {statistics.median(gaps_ms):.0f} ms, p95 {_p(gaps_ms, 0.95):.0f} ms, "
            f"max {gaps_ms[-1]:.0f} ms (includes the new interpreter's start-up)"
        )
        for name in ("exit_seen_s", "relaunch_s", "interpreter_s"):
            values = [getattr(p, name) * 1000 for p in phases]
            if values:
                print(
                    f"  {name}: p50 {statistics.median(values):.0f} ms, "
                    f"p95 {_p(values, 0.95):.0f} ms"
                )
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
