"""Scale: a fleet of 200, 1,000 and 2,000 quiet sessions (a share of them busy if asked), per
herd build side by side, with each figure's growth factor from the smallest fleet.

    unshare --pid --fork --mount-proc python bench/scale.py --sessions 200,1000,2000 \
        --herd before=/tmp/before/.venv/bin/herd [--busy 0.1]

Per fleet and build: `herd up --no-tui` with no daemon until every session runs (the cold
start, and the daemon's CPU seconds by then); a rest until its CPU stops falling
(`settle_s`: the first git reads of a large fleet come after its start); the daemon's idle CPU
(user + system) and its children's over a window, its RSS, threads and open files (and open
files per session);
`herd ls`, `herd ls --json`, `herd status s1` and `herd status s1 --json`, CPU and wall
milliseconds of the command (median of 5); then `herd down` until it returned. A quiet session
is `sleep` (a quiet agent costs the daemon what `sleep` does: nothing reaches its log); a busy
one is bench/agent.py printing a plain line a second. The growth factor of each figure is its
value over the smallest fleet's, beside the sessions' own factor: at most linear is at most
that factor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402  (repos, verbs, the PID-1 reaper)

SETTLE_S = 10.0
"""Rest after the cold start before the idle window: each session's first git read is done."""
SETTLE_STEP_S = 5.0
SETTLE_MAX_S = 120.0
"""After SETTLE_S, the daemon's CPU is watched in SETTLE_STEP_S windows until it stops falling
(a window at least 80 % of the one before): a slow cold start's deferred work (the first git
reads of a large fleet go in the gaps) is not idle. At most SETTLE_MAX_S in all."""
POLL_S = 0.5
VERBS = {
    "ls_cpu_ms": ("ls",),
    "ls_json_cpu_ms": ("ls", "--json"),
    "status_cpu_ms": ("status", "s1"),
    "status_json_cpu_ms": ("status", "s1", "--json"),
}


@dataclass
class Scale:
    """One build at one fleet size."""

    start_s: float = 0.0
    start_cpu_s: float = 0.0
    settle_s: float = 0.0
    idle_cpu_pct: float = 0.0
    idle_children_cpu_pct: float = 0.0
    rss_mb: float = 0.0
    threads: float = 0.0
    fds: float = 0.0
    fds_per_session: float = 0.0
    ls_cpu_ms: float = 0.0
    ls_wall_ms: float = 0.0
    ls_json_cpu_ms: float = 0.0
    ls_json_wall_ms: float = 0.0
    status_cpu_ms: float = 0.0
    status_wall_ms: float = 0.0
    status_json_cpu_ms: float = 0.0
    status_json_wall_ms: float = 0.0
    down_s: float = 0.0


def write_fleet(folder: Path, repos: list[Path], sessions: int, busy: float) -> Path:
    """herd.toml of `sessions` sessions, the first `busy` share of them printing."""
    folder.mkdir(parents=True)
    busy_count = round(sessions * busy)
    blocks = []
    for index, repo in enumerate(repos[:sessions]):
        argv = (
            [sys.executable, str(suite.AGENT), "scale", "plain", "1"]
            if index < busy_count
            else ["sleep", "1000000"]
        )
        blocks.append(
            f'[[session]]\nname = "s{index}"\ncwd = "{repo}"\ncommand = {json.dumps(argv)}\n'
            'restart = "never"\nstop_grace = "2s"\n'
        )
    config = folder / "herd.toml"
    config.write_text("\n".join(blocks))
    return config


