"""Soak the herd daemon: its memory, threads, open files and git processes over time.

    unshare --pid --fork --mount-proc python bench/soak.py --agents 200 --minutes 20

Starts `herd up --no-tui` for N stand-in agents (bench/agent.py, plain lines at a slow rate by
default, so logs grow and the watcher and tailers work), then samples the daemon every
`--every` seconds: RSS, threads, open files, and git processes under it. Prints each sample
and the growth from the first sample after the warm-up to the last (the target: < 5 %).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--kind", choices=["quiet", "plain", "stream-json"], default="plain")
    parser.add_argument("--rate", type=float, default=1.0, help="lines per second per agent")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--herd", default=str(Path(sys.executable).parent / "herd"))
    args = parser.parse_args()
    load = suite.Load("soak", args.agents, args.kind, args.rate)
    root = Path(tempfile.mkdtemp(prefix="herd-soak-"))
    suite.ROOT, suite.REPOS = root, suite.make_repos(root, args.agents)
    herd = suite.Herd("herd", args.herd)
    mark = f"m{time.monotonic_ns()}"
    herd.prepare(root, suite.REPOS, mark, load)
    try:
        herd.start()
        suite.wait_agents(mark, args.agents)
        time.sleep(args.warmup)
        proc = psutil.Process(herd.pid())
        samples: list[tuple[float, float, int, int, int]] = []
        began = time.monotonic()
        cpu_0 = suite.cpu_seconds(proc)
        print("   s   RSS MB  threads  files  git", flush=True)
        while True:
            at = time.monotonic() - began
            rss = proc.memory_info().rss / 2**20
            sample = (at, rss, proc.num_threads(), proc.num_fds(), git_processes(proc))
            samples.append(sample)
            row = f"{at:5.0f}  {rss:7.1f}  {sample[2]:7d}  {sample[3]:5d}  {sample[4]:3d}"
            print(row, flush=True)
            if at >= args.minutes * 60:
                break
            time.sleep(args.every)
        cpu = (suite.cpu_seconds(proc) - cpu_0) / (time.monotonic() - began)
        first, last = samples[0], samples[-1]
        print(
            f"{args.agents} x {args.kind} {args.rate:g}/s over {last[0] / 60:.1f} min "
            f"(load average {os.getloadavg()[0]:.1f}): RSS {first[1]:.1f} -> {last[1]:.1f} MB "
            f"({growth(first[1], last[1])}, max {max(s[1] for s in samples):.1f}); threads "
            f"{first[2]} -> {last[2]} (max {max(s[2] for s in samples)}); open files "
            f"{first[3]} -> {last[3]} ({growth(first[3], last[3])}); git processes "
            f"max {max(s[4] for s in samples)}; CPU {cpu * 100:.2f} % of a core"
        )
        herd.stop()
        suite.wait_agents(mark, 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    suite.as_init(main)
