"""Chaos: kill -9 agents and the daemon at random moments; herd still keeps every promise.

A fleet of simulated agents works through its plans under a real background daemon started by
`herd up --no-tui`. At seeded random moments the test kills agents and the daemon: at any
time, during the daemon's start-up, during the rescue and reset after an agent's crash,
during a verification and during `herd down`, and starts the daemon again with `herd up`. At
the end it checks: no duplicate agent was ever seen, no rescue or commit was lost, no scratch
worktree leaked, the event log has no gap, the database is intact and nothing runs. The
PID-namespace harness (marker pidns) checks that no signal reached anything outside the runs.

`HERD_CHAOS_SEED=N` replays a run; the seed and the figures are printed (`pytest -s`).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import HERD, PY, SIMAGENT, git, sim_repo

SEED_VAR = "HERD_CHAOS_SEED"
MOMENTS_VAR = "HERD_CHAOS_MOMENTS"
"""Comma-separated moments to kill the daemon at (default all: any, rescue, reset,
verification, down, launch), e.g. to look past a bug another moment hits first."""
VERIFY_MARK = "chaos-verify"
"""An argument of the verify command, so the test can see a verification running."""

RESCUE_GIT = ("add", "write-tree", "commit-tree", "update-ref", "read-tree")
"""git subcommands the daemon runs to save a crashed run's dirty tree on a rescue ref."""

SAMPLE_S = 0.02
"""How often the duplicate watch looks at every agent process."""

DONE_STATES = {"completed", "failed", "stopped"}


@dataclass(frozen=True)
class Plan:
    """How big and how long one chaos run is."""

    sessions: int
    features: int
    chaos_s: float
    finish_s: float
    delay_s: float
    rounds: int | None = None
    """Rounds of every moment (in random order) to run; None: as many as fit in chaos_s."""


SHORT = Plan(sessions=4, features=6, chaos_s=0.0, finish_s=25.0, delay_s=2.0, rounds=1)
"""One round: every moment once (a fixed 30 s ran one to two rounds), agents alive throughout."""
LONG = Plan(sessions=8, features=20, chaos_s=300.0, finish_s=150.0, delay_s=2.0)


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def parent_pid(proc: psutil.Process) -> int | None:
    try:
        return proc.ppid()
    except psutil.Error:
        return None


def is_agent(proc: psutil.Process) -> bool:
    """A simulated agent itself (not the sh wrapper whose command line names it)."""
    return cmdline(proc)[1:3] == ["-m", "agentherd.supervisor.sim.simagent"]