def running(exe: str, config: Path) -> int:
    done = subprocess.run(
        [exe, "--config", str(config), "ls", "--json"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return 0
    return sum(1 for s in json.loads(done.stdout) if s["state"] == "running")


def tree_cpu_s(proc: psutil.Process) -> float:
    """CPU seconds of the daemon's descendants alive now (the agents and their wrappers)."""
    total = 0.0
    for child in proc.children(recursive=True):
        try:
            total += suite.cpu_seconds(child)
        except psutil.Error:
            continue
    return total


def settle(proc: psutil.Process) -> float:
    """Wait until the daemon's start-up work is over (see SETTLE_STEP_S); the seconds waited."""
    began = time.monotonic()
    time.sleep(SETTLE_S)
    before = None
    while time.monotonic() - began < SETTLE_MAX_S:
        cpu = suite.cpu_seconds(proc)
        time.sleep(SETTLE_STEP_S)
        rate = suite.cpu_seconds(proc) - cpu
        if before is not None and rate >= 0.8 * before:
            break
        before = rate
    return time.monotonic() - began


def one(exe: str, config: Path, sessions: int, window_s: float) -> Scale:
    got = Scale()
    herd = [exe, "--config", str(config)]
    began = time.monotonic()
    subprocess.run([*herd, "up", "--no-tui"], check=True, stdout=subprocess.DEVNULL)
    while running(exe, config) < sessions:
        if time.monotonic() - began > 60 + sessions * 0.2:
            raise RuntimeError(f"{running(exe, config)} of {sessions} running")
        time.sleep(POLL_S)
    got.start_s = time.monotonic() - began
    pid = int((config.parent / ".herd" / "daemon.lock").read_text().split()[0])
    proc = psutil.Process(pid)
    got.start_cpu_s = suite.cpu_seconds(proc)
    got.settle_s = settle(proc)
    cpu_0, kids_0, wall_0 = suite.cpu_seconds(proc), tree_cpu_s(proc), time.monotonic()
    time.sleep(window_s)
    wall = time.monotonic() - wall_0
    got.idle_cpu_pct = (suite.cpu_seconds(proc) - cpu_0) / wall * 100
    got.idle_children_cpu_pct = (tree_cpu_s(proc) - kids_0) / wall * 100
    got.rss_mb = proc.memory_info().rss / 2**20
    got.threads = proc.num_threads()
    got.fds = proc.num_fds()
    got.fds_per_session = got.fds / sessions
    for name, argv in VERBS.items():
        runs = [suite.run_verb([*herd, *argv]) for _ in range(suite.VERB_REPEATS)]
        setattr(got, name, statistics.median(r[1] for r in runs))
        setattr(got, name.replace("_cpu_", "_wall_"), statistics.median(r[0] for r in runs))
    began = time.monotonic()
    subprocess.run([*herd, "down"], check=True, stdout=subprocess.DEVNULL)
    got.down_s = time.monotonic() - began
    return got


def growth(values: list[float]) -> str:
    first = values[0]
    return " -> ".join(f"x{v / first:.1f}" if first else "-" for v in values[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="200,1000,2000")
    parser.add_argument("--busy", type=float, default=0.0, help="share of busy sessions")
    parser.add_argument("--window", type=float, default=20.0, help="idle window, seconds")
    parser.add_argument("--herd", action="append", default=[], help="NAME=PATH to a herd")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sessions.split(",")]
    builds = {"herd": str(Path(sys.executable).parent / "herd")}
    builds.update(h.split("=", 1) for h in args.herd)
    print(suite.machine(), flush=True)
    root = Path(tempfile.mkdtemp(prefix="herd-scale-"))
    repos = suite.make_repos(root, max(sizes))
    results: dict[str, list[Scale]] = {name: [] for name in builds}
    try:
        for size in sizes:
            order = list(builds.items())
            for name, exe in order if size % 2 == 0 else order[::-1]:
                config = write_fleet(root / f"{name}-{size}", repos, size, args.busy)
                got = one(exe, config, size, args.window)
                results[name].append(got)
                print(f"{size} {name}: {got} load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)
    factors = " -> ".join(f"x{s / sizes[0]:.0f}" for s in sizes[1:])
    busy = f", {args.busy:.0%} busy" if args.busy else ""
    print(f"\n{' / '.join(map(str, sizes))} sessions{busy}; growth {factors} in sessions")
    names = list(results)
    print("| figure | " + " | ".join(f"{n} at {s}" for n in names for s in sizes) + " | growth |")
    print("|---|" + "---|" * (len(names) * len(sizes) + 1))
    for item in fields(Scale):
        cells = [f"{getattr(r, item.name):.2f}" for n in names for r in results[n]]
        grown = "; ".join(
            f"{n} {growth([getattr(r, item.name) for r in results[n]])}" for n in names
        )
        print(f"| {item.name} | " + " | ".join(cells) + f" | {grown} |")


if __name__ == "__main__":
    suite.as_init(main)
