"""Profile the herd daemon under one of the suite's loads with py-spy, and print its CPU.

    unshare --pid --fork --mount-proc python bench/profile_daemon.py stream-json 50 10 \
        --seconds 30 --stacks /tmp/stream.txt

Starts `herd up --no-tui` for N stand-in agents (bench/agent.py), waits for them and a
warm-up, then measures the daemon's own CPU seconds over the window while py-spy samples it;
prints the share of a core, the load average and the functions holding the most samples
(own and with callees). Needs py-spy in the venv (`pip install py-spy`).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
import suite  # noqa: E402

TOP = 25


def top_frames(collapsed: Path) -> str:
    """The functions with the most samples, own and inclusive, from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        samples += count
        frames = stack.split(";")
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    rows = [f"{samples} samples", "own %   frame"]
    rows += [f"{n * 100 / samples:5.1f}   {f}" for f, n in own.most_common(TOP)]
    rows += ["incl %  frame"]
    rows += [f"{n * 100 / samples:5.1f}   {f}" for f, n in total.most_common(TOP * 2)]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["quiet", "plain", "stream-json"])
    parser.add_argument("agents", type=int)
    parser.add_argument("lines_per_s", type=float)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--stacks", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--herd", default=str(Path(sys.executable).parent / "herd"))
    parser.add_argument("--no-profile", action="store_true", help="CPU only, no sampler")
    args = parser.parse_args()
    load = suite.Load("profile", args.agents, args.kind, args.lines_per_s)
    root = Path(tempfile.mkdtemp(prefix="herd-profile-"))
    suite.ROOT, suite.REPOS = root, suite.make_repos(root, args.agents)
    herd = suite.Herd("herd", args.herd)
    mark = f"m{time.monotonic_ns()}"
    herd.prepare(root, suite.REPOS, mark, load)
    spy = Path(sys.executable).parent / "py-spy"
    try:
        herd.start()
        suite.wait_agents(mark, args.agents)
        time.sleep(args.warmup)
        proc = psutil.Process(herd.pid())
        collapsed = root / "profile.txt"
        sampler = None
        if not args.no_profile:
            sampler = subprocess.Popen(
                [str(spy), "record", "-p", str(proc.pid), "-r", str(args.rate), "-f", "raw"]
                + ["-d", str(int(args.seconds)), "-o", str(collapsed), "--nonblocking"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        cpu_0, wall_0 = suite.cpu_seconds(proc), time.monotonic()
        time.sleep(args.seconds)
        share = (suite.cpu_seconds(proc) - cpu_0) / (time.monotonic() - wall_0)
        print(
            f"{args.agents} x {args.kind} {args.lines_per_s:g}/s: daemon "
            f"{share * 100:.1f} % of a core over {args.seconds:g} s; "
            f"RSS {proc.memory_info().rss / 2**20:.0f} MB, {proc.num_threads()} threads; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        if sampler is not None:
            sampler.wait(60)
            print(top_frames(collapsed))
            if args.stacks:
                shutil.copy(collapsed, args.stacks)
        herd.stop()
        suite.wait_agents(mark, 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    suite.as_init(main)