class DuplicateWatch(threading.Thread):
    """Samples every agent process by its HERD_SESSION; two at once for a session is a bug."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stopped = threading.Event()
        self.duplicates: list[str] = []
        self.samples = 0

    def run(self) -> None:
        previous: set[str] = set()
        while not self.stopped.wait(SAMPLE_S):
            by_session: dict[str, list[tuple[psutil.Process, str]]] = {}
            for proc in psutil.process_iter():
                if not is_agent(proc):
                    continue
                try:
                    env = proc.environ()
                except psutil.Error:
                    continue
                if "HERD_SESSION" in env and alive(proc):
                    by_session.setdefault(env["HERD_SESSION"], []).append((proc, env["HERD_RUN"]))
            self.samples += 1
            suspects = set()
            for session, found in by_session.items():
                pids = {proc.pid for proc, _ in found}
                # A child between fork and exec (git) still looks like its agent parent.
                found = [(p, run) for p, run in found if parent_pid(p) not in pids]
                if len(found) > 1 and all(alive(proc) for proc, _ in found):
                    seen = f"{session}: " + ", ".join(f"pid {p.pid} run {run}" for p, run in found)
                    suspects.add(seen)
                    if seen in previous and seen not in self.duplicates:
                        self.duplicates.append(seen)  # seen in two samples in a row
            previous = suspects


@dataclass
class Chaos:
    """The fleet, the daemon's life and the figures of one run."""

    root: Path
    plan: Plan
    rng: random.Random
    agent_kills: int = 0
    daemon_kills: Counter[str] = field(default_factory=Counter)
    """Kills of the daemon by the moment they hit."""
    downs_finished_first: int = 0
    ups: int = 0
    problems: list[str] = field(default_factory=list)

    # ----- the fleet ---------------------------------------------------------------------

    def write_config(self) -> None:
        blocks = []
        for index in range(self.plan.sessions):
            repo = sim_repo(self.root / f"s{index}", features=self.plan.features)
            options = ["--one-per-run", "--delay", str(self.plan.delay_s), "--jitter", "0.5"]
            if index == 0:
                options.append("--ignore-sigterm")  # stops take stop_grace: a wide `down`
            verify = [PY, "-c", "import time; time.sleep(1)", VERIFY_MARK]
            blocks.append(f"""
[[session]]
name = "s{index}"
cwd = "{repo}"
agent = "claude"
command = {json.dumps([*SIMAGENT, *options])}
resume = {json.dumps([*SIMAGENT, *options, "--resume", "{session_id}"])}
plan = "feature_list.json"
progress = "claude-progress.txt"
restart = "until-done"
restart_delay = "0.1s"
restart_delay_max = "1s"
max_crashes = 100000
stop_grace = "1s"
verify = {json.dumps(verify)}
verify_timeout = "30s"
""")
        (self.root / "herd.toml").write_text("".join(blocks))

    def herd(self, *args: str, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [HERD, *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )

    def daemons(self) -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter()
            if "agentherd.supervisor.main" in cmdline(p) and alive(p)
        ]

    def agents(self) -> list[psutil.Process]:
        return [p for p in psutil.process_iter() if is_agent(p) and alive(p)]

    # ----- the daemon's life -------------------------------------------------------------

    def up(self) -> None:
        """`herd up --no-tui`; it must work whatever state the last kill left."""
        self.ups += 1
        done = self.herd("up", "--no-tui")
        if done.returncode != 0:
            self.problems.append(f"herd up failed ({done.returncode}): {done.stderr.strip()}")

    def kill_daemon(self, moment: str) -> bool:
        found = self.daemons()
        for daemon in found:
            daemon.send_signal(signal.SIGKILL)
        psutil.wait_procs(found, timeout=10)
        if found:
            self.daemon_kills[moment] += 1
        return bool(found)

    def wait_for(self, seen: Callable[[], bool], timeout_s: float, poll_s: float = 0.003) -> bool:
        """Poll fast for a short-lived moment (a git child lives milliseconds)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if seen():
                return True
            time.sleep(poll_s)
        return False

    def daemon_git_running(self, subcommands: tuple[str, ...]) -> bool:
        for daemon in self.daemons():
            try:
                children = daemon.children(recursive=True)
            except psutil.Error:
                continue
            for child in children:
                argv = cmdline(child)
                if argv and argv[0].endswith("git") and any(a in subcommands for a in argv[1:4]):
                    return True
        return False

    def verify_running(self) -> bool:
        return any(VERIFY_MARK in cmdline(p) for p in psutil.process_iter()) or (
            self.daemon_git_running(("worktree",))
        )

    # ----- the moments -------------------------------------------------------------------

    def pick_agent(self) -> tuple[psutil.Process, str] | None:
        """One live agent at random, with its session."""
        agents = self.agents()
        for proc in self.rng.sample(agents, len(agents)):
            try:
                return proc, proc.environ()["HERD_SESSION"]
            except (psutil.Error, KeyError):
                continue
        return None

    def kill_agent(self, proc: psutil.Process) -> bool:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            return False
        self.agent_kills += 1
        return True

    def kill_an_agent(self) -> None:
        picked = self.pick_agent()
        if picked is not None:
            self.kill_agent(picked[0])

    def rescue_refs(self, session: str) -> set[Path]:
        """Loose ref files under refs/herd/ (cheap to poll; git writes them loose)."""
        folder = self.root / session / ".git" / "refs" / "herd"
        return set(folder.rglob("*")) if folder.is_dir() else set()

    def daemon_at_random(self) -> None:
        self.kill_daemon("any time")
        if self.rng.random() < 0.5:
            self.kill_an_agent()  # it ends while no daemon runs
        self.restart_daemon()

    def dirty_agent(self) -> tuple[psutil.Process, str] | None:
        """An agent whose tree has uncommitted work right now (a crash then needs a rescue)."""
        agents = self.agents()
        for proc in self.rng.sample(agents, len(agents)):
            try:
                session = proc.environ()["HERD_SESSION"]
            except (psutil.Error, KeyError):
                continue
            if git(self.root / session, "status", "--porcelain").strip():
                return proc, session
        return None

    def crash_an_agent_with_work(self) -> tuple[str, set[Path]] | None:
        """SIGKILL an agent, one with uncommitted work if one shows up within seconds."""
        picked: list[tuple[psutil.Process, str] | None] = [None]

        def found_dirty() -> bool:
            picked[0] = self.dirty_agent()
            return picked[0] is not None

        if not self.wait_for(found_dirty, 5.0, poll_s=0.1):
            picked[0] = self.pick_agent()
        if picked[0] is None:
            return None
        proc, session = picked[0]
        before = self.rescue_refs(session)
        return (session, before) if self.kill_agent(proc) else None

    def daemon_during_rescue(self) -> None:
        """Crash an agent; kill the daemon while it saves the crashed run's tree."""
        if self.crash_an_agent_with_work() is None:
            return
        hit = self.wait_for(lambda: self.daemon_git_running(RESCUE_GIT), 4.0)
        self.kill_daemon("rescue" if hit else "after an agent crash")
        self.restart_daemon()

    def daemon_during_reset(self) -> None:
        """Crash an agent; kill the daemon once the rescue ref is written (reset, then spawn)."""
        crashed = self.crash_an_agent_with_work()
        if crashed is None:
            return
        session, before = crashed
        hit = self.wait_for(lambda: bool(self.rescue_refs(session) - before), 4.0)
        self.kill_daemon("reset, right after the rescue ref" if hit else "after an agent crash")
        self.restart_daemon()

    def daemon_during_verification(self) -> None:
        hit = self.wait_for(self.verify_running, 4.0)
        self.kill_daemon("verification" if hit else "waiting for a verification")
        self.restart_daemon()

    def daemon_during_down(self) -> None:
        down = subprocess.Popen(
            [HERD, "down"], cwd=self.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(self.rng.uniform(0.1, 1.2))  # a random moment inside the down
        killed = down.poll() is None and self.kill_daemon("herd down")
        down.wait(timeout=60)
        if not killed:
            self.downs_finished_first += 1
        self.restart_daemon()

    def daemon_during_launch(self) -> None:
        """After a clean `herd down`, kill the daemon of the next `herd up` as runs launch."""
        self.herd("down", timeout_s=120)
        up = subprocess.Popen(
            [HERD, "up", "--no-tui"],
            cwd=self.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.ups += 1
        hit = self.wait_for(self.run_recorded_without_pid, 15.0)
        self.kill_daemon("between recording a run and spawning it" if hit else "start-up")
        up.wait(timeout=60)
        self.restart_daemon()

    def run_recorded_without_pid(self) -> bool:
        """A run the store has written but not spawned yet (read-only; WAL allows it)."""
        try:
            uri = f"file:{self.root / '.herd/state.db'}?mode=ro"
            with closing(sqlite3.connect(uri, uri=True)) as db:
                rows = db.execute("SELECT data FROM runs").fetchall()
        except sqlite3.Error:
            return False
        return any(
            (run := json.loads(data))["pid"] is None and run["ended_at"] is None for (data,) in rows
        )

    def restart_daemon(self) -> None:
        """`herd up`; sometimes kill the new daemon during its start-up first."""
        while self.rng.random() < 0.35:
            up = subprocess.Popen(
                [HERD, "up", "--no-tui"],
                cwd=self.root,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.ups += 1
            started = self.wait_for(lambda: bool(self.daemons()), 10.0)
            time.sleep(self.rng.uniform(0.0, 1.0))  # a random moment of the start-up
            if started:
                self.kill_daemon("start-up")
            up.wait(timeout=60)
        self.up()

    # ----- the run -------------------------------------------------------------------------

    def run(self) -> None:
        moments = {
            "any": self.daemon_at_random,
            "rescue": self.daemon_during_rescue,
            "reset": self.daemon_during_reset,
            "verification": self.daemon_during_verification,
            "down": self.daemon_during_down,
            "launch": self.daemon_during_launch,
        }
        chosen = os.environ.get(MOMENTS_VAR, ",".join(moments)).split(",")
        deadline = time.monotonic() + self.plan.chaos_s
        rounds = 0
        while (
            time.monotonic() < deadline if self.plan.rounds is None else rounds < self.plan.rounds
        ):
            rounds += 1
            # Every moment once per round, in a random order: each run covers all of them.
            for name in self.rng.sample(chosen, len(chosen)):
                if self.plan.rounds is None and time.monotonic() > deadline:
                    break
                for _ in range(self.rng.randint(0, 2)):
                    time.sleep(self.rng.uniform(0.1, 1.0))  # random pacing, on purpose
                    self.kill_an_agent()
                time.sleep(self.rng.uniform(0.1, 1.0))
                moments[name]()

    def finish(self) -> list[dict[str, Any]]:
        """Let the fleet finish (or give up waiting), then read the statuses."""
        self.up()
        deadline = time.monotonic() + self.plan.finish_s
        while time.monotonic() < deadline:
            statuses = json.loads(self.herd("ls", "--json").stdout or "[]")
            if statuses and all(s["state"] in DONE_STATES for s in statuses):
                return statuses  # type: ignore[no-any-return]
            time.sleep(0.5)
        return json.loads(self.herd("ls", "--json").stdout or "[]")  # type: ignore[no-any-return]


# ----- the checks ------------------------------------------------------------------------


def unreachable_commits(repo: Path) -> dict[str, str]:
    """Commits no ref reaches (reflogs ignored) whose work no ref holds: sha -> 'author|subject'.

    A daemon killed between a rescue's `commit-tree` and its `update-ref` leaves the commit
    unreferenced; the next daemon rescues the same tree again onto a ref. Such a commit lost
    nothing: its tree is the tree of a commit a ref reaches.
    """
    out = git(repo, "fsck", "--unreachable", "--no-reflogs", "--no-progress")
    kept_trees = set(git(repo, "log", "--all", "--format=%T").split())
    found = {}
    for line in out.splitlines():
        kind, _, sha = line.partition(" commit ")
        if kind == "unreachable" and sha:
            tree, _, what = git(repo, "log", "-1", "--format=%T|%an|%s", sha).strip().partition("|")
            if not (what.startswith("herd|") and tree in kept_trees):
                found[sha] = what
    return found


def git_problems(chaos: Chaos, events: list[dict[str, Any]]) -> list[str]:
    problems = []
    for index in range(chaos.plan.sessions):
        name = f"s{index}"
        repo = chaos.root / name
        lost = unreachable_commits(repo)
        for sha, what in lost.items():
            author, _, subject = what.partition("|")
            kind = "rescue" if author == "herd" else f"commit by {author}"
            problems.append(f"{name}: lost {kind} {sha[:12]} ({subject})")
        refs = set(git(repo, "for-each-ref", "--format=%(refname)", "refs/herd/").split())
        for event in events:
            if event["session"] == name and event["kind"] == "rescue-saved":
                ref, sha = event["data"]["ref"], event["data"]["sha"]
                if ref not in refs:
                    problems.append(f"{name}: {ref} (rescue-saved, seq {event['seq']}) is gone")
                elif sha in lost:
                    problems.append(f"{name}: {ref} no longer holds {sha[:12]}")
        listed = git(repo, "worktree", "list", "--porcelain")
        if listed.count("worktree ") != 1:
            admins = repo / ".git" / "worktrees"
            kept = {p.name: sorted(f.name for f in p.iterdir()) for p in admins.iterdir()}
            problems.append(
                f"{name}: {listed.count('worktree ') - 1} scratch worktree(s) leaked:\n"
                f"{listed}registrations: {kept}"
            )
        scratch = chaos.root / ".herd" / "verify" / name
        folders = scratch.iterdir() if scratch.is_dir() else iter(())
        leaked = sorted(p.name for p in folders if p.is_dir())  # *.log are kept on purpose
        if leaked:
            problems.append(f"{name}: scratch folders left in {scratch}: {leaked}")
    return problems


def event_problems(events: list[dict[str, Any]]) -> list[str]:
    seqs = [e["seq"] for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        return [f"event seq has gaps: missing {missing[:20]} of {max(seqs, default=0)}"]
    return []


def figures(chaos: Chaos, events: list[dict[str, Any]], statuses: list[dict[str, Any]]) -> str:
    kinds = Counter(e["kind"] for e in events)
    states = Counter(f"{s['state']}{'/' + s['reason'] if s['reason'] else ''}" for s in statuses)
    passing = sum((s.get("plan") or {}).get("passing") or 0 for s in statuses)
    lines = [
        f"agent kills: {chaos.agent_kills}",
        f"daemon kills: {sum(chaos.daemon_kills.values())} "
        f"({', '.join(f'{n} {k}' for k, n in sorted(chaos.daemon_kills.items()))}); "
        f"herd down finished before its kill: {chaos.downs_finished_first}",
        f"herd up runs: {chaos.ups}; daemon starts recorded: {kinds['daemon-started']}",
        f"events: {len(events)}; runs started: {kinds['run-started']}; adopted: "
        f"{kinds['adopted']}; rescues: {kinds['rescue-saved']}; resets: {kinds['worktree-reset']}",
        f"verifications: {kinds['verify-passed']} passed, {kinds['verify-failed']} failed",
        f"plan items passing: {passing} of {chaos.plan.sessions * chaos.plan.features}; "
        f"final states: {dict(states)}",
    ]
    return "\n".join(lines)


def run_chaos(root: Path, plan: Plan) -> None:
    seed = int(os.environ.get(SEED_VAR) or random.randrange(1 << 32))
    print(f"chaos seed: {seed} (replay with {SEED_VAR}={seed})")
    began = time.monotonic()
    chaos = Chaos(root, plan, random.Random(seed))
    chaos.write_config()
    watch = DuplicateWatch()
    watch.start()
    try:
        chaos.up()
        chaos.run()
        statuses = chaos.finish()
        listing = chaos.herd("events", "--json")
        events = [json.loads(line) for line in listing.stdout.splitlines() if line.strip()]
        down = chaos.herd("down", timeout_s=120)
        if down.returncode != 0:
            chaos.problems.append(f"final herd down failed: {down.stdout}{down.stderr}")
    finally:
        watch.stopped.set()
        watch.join(5)
        for daemon in chaos.daemons():  # a failed down must not hide the other findings
            chaos.problems.append(f"daemon still running after herd down: pid {daemon.pid}")
            daemon.kill()
    chaos.problems += [f"duplicate agents: {d}" for d in watch.duplicates[:20]]
    chaos.problems += git_problems(chaos, events) + event_problems(events)
    chaos.problems += [  # every kill leaves enough on record for the next daemon to go on
        f"{s['name']}: ended failed (lost)"
        for s in statuses
        if s["state"] == "failed" and s["reason"] == "lost"
    ]
    with closing(sqlite3.connect(root / ".herd" / "state.db")) as db:
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    if integrity != "ok":
        chaos.problems.append(f"PRAGMA integrity_check: {integrity}")
    daemon_log = root / ".herd" / "daemon.log"
    bugs = [
        line
        for line in daemon_log.read_text(errors="replace").splitlines()
        if "illegal transition" in line or "BUG:" in line
    ]
    chaos.problems += [f"daemon.log: {line[:200]}" for line in bugs[:20]]
    left = [f"{p.pid} {' '.join(cmdline(p))[:100]}" for p in chaos.agents()]
    chaos.problems += [f"left running: {line}" for line in left]
    print(figures(chaos, events, statuses))
    print(f"duplicate-watch samples: {watch.samples}; seconds: {time.monotonic() - began:.1f}")
    assert not chaos.problems, f"seed {seed}:\n" + "\n".join(chaos.problems)


@pytest.mark.pidns
@pytest.mark.timeout(170)
def test_chaos_short(tmp_path: Path) -> None:
    run_chaos(tmp_path, SHORT)


@pytest.mark.slow
@pytest.mark.pidns
@pytest.mark.timeout(900)
def test_chaos_long(tmp_path: Path) -> None:
    run_chaos(tmp_path, LONG)
