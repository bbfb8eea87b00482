"""The daemon's own CPU with 50 chatty agents, without and with a dashboard subscribed.

    python bench/daemon_cpu.py [--sessions 50] [--seconds 10]

The daemon runs in this process (default timings) on its real socket; the agents are separate
processes printing 20 lines a second each, so this process's CPU time is the daemon's (plus,
in the second measurement, the subscriber's decoding of each message). The subscriber asks for
changes, as the dashboard does: a full snapshot, then the sessions that changed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from agentherd.supervisor.api.client import Client

sys.path.insert(0, str(Path(__file__).parent))
from harness import Served, make_fleet  # noqa: E402

LINES_PER_AGENT_S = 20
"""What the busy agent of watch_latency prints."""


def cpu_share(seconds: float) -> float:
    """This process's CPU time over `seconds` of wall time, as a fraction of one core."""
    cpu_start, wall_start = time.process_time(), time.monotonic()
    time.sleep(seconds)
    return (time.process_time() - cpu_start) / (time.monotonic() - wall_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="herd-bench-"))
    served = Served(make_fleet(root, args.sessions))
    daemon, client = served.daemon, served.client
    try:
        client.call("up")
        time.sleep(3.0)  # every agent started and busy
        lines_s = args.sessions * LINES_PER_AGENT_S
        alone = cpu_share(args.seconds)
        snapshots = [0]

        def subscribe() -> None:
            for _ in Client(daemon.socket_path).stream("subscribe", changes=True):
                snapshots[0] += 1

        threading.Thread(target=subscribe, daemon=True).start()
        watched = cpu_share(args.seconds)
        print(f"{args.sessions} agents, {lines_s} lines/s in all")
        print(
            f"  daemon alone:          {alone * 100:5.1f} % of a core "
            f"({alone * 1e6 / lines_s:.0f} µs per line)"
        )
        print(
            f"  with a subscriber:     {watched * 100:5.1f} % of a core "
            f"({snapshots[0] / args.seconds:.1f} messages/s, decoding included)"
        )
    finally:
        served.stop()


if __name__ == "__main__":
    main()
