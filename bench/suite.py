"""herd side by side with supervisord: one command for every figure of docs/benchmarks.md.

    unshare --pid --fork --mount-proc python bench/suite.py --short   # a quick look (~3 min)
    unshare --pid --fork --mount-proc python bench/suite.py --full    # for the record

Each system supervises the same stand-in agents (bench/agent.py), alternately, at least two
rounds each. A cycle: cold start (no daemon yet) until every agent runs, a warm-up, the
supervisor's own CPU seconds over a window (its process only: user + system), its memory and
threads, a CLI verb's latency, then stop everything. `--herd NAME=PATH` adds another herd
build (its `herd` executable) to the comparison, e.g. the commit before a change.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

BENCH = Path(__file__).resolve().parent
AGENT = BENCH / "agent.py"
GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
POLL_S = 0.02
"""How often a cold start or a stop is checked for its agents (a /proc scan each time)."""
START_TIMEOUT_S = 60.0
VERB_REPEATS = 5


@dataclass(frozen=True)
class Load:
    """N agents of one kind printing at one rate."""

    name: str
    agents: int
    kind: str
    lines_per_s: float


@dataclass
class Cycle:
    """What one system did under one load in one round."""

    start_s: float = 0.0
    cpu_share: float = 0.0
    rss_mb: float = 0.0
    threads: int = 0
    fds: int = 0
    verb_wall_ms: float = 0.0
    verb_cpu_ms: float = 0.0
    ping_max_ms: float = 0.0
    stop_s: float = 0.0


@dataclass
class Results:
    """Every cycle by load and system, in the order they ran."""

    cycles: dict[tuple[str, str], list[Cycle]] = field(default_factory=dict)

    def add(self, load: str, system: str, cycle: Cycle) -> None:
        self.cycles.setdefault((load, system), []).append(cycle)


def agent_argv(mark: str, load: Load) -> list[str]:
    return [sys.executable, str(AGENT), mark, load.kind, str(load.lines_per_s)]


def count_agents(mark: str) -> int:
    """Live stand-in agents carrying `mark` (never their sh wrappers)."""
    count = 0
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if len(cmd) >= 3 and cmd[1] == str(AGENT) and cmd[2] == mark:
            count += proc.info["status"] != psutil.STATUS_ZOMBIE
    return count


def wait_agents(mark: str, wanted: int, timeout_s: float = START_TIMEOUT_S) -> float:
    """Seconds until exactly `wanted` agents live; raises on timeout."""
    began = time.monotonic()
    while count_agents(mark) != wanted:
        if time.monotonic() - began > timeout_s:
            raise RuntimeError(f"{count_agents(mark)} agents of {mark}, wanted {wanted}")
        time.sleep(POLL_S)
    return time.monotonic() - began


def run_verb(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU milliseconds of one command (the CPU of the child and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


class Herd:
    """One herd build: its `herd` executable, started with `herd up --no-tui`."""

    def __init__(self, name: str, exe: str) -> None:
        self.name, self.exe = name, exe
        self.config: Path | None = None

    def prepare(self, root: Path, repos: list[Path], mark: str, load: Load) -> None:
        folder = root / f"{self.name}-{mark}"
        folder.mkdir()
        agent = 'agent = "claude"\n' if load.kind == "stream-json" else ""
        blocks = [
            f'[[session]]\nname = "s{i}"\ncwd = "{repo}"\n{agent}'
            f"command = {json.dumps(agent_argv(mark, load))}\n"
            f'restart = "never"\nstop_grace = "2s"\n'
            for i, repo in enumerate(repos[: load.agents])
        ]
        self.config = folder / "herd.toml"
        self.config.write_text("\n".join(blocks))

    def _herd(self, *args: str) -> list[str]:
        return [self.exe, "--config", str(self.config), *args]

    def start(self) -> None:
        subprocess.run(self._herd("up", "--no-tui"), check=True, stdout=subprocess.DEVNULL)

    def pid(self) -> int:
        assert self.config is not None
        return int((self.config.parent / ".herd" / "daemon.lock").read_text().split()[0])

    def ping_ms(self) -> float | None:
        """One round trip on the control socket, or None before it is up."""
        from agentherd.supervisor.client import Client
        from agentherd.supervisor.paths import socket_path_for

        assert self.config is not None
        client = Client(socket_path_for(self.config.parent / ".herd"))
        began = time.perf_counter()
        return (time.perf_counter() - began) * 1000 if client.ping() else None

    def verb(self) -> list[str]:
        return self._herd("status", "s0", "--json")

    def stop(self) -> None:
        subprocess.run(self._herd("down"), check=True, stdout=subprocess.DEVNULL)


class Supervisord:
    """supervisord from PyPI, in the foreground, one [program] per agent."""

    name = "supervisord"

    def __init__(self) -> None:
        self.conf: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def prepare(self, root: Path, repos: list[Path], mark: str, load: Load) -> None:
        folder = root / f"sv-{mark}"
        (folder / "logs").mkdir(parents=True)
        parts = [
            f"[supervisord]\nlogfile={folder}/supervisord.log\npidfile={folder}/sd.pid\n"
            f"childlogdir={folder}/logs\nnodaemon=true\n",
            f"[unix_http_server]\nfile={folder}/sd.sock\n",
            "[rpcinterface:supervisor]\n"
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n",
            f"[supervisorctl]\nserverurl=unix://{folder}/sd.sock\n",
        ]
        for i, repo in enumerate(repos[: load.agents]):
            parts.append(
                f"[program:s{i}]\ncommand={' '.join(agent_argv(mark, load))}\n"
                f"directory={repo}\nautostart=true\nautorestart=false\nstartsecs=0\n"
                f"stdout_logfile={folder}/logs/s{i}.log\nredirect_stderr=true\n"
                "stopwaitsecs=2\nstopasgroup=true\nkillasgroup=true\n"
            )
        self.conf = folder / "supervisord.conf"
        self.conf.write_text("\n".join(parts))

    def _bin(self, name: str) -> str:
        return str(Path(sys.executable).parent / name)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self._bin("supervisord"), "-c", str(self.conf)], stdout=subprocess.DEVNULL
        )

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def ping_ms(self) -> float | None:
        return None  # its XML-RPC socket is not the figure; the CLI verb below measures it

    def verb(self) -> list[str]:
        return [self._bin("supervisorctl"), "-c", str(self.conf), "status", "s0"]

    def stop(self) -> None:
        subprocess.run(self.verb()[:3] + ["shutdown"], check=True, stdout=subprocess.DEVNULL)
        assert self.process is not None
        self.process.wait(60)


def make_repos(root: Path, count: int) -> list[Path]:
    """`count` git repos with one commit (copies of one: a fleet is made in a second)."""
    first = root / "repos" / "r0"
    first.mkdir(parents=True)
    (first / "README.md").write_text("x\n")
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=first, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=first, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "initial"], cwd=first, check=True)
    repos = [first]
    for index in range(1, count):
        copy = root / "repos" / f"r{index}"
        shutil.copytree(first, copy, symlinks=True)
        repos.append(copy)
    return repos


def cycle(system: Herd | Supervisord, load: Load, window_s: float, warmup_s: float) -> Cycle:
    """Start cold, measure, stop: one system under one load."""
    mark = f"m{time.monotonic_ns()}"
    system.prepare(ROOT, REPOS, mark, load)
    result = Cycle()
    pings: list[float] = []
    done = threading.Event()

    def ping_all_along() -> None:
        while not done.is_set():
            took = system.ping_ms()
            if took is not None:
                pings.append(took)
            time.sleep(0.01)

    pinger = threading.Thread(target=ping_all_along, daemon=True)
    began = time.monotonic()
    pinger.start()
    system.start()
    wait_agents(mark, load.agents)
    result.start_s = time.monotonic() - began
    done.set()
    pinger.join()
    result.ping_max_ms = max(pings, default=0.0)
    time.sleep(warmup_s)
    proc = psutil.Process(system.pid())
    cpu_0, wall_0 = cpu_seconds(proc), time.monotonic()
    time.sleep(window_s)
    result.cpu_share = (cpu_seconds(proc) - cpu_0) / (time.monotonic() - wall_0)
    result.rss_mb = proc.memory_info().rss / 2**20
    result.threads = proc.num_threads()
    result.fds = proc.num_fds()
    verbs = [run_verb(system.verb()) for _ in range(VERB_REPEATS)]
    result.verb_wall_ms = statistics.median(v[0] for v in verbs)
    result.verb_cpu_ms = statistics.median(v[1] for v in verbs)
    began = time.monotonic()
    system.stop()
    wait_agents(mark, 0)
    result.stop_s = time.monotonic() - began
    return result


def spread(values: list[float], fmt: str) -> str:
    """The median, and the range when it is wider than one value."""
    mid = format(statistics.median(values), fmt)
    if len(values) < 2 or min(values) == max(values):
        return mid
    return f"{mid} ({format(min(values), fmt)}-{format(max(values), fmt)})"


FIGURES = [
    ("CPU, % of a core", "cpu_share", 100.0, ".1f"),
    ("cold start to all running, s", "start_s", 1.0, ".2f"),
    ("control socket, worst answer during start, ms", "ping_max_ms", 1.0, ".0f"),
    ("memory, MB RSS", "rss_mb", 1.0, ".0f"),
    ("threads", "threads", 1.0, ".0f"),
    ("open files", "fds", 1.0, ".0f"),
    ("CLI verb, ms wall", "verb_wall_ms", 1.0, ".0f"),
    ("CLI verb, ms CPU", "verb_cpu_ms", 1.0, ".0f"),
    ("stop everything, s", "stop_s", 1.0, ".2f"),
]


def table(results: Results, loads: list[Load], systems: list[str]) -> str:
    """One markdown table per load: each figure, each system's median (range), herd / peer."""
    out = []
    for load in loads:
        out.append(
            f"\n### {load.agents} agents, {load.kind}"
            + (f", {load.lines_per_s:g} lines/s each" if load.kind != "quiet" else "")
            + "\n"
        )
        out.append("| figure | " + " | ".join(systems) + " | herd / supervisord |")
        out.append("|---|" + "---|" * (len(systems) + 1))
        for label, attr, scale, fmt in FIGURES:
            row, medians = [], {}
            for name in systems:
                values = [getattr(c, attr) * scale for c in results.cycles[(load.name, name)]]
                medians[name] = statistics.median(values)
                row.append(spread(values, fmt))
            peer = medians.get("supervisord")
            ratio = f"{medians['herd'] / peer:.2f}" if peer else "-"
            out.append(f"| {label} | " + " | ".join(row) + f" | {ratio} |")
    return "\n".join(out)


