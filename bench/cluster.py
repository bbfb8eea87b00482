"""The cluster's costs on one machine: engine overhead per run, a host's idle CPU.

Run in a PID namespace, with the cluster extra and Debian's PostgreSQL installed:
    unshare --pid --fork --mount-proc .venv/bin/python bench/cluster.py [RUNS]
It starts a private PostgreSQL (tests/pgcluster.py) and stops it after.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pgcluster  # noqa: E402
from clusterhosts import HostProc, cluster_toml  # noqa: E402
from conftest import Herd, script  # noqa: E402

from agentherd.sessions.config import load_config  # noqa: E402
from agentherd.supervisor.api.fleetapi import Fleet, LocalFleet  # noqa: E402
from agentherd.supervisor.cluster.fleet import ClusterFleet  # noqa: E402

IDLE_WINDOW_S = 30.0
SESSION = (
    f'[[session]]\nname = "quick"\ncommand = {script("print(1)")}\n'
    'restart = "never"\nautostart = false\n'
)


def start_to_end_s(fleet: Fleet, runs: int) -> list[float]:
    """Seconds from `start` to `wait` returning, for a session that prints and exits."""
    took = []
    for _ in range(runs):
        began = time.monotonic()
        reply = fleet.wait(fleet.start("quick").handle, timeout_s=60)
        assert reply.state == "completed", reply
        took.append(time.monotonic() - began)
    return took


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    """Each process's CPU seconds so far; a process already gone (a short git child) is left out."""
    found = {}
    for pid in pids:
        try:
            found[pid] = sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.NoSuchProcess:
            continue
    return found


def cpu_since(before: dict[int, float], pids: list[int]) -> float:
    """CPU seconds spent since `before` by the processes alive at both looks."""
    after = cpu_by_pid(pids)
    return sum(after[pid] - before[pid] for pid in before.keys() & after.keys())


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    root = Path(tempfile.mkdtemp(prefix="herd-bench-cluster-"))
    root.chmod(0o755)  # the PostgreSQL server runs as the postgres user under root
    (root / "local").mkdir()
    herd = Herd(root / "local").write(SESSION)
    local = start_to_end_s(LocalFleet(herd.start()), runs)
    herd.down()
    url = pgcluster.fresh_database(pgcluster.start(root / "pg"))
    try:
        host = HostProc(root, "h1", cluster_toml(SESSION), url).start()
        fleet = ClusterFleet(load_config(host.root / "herd.toml"), url)
        cluster = start_to_end_s(fleet, runs)
        fleet.close()
        assert host.process is not None
        daemon = [c.pid for c in psutil.Process(host.process.pid).children(recursive=True)]
        server = [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]
        before = cpu_by_pid(daemon), cpu_by_pid(server)
        time.sleep(IDLE_WINDOW_S)
        per_min = 60 / IDLE_WINDOW_S
        idle = cpu_since(before[0], daemon) * per_min, cpu_since(before[1], server) * per_min
        host.down()
    finally:
        pgcluster.stop(root / "pg")
        shutil.rmtree(root, ignore_errors=True)
    median = statistics.median
    print(f"one machine: start to end, median {median(local) * 1000:.0f} ms ({runs} runs)")
    print(f"cluster:     start to end, median {median(cluster) * 1000:.0f} ms ({runs} runs)")
    print(f"engine overhead per run: {(median(cluster) - median(local)) * 1000:.0f} ms")
    print(f"idle host: {idle[0]:.2f} CPU s/min (daemon and engine), PostgreSQL {idle[1]:.2f}")


if __name__ == "__main__":
    main()
