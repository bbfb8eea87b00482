"""Where a cold start's time goes, per herd build, side by side: its phases from the daemon's log
and its events.

    unshare --pid --fork --mount-proc .venv/bin/python bench/cold_phases.py 30 10 \
        now=.venv/bin/herd before=/tmp/before/bin/herd

N quiet stand-in agents (bench/agent.py) started by `herd up --no-tui` with no daemon running,
the builds alternating, R rounds each. Prints per build the median offset (seconds from
`herd up`) of: the daemon's ready line, the first and last `task-started` and `run-started`
events, `herd up`'s return, and every agent running (a /proc scan, as bench/suite.py counts
them). A profiling aid beside the suite's one cold-start figure: it tells the daemon's boot
(imports, herd.toml) from the launches.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from suite import Herd, Load, make_repos, wait_agents

EVENT_KINDS = ("task-started", "run-started")
SETTLE_S = 1.0
"""Left running after every agent runs, so the events of the last launches are written."""


def phases(build: Herd, root: Path, repos: list[Path], load: Load) -> dict[str, float]:
    """One cold start of `build`: each phase's offset in seconds from `herd up`."""
    mark = f"m{time.monotonic_ns()}"
    build.prepare(root, repos, mark, load)
    assert build.config is not None
    began = time.time()
    build.start()
    found = {"up returned": time.time() - began}
    wait_agents(mark, load.agents)
    found["all running"] = time.time() - began
    time.sleep(SETTLE_S)
    state = build.config.parent / ".herd"
    ready = next(
        line for line in (state / "daemon.log").read_text().splitlines() if "daemon ready" in line
    )
    stamp = datetime.strptime(ready[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    found["daemon ready"] = stamp - began
    with sqlite3.connect(state / "state.db") as db:
        for kind in EVENT_KINDS:
            ats = [
                datetime.fromisoformat(at).timestamp()
                for (at,) in db.execute("SELECT at FROM events WHERE kind = ?", (kind,))
            ]
            found[f"first {kind}"] = min(ats) - began
            found[f"last {kind}"] = max(ats) - began
    build.stop()
    wait_agents(mark, 0)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agents", type=int)
    parser.add_argument("rounds", type=int)
    parser.add_argument("builds", nargs="+", help="NAME=PATH to a `herd`")
    args = parser.parse_args()
    builds = [Herd(*spec.split("=", 1)) for spec in args.builds]
    root = Path(tempfile.mkdtemp(prefix="cold-phases-"))
    repos = make_repos(root, args.agents)
    load = Load("quiet", args.agents, "quiet", 0)
    seen: dict[str, dict[str, list[float]]] = {b.name: defaultdict(list) for b in builds}
    for index in range(args.rounds):
        for build in builds if index % 2 == 0 else builds[::-1]:
            for phase, offset in phases(build, root, repos, load).items():
                seen[build.name][phase].append(offset)
    names = [b.name for b in builds]
    order = sorted(seen[names[0]], key=lambda p: statistics.median(seen[names[0]][p]))
    print(f"{'phase (s from herd up, median)':32}" + "".join(f"{n:>12}" for n in names))
    for phase in order:
        row = "".join(f"{statistics.median(seen[n][phase]):12.3f}" for n in names)
        print(f"{phase:32}{row}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
