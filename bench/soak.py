"""Soak the herd daemon: its memory, threads, open files and git processes over time.

    unshare --pid --fork --mount-proc python bench/soak.py --agents 200 --minutes 20

Starts `herd up --no-tui` for N stand-in agents (bench/agent.py, plain lines at a slow rate by
default, so logs grow and the watcher and tailers work), then samples the daemon every
`--every` seconds: RSS, threads, open files, and git processes under it. Prints each sample
and the growth from the first sample after the warm-up to the last (the target: < 5 %).
With `--trace DIR` the daemon also writes tracemalloc snapshots there (supervisor/memtrace.py):
`python bench/memdiff.py DIR/snap-1.pickle DIR/snap-9.pickle` shows what grew.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
import suite  # noqa: E402


def git_processes(daemon: psutil.Process) -> int:
    """git processes the daemon started that are alive now."""
    try:
        children = daemon.children(recursive=True)
    except psutil.Error:
        return 0
    count = 0
    for child in children:
        try:
            count += child.name() == "git"
        except psutil.Error:
            continue
    return count


def growth(first: float, last: float) -> str:
    return f"{(last - first) / first * 100:+.1f} %" if first else "-"


@dataclass
class Soak:
    """The daemon's samples over a soak: (seconds, RSS MB, threads, open files, git processes)."""

    samples: list[tuple[float, float, int, int, int]] = field(default_factory=list)
    cpu_share: float = 0.0
    load_average: float = 0.0

    def summary(self, load: suite.Load) -> str:
        """One line: each figure's first -> last, and the growth."""
        samples = self.samples
        first, last = samples[0], samples[-1]
        return (
            f"{load.agents} x {load.kind} {load.lines_per_s:g}/s over {last[0] / 60:.1f} min "
            f"(load average {self.load_average:.1f}): RSS {first[1]:.1f} -> {last[1]:.1f} MB "
            f"({growth(first[1], last[1])}, max {max(s[1] for s in samples):.1f}); threads "
            f"{first[2]} -> {last[2]} (max {max(s[2] for s in samples)}); open files "
            f"{first[3]} -> {last[3]} ({growth(first[3], last[3])}); git processes "
            f"max {max(s[4] for s in samples)}; CPU {self.cpu_share * 100:.2f} % of a core"
        )


def soak(
    herd_exe: str,
    load: suite.Load,
    minutes: float,
    every_s: float,
    warmup_s: float,
    show: Callable[[str], None] = print,
) -> Soak:
    """`herd up --no-tui` for `load`, then the daemon sampled every `every_s` for `minutes`."""
    root = Path(tempfile.mkdtemp(prefix="herd-soak-"))
    repos = suite.make_repos(root, load.agents)
    herd = suite.Herd("herd", herd_exe)
    mark = f"m{time.monotonic_ns()}"
    herd.prepare(root, repos, mark, load)
    got = Soak()
    try:
        herd.start()
        suite.wait_agents(mark, load.agents)
        time.sleep(warmup_s)
        proc = psutil.Process(herd.pid())
        began = time.monotonic()
        cpu_0 = suite.cpu_seconds(proc)
        show("   s   RSS MB  threads  files  git")
        while True:
            at = time.monotonic() - began
            rss = proc.memory_info().rss / 2**20
            sample = (at, rss, proc.num_threads(), proc.num_fds(), git_processes(proc))
            got.samples.append(sample)
            show(f"{at:5.0f}  {rss:7.1f}  {sample[2]:7d}  {sample[3]:5d}  {sample[4]:3d}")
            if at >= minutes * 60:
                break
            time.sleep(min(every_s, max(0.0, minutes * 60 - at)))
        got.cpu_share = (suite.cpu_seconds(proc) - cpu_0) / (time.monotonic() - began)
        got.load_average = os.getloadavg()[0]
        herd.stop()
        suite.wait_agents(mark, 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--kind", choices=["quiet", "plain", "stream-json"], default="plain")
    parser.add_argument("--rate", type=float, default=1.0, help="lines per second per agent")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--herd", default=str(Path(sys.executable).parent / "herd"))
    parser.add_argument(
        "--trace",
        metavar="DIR",
        help="the daemon writes tracemalloc snapshots to DIR every --every s (bench/memdiff.py)",
    )
    args = parser.parse_args()
    if args.trace:
        os.environ["HERD_TRACEMALLOC"] = args.trace
        os.environ["HERD_TRACEMALLOC_EVERY_S"] = str(args.every)
    load = suite.Load("soak", args.agents, args.kind, args.rate)
    got = soak(
        args.herd, load, args.minutes, args.every, args.warmup, lambda line: print(line, flush=True)
    )
    print(got.summary(load))


if __name__ == "__main__":
    suite.as_init(main)
