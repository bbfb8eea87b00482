"""Every figure of issue 14's Targets, herd beside supervisord, in one command; writes the record.

    unshare --pid --fork --mount-proc .venv/bin/python bench/suite.py --short   # a quick look
    unshare --pid --fork --mount-proc .venv/bin/python bench/suite.py --full    # for the record

Side by side (herd and supervisord supervise the same stand-in agents, bench/agent.py,
alternately, at least two rounds each): a cold start (no daemon yet) until every agent runs,
with herd's control socket pinged throughout by bench/pinger.py; a warm-up; the supervisor's
own CPU seconds over a window (its process only: user + system); its memory, threads and open
files; a CLI verb; then stop everything. Then herd alone where a figure has no peer:
progress/commit -> status (bench/watch_latency.py), crash -> relaunch (bench/recovery.py), the
dashboard (bench/dashboard_load.py) and the soak (bench/soak.py). It writes docs/benchmarks.md
(bench/benchdoc.py: machine, peer, figures, targets met or not, the explanations of
docs/benchmarks-notes.md) and the latency chart beside it. `--herd NAME=PATH` adds another
herd build to the side-by-side figures, e.g. the commit before a change.
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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

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
    wakeups_per_min: float = 0.0
    """The supervisor's main thread (herd's event loop) woken per minute over the window: its
    voluntary context switches, from /proc/PID/status (other threads not counted)."""
    pings_ms: list[float] = field(default_factory=list, repr=False)
    """Every answer of herd's control socket during the cold start (none for a peer)."""


@dataclass
class Results:
    """Every cycle by load and system, in the order they ran."""

    cycles: dict[tuple[str, str], list[Cycle]] = field(default_factory=dict)

    def add(self, load: str, system: str, cycle: Cycle) -> None:
        self.cycles.setdefault((load, system), []).append(cycle)


def agent_argv(mark: str, load: Load) -> list[str]:
    return [sys.executable, str(AGENT), mark, load.kind, str(load.lines_per_s)]


