"""How fast a progress entry or a commit shows up in `herd status`, with 50 busy sessions.

Runs the real daemon (default timings) in this process on its real socket, 50 sessions whose
agents each print 20 lines a second, then times N progress appends and N commits until the
daemon's status shows them (polled through the control API every 2 ms, so CLI start-up is
not measured). Prints p50/p95/max per kind and the watcher's counters.

    python bench/watch_latency.py [--sessions 50] [--trials 40]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentherd.supervisor.api.client import Client

sys.path.insert(0, str(Path(__file__).parent))
from harness import GIT, Served, make_fleet  # noqa: E402


def wait_for(client: Client, name: str, check: object, timeout_s: float = 10.0) -> float:
    """Poll the session's status until `check(status)` holds; return when it did."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check(client.call("status", target=name)):  # type: ignore[operator]
            return time.monotonic()
        time.sleep(0.002)
    raise TimeoutError(f"{name}: change not seen within {timeout_s}s")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


@dataclass
class Latencies:
    """Milliseconds from each progress append and each commit to the daemon's status."""

    progress_ms: list[float] = field(default_factory=list)
    commit_ms: list[float] = field(default_factory=list)
    watcher: str = ""
    cpu_s: float = 0.0


def measure(root: Path, sessions: int, trials: int, settle_s: float = 2.0) -> Latencies:
    """`sessions` busy sessions under the real daemon in this process; `trials` of each kind."""
    served = Served(make_fleet(root, sessions))
    daemon, client = served.daemon, served.client
    got = Latencies()
    try:
        client.call("up")
        time.sleep(settle_s)  # let every agent start and the fleet get busy
        cpu_start = time.process_time()
        rng = random.Random(7)
        for trial in range(trials):
            name = f"s{rng.randrange(sessions)}"
            repo = root / name
            marker = f"bench entry {trial}"
            began = time.monotonic()
            with open(repo / "progress.txt", "a") as handle:
                handle.write(f"\n## Session {trial + 2}\n- {marker}\n")
            seen = wait_for(
                client,
                name,
                lambda s, m=marker: any(
                    m in entry for entry in (s["progress"] or {}).get("latest", [])
                ),
            )
            got.progress_ms.append((seen - began) * 1000)

            (repo / f"f{trial}.txt").write_text("x\n")
            subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
            subprocess.run([*GIT, "commit", "-q", "-m", f"bench {trial}"], cwd=repo, check=True)
            began = time.monotonic()
            sha = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
            ).stdout.strip()
            seen = wait_for(client, name, lambda s, h=sha: (s["checkpoint"] or {}).get("sha") == h)
            got.commit_ms.append((seen - began) * 1000)
        got.cpu_s = time.process_time() - cpu_start
        watcher = daemon.watcher
        if watcher is not None:
            got.watcher = (
                f"{watcher.batches} batches, {watcher.starts} starts, "
                f"{watcher.failures} failures, {len(watcher.watched_dirs)} dirs watched"
            )
    finally:
        served.stop()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--trials", type=int, default=40)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="herd-bench-"))
    try:
        got = measure(root, args.sessions, args.trials)
        progress_ms, commit_ms = got.progress_ms, got.commit_ms
        print(f"{args.sessions} busy sessions (20 lines/s each), {args.trials} trials per kind")
        for label, values in (("progress entry", progress_ms), ("new commit", commit_ms)):
            print(
                f"  {label:15s} p50 {statistics.median(values):6.1f} ms   "
                f"p95 {percentile(values, 0.95):6.1f} ms   max {max(values):6.1f} ms"
            )
        if got.watcher:
            print(f"  watcher: {got.watcher}")
        print(
            f"  this process (daemon + bench client) used {got.cpu_s:.2f} CPU-s during the trials"
        )
        print(
            f"  p95: progress {percentile(progress_ms, 0.95):.1f} ms (target 50 ms), "
            f"commit {percentile(commit_ms, 0.95):.1f} ms (target 100 ms)"
        )
    finally:
        if os.environ.get("HERD_BENCH_KEEP") is None:
            subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    main()