def machine() -> str:
    load1, _, _ = os.getloadavg()
    return (
        f"{platform.node()}: {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GB, Linux {platform.release()}, "
        f"Python {platform.python_version()}, load average {load1:.1f} at the start"
    )


ROOT = Path()
REPOS: list[Path] = []


def main() -> None:
    global ROOT, REPOS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--short", action="store_true", help="small loads, short windows")
    mode.add_argument("--full", action="store_true", help="the issue's loads, 30 s windows")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--herd", action="append", default=[], help="NAME=PATH to a herd")
    parser.add_argument("--only", help="run only the loads whose name contains this")
    parser.add_argument("--out", type=Path, help="write the tables to this markdown file")
    args = parser.parse_args()
    if args.full:
        loads = [
            Load("idle", 200, "quiet", 0),
            Load("plain", 200, "plain", 50),
            Load("stream", 50, "stream-json", 10),
        ]
        window_s, warmup_s = 30.0, 3.0
    else:
        loads = [
            Load("idle", 30, "quiet", 0),
            Load("plain", 30, "plain", 20),
            Load("stream", 15, "stream-json", 10),
        ]
        window_s, warmup_s = 6.0, 1.5
    if args.only:
        loads = [load for load in loads if args.only in load.name]
    herds = [Herd("herd", str(Path(sys.executable).parent / "herd"))]
    herds += [Herd(name, path) for name, path in (h.split("=", 1) for h in args.herd)]
    systems: list[Herd | Supervisord] = [*herds, Supervisord()]
    ROOT = Path(tempfile.mkdtemp(prefix="herd-suite-"))
    REPOS = make_repos(ROOT, max(load.agents for load in loads))
    results = Results()
    header = machine()
    print(header, flush=True)
    try:
        for load in loads:
            for round_index in range(args.rounds):
                order = systems if round_index % 2 == 0 else systems[::-1]
                for system in order:
                    got = cycle(system, load, window_s, warmup_s)
                    results.add(load.name, system.name, got)
                    print(f"{load.name} round {round_index + 1} {system.name}: {got}", flush=True)
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
    text = table(results, loads, [s.name for s in systems])
    print(text)
    if args.out:
        mode_name = "full" if args.full else "short"
        args.out.write_text(
            f"<!-- bench/suite.py --{mode_name}, {args.rounds} rounds; {header} -->\n{text}\n"
        )


def as_init(main: Callable[[], None] = main) -> None:
    """As PID 1 of a fresh PID namespace, reap every orphan (a daemon whose `herd up` exited
    is one) while `main` runs in a child; otherwise just run it."""
    if os.getpid() != 1:
        main()
        return
    suite = os.fork()
    if suite == 0:
        main()
        os._exit(0)
    while True:
        pid, status = os.wait()
        if pid == suite:
            sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    as_init()
