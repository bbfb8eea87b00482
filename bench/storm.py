"""The spawn storm and the stop, alone: `herd up` with no daemon, then `herd down`, per build.

    unshare --pid --fork --mount-proc python bench/storm.py --agents 200 --kind quiet \
        --herd base=/tmp/base/.venv/bin/herd --rounds 2

Per cycle: seconds from `herd up --no-tui` to every agent running, the daemon's CPU seconds
by then (user + system, its process only: its boot included), the worst control-socket answer
during the start (bench/pinger.py, a process of its own, so the GIL of this one, busy counting
agents, is not in the figure), and the same pinger's worst for 3 s once all run (the floor
the machine's load sets); after a pause, `herd status s0 --json` (median of 5,
wall and CPU milliseconds); then the seconds from `herd down` until it returned and no agent is
left, and the daemon's CPU seconds spent on it. Builds alternate round by round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402  (the suite's fleet, agents and counting)

IDLE_PINGS_S = 3.0
"""How long the socket is pinged again once every agent runs, for the machine's own floor."""


@dataclass
class Storm:
    """One build's cold start and stop."""

    start_s: float = 0.0
    start_cpu_s: float = 0.0
    ping_max_ms: float = 0.0
    pings: int = 0
    ping_idle_max_ms: float = 0.0
    up_cli_s: float = 0.0
    verb_wall_ms: float = 0.0
    verb_cpu_ms: float = 0.0
    stop_s: float = 0.0
    stop_cpu_s: float = 0.0


def daemon_cpu_s(pid: int) -> float:
    """User + system seconds of the daemon itself (not its children)."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def start_pinger(herd: suite.Herd) -> subprocess.Popen[str]:
    """bench/pinger.py on this build's socket, until its stdin closes."""
    assert herd.config is not None
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve().parent / "pinger.py"), str(herd.config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def one(
    herd: suite.Herd, root: Path, repos: list[Path], load: suite.Load, settle_s: float
) -> Storm:
    """A cold start, a pause, and `herd down`."""
    mark = f"m{time.monotonic_ns()}"
    herd.prepare(root, repos, mark, load)
    got = Storm()
    pinger = start_pinger(herd)
    began = time.monotonic()
    herd.start()
    got.up_cli_s = time.monotonic() - began
    suite.wait_agents(mark, load.agents)
    got.start_s = time.monotonic() - began
    pid = herd.pid()
    got.start_cpu_s = daemon_cpu_s(pid)
    pings = [float(x) for x in pinger.communicate("", timeout=30)[0].split()]
    got.ping_max_ms = max(pings, default=0.0)
    got.pings = len(pings)
    time.sleep(settle_s)
    pinger = start_pinger(herd)  # the same pings at rest: what this machine's load alone costs
    time.sleep(IDLE_PINGS_S)
    idle = [float(x) for x in pinger.communicate("", timeout=30)[0].split()]
    got.ping_idle_max_ms = max(idle, default=float("nan"))  # none answered: a swamped machine
    verbs = [suite.run_verb(herd.verb()) for _ in range(suite.VERB_REPEATS)]
    got.verb_wall_ms = statistics.median(v[0] for v in verbs)
    got.verb_cpu_ms = statistics.median(v[1] for v in verbs)
    cpu_before = daemon_cpu_s(pid)
    last_cpu = [cpu_before]

    def follow_cpu() -> None:  # the daemon exits at the end of `down`: keep its last figure
        while True:
            try:
                last_cpu[0] = daemon_cpu_s(pid)
            except psutil.Error:
                return
            time.sleep(0.01)

    follower = threading.Thread(target=follow_cpu, daemon=True)
    follower.start()
    began = time.monotonic()
    herd.stop()
    suite.wait_agents(mark, 0)
    got.stop_s = time.monotonic() - began
    follower.join(5)
    got.stop_cpu_s = last_cpu[0] - cpu_before
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--kind", default="quiet", choices=["quiet", "plain", "stream-json"])
    parser.add_argument("--rate", type=float, default=20.0, help="lines/s of a busy agent")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between up and down")
    parser.add_argument("--herd", action="append", default=[], help="NAME=PATH to a herd")
    parser.add_argument("--keep", action="store_true", help="keep the fleet's folder (daemon logs)")
    args = parser.parse_args()
    load = suite.Load("storm", args.agents, args.kind, 0 if args.kind == "quiet" else args.rate)
    herds = [suite.Herd("herd", str(Path(sys.executable).parent / "herd"))]
    herds += [suite.Herd(n, p) for n, p in (h.split("=", 1) for h in args.herd)]
    root = Path(tempfile.mkdtemp(prefix="herd-storm-"))
    repos = suite.make_repos(root, args.agents)
    print(suite.machine(), flush=True)
    results: dict[str, list[Storm]] = {h.name: [] for h in herds}
    for round_index in range(args.rounds):
        for herd in herds if round_index % 2 == 0 else herds[::-1]:
            got = one(herd, root, repos, load, args.settle)
            results[herd.name].append(got)
            print(f"round {round_index + 1} {herd.name}: {got} load {os.getloadavg()[0]:.1f}")
    print(f"\n{args.agents} agents, {load.kind}; median (range) of {args.rounds} round(s)")
    print("| figure | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for item in fields(Storm):
        row = [
            suite.spread([getattr(c, item.name) for c in cycles], ".2f")
            for cycles in results.values()
        ]
        print(f"| {item.name} | " + " | ".join(row) + " |")
    if args.keep:
        print(f"kept {root}")
    else:
        subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    if os.getpid() == 1:  # PID 1 of a namespace: reap the daemons `herd up` leaves behind
        child = os.fork()
        if child == 0:
            main()
            os._exit(0)
        while True:
            pid, status = os.wait()
            if pid == child:
                sys.exit(os.waitstatus_to_exitcode(status))
    main()