def agents(mark: str) -> list[psutil.Process]:
    """Live stand-in agents carrying `mark` (never their sh wrappers)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        ours = len(cmd) >= 3 and cmd[1] == str(AGENT) and cmd[2] == mark
        if ours and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def count_agents(mark: str) -> int:
    """How many `agents` carry `mark`."""
    return len(agents(mark))


PEER_STOP_TIMEOUT_S = 60.0


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

    def pinger(self) -> subprocess.Popen[str]:
        """bench/pinger.py on this build's socket until its stdin closes: a process of its own,
        so this one's /proc scans (counting agents) do not hold up the pings."""
        assert self.config is not None
        return subprocess.Popen(
            [sys.executable, str(BENCH / "pinger.py"), str(self.config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

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
        self.mark: str | None = None

    def prepare(self, root: Path, repos: list[Path], mark: str, load: Load) -> None:
        folder = root / f"sv-{mark}"
        self.mark = mark
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

    def verb(self) -> list[str]:
        return [self._bin("supervisorctl"), "-c", str(self.conf), "status", "s0"]

    def stop(self) -> None:
        """`supervisorctl shutdown` and its exit; one that has not exited within
        PEER_STOP_TIMEOUT_S is killed (it is this suite's child), and its agents with it, so a
        stuck peer costs the run its stop figure (printed), not the run."""
        subprocess.run(self.verb()[:3] + ["shutdown"], check=True, stdout=subprocess.DEVNULL)
        assert self.process is not None
        try:
            self.process.wait(PEER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"supervisord did not exit {PEER_STOP_TIMEOUT_S:g} s after its shutdown; killed")
            self.process.kill()
            self.process.wait()
            if self.mark is not None:
                for proc in agents(self.mark):
                    proc.kill()


CRASHING_AGENT = (
    "import json, pathlib, sys, time\n"
    "marks, crashes = pathlib.Path(sys.argv[1]), int(sys.argv[2])\n"
    "with marks.open('a') as f: f.write(json.dumps(['start', time.time()]) + '\\n')\n"
    "if sum(1 for _ in marks.open()) > 2 * crashes: time.sleep(120)\n"
    "with marks.open('a') as f: f.write(json.dumps(['exit', time.time()]) + '\\n')\n"
    "sys.exit(1)\n"
)
"""The peer's crashing agent: writes when it starts and just before it exits 1, `crashes`
times, then stays up (bench/recovery.py's agent for herd does the same)."""


def supervisord_crash_gaps(root: Path, crashes: int, background: int) -> list[float]:
    """supervisord's crash -> relaunch (autorestart, startsecs=0) beside busy programs: per
    crash, seconds from the agent's last moment to the relaunched agent's first."""
    script, marks = root / "crashy.py", root / "marks.jsonl"
    script.write_text(CRASHING_AGENT)
    peer = Supervisord()
    mark = f"m{time.monotonic_ns()}"
    repos = make_repos(root, max(background, 1))
    peer.prepare(root, repos, mark, Load("busy", background, "plain", 20))
    assert peer.conf is not None
    with peer.conf.open("a") as conf:
        conf.write(
            f"\n[program:crashy]\ncommand={sys.executable} {script} {marks} {crashes}\n"
            f"directory={repos[0]}\nautostart=true\nautorestart=true\nstartsecs=0\n"
            f"startretries={crashes + 5}\nstdout_logfile={peer.conf.parent}/logs/crashy.log\n"
            "stopwaitsecs=2\nstopasgroup=true\nkillasgroup=true\n"
        )
    peer.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S + crashes * 5
        while not marks.exists() or sum(1 for _ in marks.open()) < 2 * crashes + 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"supervisord: {crashes} crashes not seen in time")
            time.sleep(0.05)
    finally:
        peer.stop()
        wait_agents(mark, 0)
    rows = [json.loads(line) for line in marks.read_text().splitlines()]
    return [
        b[1] - a[1]
        for a, b in zip(rows, rows[1:], strict=False)
        if a[0] == "exit" and b[0] == "start"
    ]


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


def cycle(
    system: Herd | Supervisord, load: Load, window_s: float, warmup_s: float, settle_s: float = 0
) -> Cycle:
    """Start cold, measure, stop: one system under one load."""
    mark = f"m{time.monotonic_ns()}"
    system.prepare(ROOT, REPOS, mark, load)
    result = Cycle()
    # supervisord's XML-RPC socket is not a target; its CLI verb below measures it.
    pinger = system.pinger() if isinstance(system, Herd) else None
    began = time.monotonic()
    system.start()
    wait_agents(mark, load.agents)
    result.start_s = time.monotonic() - began
    if pinger is not None:
        result.pings_ms = [float(x) for x in pinger.communicate("", timeout=30)[0].split()]
        result.ping_max_ms = max(result.pings_ms, default=0.0)
    time.sleep(warmup_s + (settle_s if load.kind == "quiet" else 0.0))
    proc = psutil.Process(system.pid())
    cpu_0, wall_0 = cpu_seconds(proc), time.monotonic()
    wakeups_0 = proc.num_ctx_switches().voluntary  # the main thread's (/proc/PID/status)
    time.sleep(window_s)
    wakeups = proc.num_ctx_switches().voluntary - wakeups_0
    wall_s = time.monotonic() - wall_0
    result.cpu_share = (cpu_seconds(proc) - cpu_0) / wall_s
    result.wakeups_per_min = wakeups * 60 / wall_s
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
    ("main thread woken, per minute", "wakeups_per_min", 1.0, ".0f"),
    ("open files", "fds", 1.0, ".0f"),
    ("CLI verb, ms wall", "verb_wall_ms", 1.0, ".0f"),
    ("CLI verb, ms CPU", "verb_cpu_ms", 1.0, ".0f"),
    ("stop everything, s", "stop_s", 1.0, ".2f"),
]


def machine() -> str:
    load1, _, _ = os.getloadavg()
    return (
        f"{platform.node()}: {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GB, Linux {platform.release()}, "
        f"Python {platform.python_version()}, load average {load1:.1f} at the start"
    )


@dataclass(frozen=True)
class Mode:
    """How big and how long each part of the suite runs."""

    name: str
    loads: tuple[Load, ...]
    window_s: float
    warmup_s: float
    rounds: int
    latency_sessions: int
    latency_trials: int
    crash_background: int
    crashes: int
    dash_sessions: int
    dash_seconds: float
    dash_settle_s: float
    soak_agents: int
    soak_minutes: float
    soak_every_s: float
    soak_warmup_s: float
    idle_settle_s: float = 0.0
    """A quiet load rests this long more before its window: the start's deferred work (each
    session's first git read) is no part of the figures at rest."""


MODES = {
    "full": Mode(
        "full",
        loads=(
            Load("idle", 200, "quiet", 0),
            Load("plain", 200, "plain", 50),
            Load("stream", 50, "stream-json", 10),
        ),
        window_s=30.0,
        warmup_s=3.0,
        rounds=2,
        latency_sessions=50,
        latency_trials=40,
        crash_background=49,
        crashes=30,
        dash_sessions=200,
        dash_seconds=15.0,
        dash_settle_s=10.0,
        soak_agents=200,
        soak_minutes=20.0,
        soak_every_s=15.0,
        soak_warmup_s=30.0,
        idle_settle_s=15.0,
    ),
    "short": Mode(
        "short",
        loads=(
            Load("idle", 30, "quiet", 0),
            Load("plain", 30, "plain", 20),
            Load("stream", 15, "stream-json", 10),
        ),
        window_s=6.0,
        warmup_s=1.5,
        rounds=2,
        latency_sessions=20,
        latency_trials=15,
        crash_background=19,
        crashes=15,
        dash_sessions=30,
        dash_seconds=5.0,
        dash_settle_s=5.0,
        soak_agents=30,
        soak_minutes=1.0,
        soak_every_s=10.0,
        soak_warmup_s=5.0,
        idle_settle_s=10.0,
    ),
    "tiny": Mode(  # the test's: every part end to end, as small as it goes
        "tiny",
        loads=(
            Load("idle", 3, "quiet", 0),
            Load("plain", 3, "plain", 5),
            Load("stream", 2, "stream-json", 5),
        ),
        window_s=1.0,
        warmup_s=0.3,
        rounds=1,
        latency_sessions=2,
        latency_trials=3,
        crash_background=1,
        crashes=3,
        dash_sessions=3,
        dash_seconds=1.0,
        dash_settle_s=1.0,
        soak_agents=3,
        soak_minutes=0.05,
        soak_every_s=1.0,
        soak_warmup_s=0.5,
    ),
}
SECTIONS = ("idle", "plain", "stream", "latency", "crash", "dashboard", "soak")


@dataclass
class Figures:
    """Everything one run of the suite measured, for bench/benchdoc.py to write up."""

    mode: Mode
    systems: list[str]
    loads: list[Load]
    sections: list[str]
    results: Results = field(default_factory=Results)
    progress_ms: list[float] = field(default_factory=list)
    commit_ms: list[float] = field(default_factory=list)
    watcher: str = ""
    crash_ms: list[float] = field(default_factory=list)
    crash_peer_ms: list[float] = field(default_factory=list)
    dashboard: dict[str, dict[str, float]] = field(default_factory=dict)
    dashboard_raw: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    soak: object | None = None
    soak_load: Load | None = None
    facts: dict[str, str] = field(default_factory=dict)


def figures_json(f: Figures) -> dict[str, object]:
    """Everything measured, as JSON: `--from-figures` writes the record again from it."""
    soaked = f.soak
    return {
        "mode": asdict(f.mode),
        "systems": f.systems,
        "loads": [asdict(load) for load in f.loads],
        "sections": f.sections,
        "cycles": [
            {"load": load, "system": system, "cycles": [asdict(c) for c in got]}
            for (load, system), got in f.results.cycles.items()
        ],
        "progress_ms": f.progress_ms,
        "commit_ms": f.commit_ms,
        "watcher": f.watcher,
        "crash_ms": f.crash_ms,
        "crash_peer_ms": f.crash_peer_ms,
        "dashboard": f.dashboard,
        "dashboard_raw": f.dashboard_raw,
        "soak": None if soaked is None else asdict(soaked),  # type: ignore[call-overload]
        "soak_load": None if f.soak_load is None else asdict(f.soak_load),
        "facts": f.facts,
    }


def figures_from_json(data: dict[str, Any]) -> Figures:
    """The inverse of `figures_json`."""
    import soak as soak_script

    mode = data["mode"]
    mode["loads"] = tuple(Load(**load) for load in mode["loads"])
    f = Figures(
        mode=Mode(**mode),
        systems=data["systems"],
        loads=[Load(**load) for load in data["loads"]],
        sections=data["sections"],
    )
    for entry in data["cycles"]:
        for got in entry["cycles"]:
            f.results.add(entry["load"], entry["system"], Cycle(**got))
    f.progress_ms, f.commit_ms, f.crash_ms = (
        data["progress_ms"],
        data["commit_ms"],
        data["crash_ms"],
    )
    f.crash_peer_ms = data.get("crash_peer_ms", [])
    f.watcher, f.dashboard, f.dashboard_raw = (
        data["watcher"],
        data["dashboard"],
        data["dashboard_raw"],
    )
    if data["soak"] is not None:
        samples = [tuple(sample) for sample in data["soak"].pop("samples")]
        f.soak = soak_script.Soak(samples=samples, **data["soak"])  # type: ignore[arg-type]
        f.soak_load = Load(**data["soak_load"])
    f.facts = data["facts"]
    return f


def peer_version() -> str:
    """supervisord's version, or '' when it is not installed beside this Python."""
    exe = Path(sys.executable).parent / "supervisord"
    if not exe.exists():
        return ""
    done = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def herd_version() -> str:
    """This checkout's commit, and whether it has changes."""
    head = subprocess.run(
        ["git", "-C", str(BENCH), "log", "-1", "--format=%h %cs"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(BENCH.parent), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return (head or "not a git checkout") + (" (with uncommitted changes)" if dirty else "")


def side_by_side(
    figures: Figures, systems: list[Herd | Supervisord], say: Callable[..., None]
) -> None:
    """Each load, each system alternately, `rounds` rounds."""
    global ROOT, REPOS
    if not figures.loads:
        return
    ROOT = Path(tempfile.mkdtemp(prefix="herd-suite-"))
    try:
        REPOS = make_repos(ROOT, max(load.agents for load in figures.loads))
        for load in figures.loads:
            for round_index in range(figures.mode.rounds):
                order = systems if round_index % 2 == 0 else systems[::-1]
                for system in order:
                    mode = figures.mode
                    got = cycle(system, load, mode.window_s, mode.warmup_s, mode.idle_settle_s)
                    figures.results.add(load.name, system.name, got)
                    say(f"{load.name} round {round_index + 1} {system.name}: {got}")
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)


def latency(figures: Figures, say: Callable[..., None]) -> None:
    """Progress write and commit -> status, with busy sessions (bench/watch_latency.py)."""
    import watch_latency

    mode = figures.mode
    with tempfile.TemporaryDirectory(prefix="herd-suite-watch-") as folder:
        got = watch_latency.measure(Path(folder), mode.latency_sessions, mode.latency_trials)
    figures.progress_ms, figures.commit_ms, figures.watcher = (
        got.progress_ms,
        got.commit_ms,
        got.watcher,
    )
    say(f"latency: progress {got.progress_ms}, commit {got.commit_ms}; watcher {got.watcher}")


def crash(figures: Figures, say: Callable[..., None]) -> None:
    """Crash -> relaunch with no backoff among busy sessions (bench/recovery.py)."""
    import recovery

    mode = figures.mode
    with tempfile.TemporaryDirectory(prefix="herd-suite-crash-") as folder:
        gaps, _phases = recovery.crash_gaps(Path(folder), mode.crashes, mode.crash_background)
    figures.crash_ms = [gap * 1000 for gap in gaps]
    say(f"crash -> relaunch, ms: {[round(g) for g in figures.crash_ms]}")
    if "supervisord" in figures.systems:
        with tempfile.TemporaryDirectory(prefix="herd-suite-svcrash-") as folder:
            gaps = supervisord_crash_gaps(Path(folder), mode.crashes, mode.crash_background)
        figures.crash_peer_ms = [gap * 1000 for gap in gaps]
        say(f"supervisord crash -> relaunch, ms: {[round(g) for g in figures.crash_peer_ms]}")


def dashboard(figures: Figures, say: Callable[..., None]) -> None:
    """The dashboard on a busy fleet, a quiet one, and one flooding agent (dashboard_load.py)."""
    import dashboard_load

    mode = figures.mode
    for kind in ("busy", "quiet", "flood"):
        raw: dict[str, list[float]] = {}
        found = dashboard_load.run(
            kind, mode.dash_sessions, mode.dash_seconds, settle_s=mode.dash_settle_s, raw=raw
        )
        figures.dashboard[kind], figures.dashboard_raw[kind] = found, raw
        say(dashboard_load.report(kind, mode.dash_sessions, found))


def soak(figures: Figures, minutes: float, say: Callable[..., None]) -> None:
    """Memory, threads, open files and git processes over `minutes` (bench/soak.py)."""
    import soak as soak_script

    mode = figures.mode
    load = Load("soak", mode.soak_agents, "plain", 1.0)
    got = soak_script.soak(
        str(Path(sys.executable).parent / "herd"),
        load,
        minutes,
        mode.soak_every_s,
        mode.soak_warmup_s,
        say,
    )
    figures.soak, figures.soak_load = got, load
    say(got.summary(load))


ROOT = Path()
REPOS: list[Path] = []


def main() -> None:
    import benchdoc

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode_arg = parser.add_mutually_exclusive_group()
    mode_arg.add_argument("--short", action="store_true", help="small loads, a few minutes")
    mode_arg.add_argument("--full", action="store_true", help="the issue's loads, for the record")
    mode_arg.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # the test's
    parser.add_argument("--rounds", type=int, help="side-by-side rounds (default 2; tiny 1)")
    parser.add_argument("--soak-minutes", type=float, help="default 20 in full, 1 in short")
    parser.add_argument("--herd", action="append", default=[], help="NAME=PATH to a herd")
    parser.add_argument("--no-peer", action="store_true", help="leave supervisord out")
    parser.add_argument(
        "--only", action="append", help=f"run only these parts: {', '.join(SECTIONS)}"
    )
    parser.add_argument("--out", type=Path, default=BENCH.parent / "docs" / "benchmarks.md")
    parser.add_argument("--notes", type=Path, default=BENCH.parent / "docs" / "benchmarks-notes.md")
    parser.add_argument(
        "--from-figures",
        type=Path,
        help="measure nothing: write the record again from a run's figures (after editing notes)",
    )
    parser.add_argument(
        "--previous",
        type=Path,
        help="the previous record's figures, to mark what got worse (default: the saved ones; "
        "with --from-figures, the ones kept beside them)",
    )
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)  # the figures are saved beside it
    chart = args.out.with_name(args.out.stem + "-latency.svg")
    saved = args.out.with_name(args.out.stem + "-figures.json")
    kept = args.out.with_name(args.out.stem + "-previous-figures.json")
    """The record before this one's figures: what a rewrite from the figures compares with."""
    earlier = args.previous or (kept if args.from_figures else saved)
    previous = figures_from_json(json.loads(earlier.read_text())) if earlier.exists() else None
    if args.from_figures:
        figures = figures_from_json(json.loads(args.from_figures.read_text()))
        benchdoc.write(figures, args.out, chart, args.notes, previous)
        if args.from_figures.resolve() != saved.resolve():  # the record's own figures beside it
            shutil.copyfile(args.from_figures, saved)
        print(f"wrote {args.out} and {chart} from {args.from_figures}")
        return
    name = "full" if args.full else "tiny" if args.tiny else "short"
    mode = MODES[name]
    if args.rounds:
        mode = replace(mode, rounds=args.rounds)
    loads = list(mode.loads)
    sections = [s for s in SECTIONS if not args.only or any(o in s for o in args.only)]
    soak_minutes = args.soak_minutes if args.soak_minutes is not None else mode.soak_minutes
    herds = [Herd("herd", str(Path(sys.executable).parent / "herd"))]
    herds += [Herd(n, path) for n, path in (h.split("=", 1) for h in args.herd)]
    systems: list[Herd | Supervisord] = [*herds]
    peer = "" if args.no_peer else peer_version()
    if peer:
        systems.append(Supervisord())
    figures = Figures(
        mode=replace(mode, soak_minutes=soak_minutes),
        systems=[s.name for s in systems],
        loads=[load for load in loads if load.name in sections],
        sections=sections,
    )
    figures.facts = {
        "machine": f"{psutil.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GB",
        "kernel": f"Linux {platform.release()}",
        "python": platform.python_version(),
        "herd": herd_version(),
        "peer": f"supervisor {peer} (supervisord, from PyPI)" if peer else "not installed",
        "load_before": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "began": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }

    def say(*parts: object) -> None:
        print(*parts, flush=True)

    say(machine())
    side_by_side(figures, systems, say)
    for section, run in (("latency", latency), ("crash", crash), ("dashboard", dashboard)):
        if section in sections:
            run(figures, say)
    if "soak" in sections:
        soak(figures, soak_minutes, say)
    figures.facts["load_after"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    if previous is not None:
        kept.write_text(json.dumps(figures_json(previous), indent=1) + "\n")
    saved.write_text(json.dumps(figures_json(figures), indent=1) + "\n")
    text = benchdoc.write(figures, args.out, chart, args.notes, previous)
    say(benchdoc.for_terminal(text))
    say(f"wrote {args.out}, {chart} and {saved}")


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
    sys.modules.setdefault("suite", sys.modules["__main__"])  # soak.py and storm.py import it
    as_init()
