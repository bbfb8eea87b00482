"""Chaos on three hosts (issue 28): hosts killed and returning, one frozen past its lease and
thawed, the database away for less than the grace, while sessions commit and push their work.

Each host is its own PID namespace; the hosts reach PostgreSQL through a link the test can cut.
Sampled every half second across the namespaces: the live agents of each session (a frozen
one is not live) and each session's `refs/herd/NAME/last` on the checkpoint remote. At the end
every session completed, no pushed commit was lost, each step is in the final history once,
the outage restarted nothing. It prints the failover figures (a dead or frozen host's session
running again elsewhere). The short variant runs in CI; `-m slow` runs the long one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of, through
from conftest import PY, wait_until
from netcut import CuttableLink
from pgcluster import require_cluster_extra

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.pidns]
SAMPLE_S = 0.5
IDENTITY = ["-c", "user.name=agent", "-c", "user.email=agent@example.com"]
HOSTS = ("h1", "h2", "h3")
THAW_BOUND_S = 3.0
"""How long a thawed host's stale agents may run on: the processes of a frozen machine wake
together, its agents with its daemon, which stops them once it sees its lease has run out."""


@dataclass(frozen=True)
class Plan:
    """The sizes of one chaos run."""

    sessions: int
    steps: int
    step_s: float
    lease_s: float
    grace_s: float
    outage_s: float
    rounds: int


SHORT = Plan(sessions=4, steps=60, step_s=1.0, lease_s=3.0, grace_s=8.0, outage_s=6.0, rounds=1)
"""A round's chaos takes 45 s or more: 60 steps keep every session running through its last
kill (a host killed just after its agent's last commit is back with the session taken from
it, so the pushes it had not made yet are refused: that commit stays on its disk)."""
LONG = Plan(sessions=6, steps=300, step_s=1.0, lease_s=3.0, grace_s=25.0, outage_s=20.0, rounds=3)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, check=check, capture_output=True, text=True
    ).stdout.strip()


def stepper(marks: Path, name: str, plan: Plan) -> str:
    """A simulated agent: one committed step every `step_s` until `steps`; where it stands is
    read from its committed progress file (a run after a move starts from the pushed work).
    Marks: `start|commit|end HOST NAME STEP WALLTIME`."""
    code = f"""
import os, subprocess, time
host = os.path.basename(os.path.dirname(os.getcwd()))
def mark(kind, step):
    with open({str(marks)!r}, "a") as f:
        f.write(f"{{kind}} {{host}} {name} {{step}} {{time.time()}}\\n")
try:
    done = len(open("progress.txt").read().splitlines())
except FileNotFoundError:
    done = 0
mark("start", done)
for step in range(done + 1, {plan.steps} + 1):
    time.sleep({plan.step_s})
    with open("progress.txt", "a") as f:
        f.write(f"step {{step}} on {{host}}\\n")
    subprocess.run(["git", "add", "progress.txt"], check=True)
    subprocess.run(["git", *{IDENTITY!r}, "commit", "-q", "-m", f"step {{step}}"], check=True)
    mark("commit", step)
mark("end", {plan.steps})
"""
    return json.dumps([PY, "-c", code, f"chaos-agent-{name}"])


@dataclass(frozen=True)
class Mark:
    """One line an agent wrote."""

    kind: str
    host: str
    session: str
    step: int
    at: float


def read_marks(path: Path) -> list[Mark]:
    found = []
    for line in path.read_text().splitlines():
        kind, host, session, step, at = line.split()
        found.append(Mark(kind, host, session, int(step), float(at)))
    return found


@dataclass
class Record:
    """What happened: the chaos (wall times) and what the sampler saw."""

    began: float = field(default_factory=time.time)
    events: list[tuple[str, str, float]] = field(default_factory=list)
    overlaps: list[tuple[float, str, list[str]]] = field(default_factory=list)
    thaws: list[tuple[str, float, float]] = field(default_factory=list)
    """(host, thawed at, its stale agents stopped that many seconds later)."""
    pushed: dict[str, list[str]] = field(default_factory=dict)
    samples: int = 0

    def event(self, kind: str, host: str = "") -> float:
        at = time.time()
        self.events.append((kind, host, at))
        print(f"{at - self.began:6.1f}s {kind} {host}", flush=True)
        return at


def namespace(host: HostProc) -> list[psutil.Process]:
    """Every process of a host's namespace (its `unshare` and all below)."""
    if host.process is None or host.process.poll() is not None:
        return []
    try:
        top = psutil.Process(host.process.pid)
        return [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def live_agents(hosts: list[HostProc]) -> dict[str, list[str]]:
    """Session name -> its agents running now, as "host:pid" (frozen ones do not run). A child
    the agent forked to run git has the agent's command line until it execs: not an agent."""
    seen: list[tuple[str, int, int, str]] = []
    for host in hosts:
        for proc in namespace(host):
            try:
                if proc.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                    continue
                argv, parent = proc.cmdline(), proc.ppid()
            except psutil.NoSuchProcess:
                continue
            if argv[:1] != ["/bin/sh"] and argv and argv[-1].startswith("chaos-agent-"):
                seen.append((argv[-1].removeprefix("chaos-agent-"), proc.pid, parent, host.name))
    pids = {pid for _, pid, _, _ in seen}
    found: dict[str, list[str]] = {}
    for name, pid, parent, host_name in seen:
        if parent not in pids:
            found.setdefault(name, []).append(f"{host_name}:{pid}")
    return found


class Sampler:
    """Every SAMPLE_S: each session's live agents on every host, and its remote `last`."""

    def __init__(self, hosts: list[HostProc], names: list[str], bare: Path, record: Record):
        self.hosts, self.names, self.bare, self.record = hosts, names, bare, record
        record.pushed = {n: [] for n in names}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            at = time.time()
            agents = live_agents(self.hosts)
            for name in self.names:
                where = agents.get(name, [])
                if len(where) > 1:
                    self.record.overlaps.append((at, name, where))
                ref = f"refs/herd/{name}/last"
                sha = git(self.bare, "rev-parse", "-q", "--verify", ref, check=False)
                seen = self.record.pushed[name]
                if sha and (not seen or seen[-1] != sha):
                    seen.append(sha)
            self.record.samples += 1


def signal_all(host: HostProc, signum: int) -> None:
    """SIGSTOP or SIGCONT every process of the host, twice over (a fork meanwhile)."""
    for _ in range(2):
        for proc in namespace(host):
            try:
                proc.send_signal(signum)
            except psutil.NoSuchProcess:
                pass


def hold(seconds: float) -> None:
    """Let the chaos go on for `seconds` (the state it set up is what is being tested)."""
    threading.Event().wait(seconds)


def make_hosts(
    plan: Plan, tmp_path: Path, link: CuttableLink, pg_url: str, names: list[str]
) -> list[HostProc]:
    """Three hosts (not started), each with every session's repository cloned from one seed."""
    marks, bare, seedrepo = tmp_path / "marks.txt", tmp_path / "remote.git", tmp_path / "seed"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    seedrepo.mkdir()
    git(seedrepo, "init", "-q")
    (seedrepo / "README").write_text("work\n")
    git(seedrepo, "add", "README")
    git(seedrepo, "commit", "-q", "-m", "start")
    blocks = "".join(
        f"""
        [[session]]
        name = "{name}"
        command = {stepper(marks, name, plan)}
        cwd = "{name}"
        restart = "on-failure"
        restart_delay = "0s"
        stop_grace = "2s"
        autostart = false
        """
        for name in names
    )
    lease, grace = f"{plan.lease_s:g}s", f"{plan.grace_s:g}s"
    toml = cluster_toml(blocks, lease=lease, grace=grace, checkpoint_remote=str(bare))
    through_link = through(link, pg_url)
    made = []
    for host_name in HOSTS:
        host = HostProc(tmp_path, host_name, toml, through_link)
        for name in names:
            git(tmp_path, "clone", "-q", str(seedrepo), str(host.root / name))
        made.append(host)
    return made


def one_round(
    plan: Plan, rng: random.Random, hosts: list[HostProc], link: CuttableLink, record: Record
) -> None:
    """A kill and an immediate return, a freeze past lease and grace and a thaw, an outage
    shorter than the grace, and a kill that lasts past lease and grace."""
    killed, frozen, gone = rng.sample(hosts, len(hosts))
    dead_after = plan.lease_s + plan.grace_s
    record.event("kill", killed.name)
    killed.kill()
    hold(plan.lease_s)
    killed.start()
    record.event("back", killed.name)
    record.event("freeze", frozen.name)
    signal_all(frozen, signal.SIGSTOP)
    hold(dead_after + 3)
    thawed_at = record.event("thaw", frozen.name)
    signal_all(frozen, signal.SIGCONT)
    wait_until(
        lambda: all(len(where) < 2 for where in live_agents(hosts).values()),
        THAW_BOUND_S,
        "the thawed host to stop its stale agents",
        poll_s=0.05,
    )
    record.thaws.append((frozen.name, thawed_at, time.time() - thawed_at))
    hold(plan.lease_s * 2)
    record.event("outage")
    link.cut()
    hold(plan.outage_s)
    link.restore()
    record.event("outage-end")
    hold(plan.lease_s * 2)
    record.event("kill", gone.name)
    gone.kill()
    hold(dead_after + 2)
    gone.start()
    record.event("back", gone.name)


def failovers(record: Record, marks: list[Mark]) -> list[float]:
    """Seconds from a host's kill or freeze to each of its sessions starting elsewhere (only
    for a host that stayed away past lease and grace: one back at once keeps its work)."""
    found = []
    events = record.events
    for i, (kind, host, at) in enumerate(events):
        if kind not in ("kill", "freeze"):
            continue
        ended = next((t for k, h, t in events[i + 1 :] if h == host), None)
        if kind == "kill" and ended is not None and ended - at < 5:
            continue  # back at once
        before = [m for m in marks if m.at < at and m.kind in ("start", "end")]
        for session in {m.session for m in before}:
            last = [m for m in before if m.session == session][-1]
            if last.kind != "start" or last.host != host:
                continue
            moved = [m.at for m in marks if m.session == session and m.kind == "start"]
            later = [t for t in moved if t > at]
            if later:
                found.append(later[0] - at)
    return found


def check(plan: Plan, record: Record, marks: list[Mark], bare: Path, names: list[str]) -> None:
    """The invariants, after the run."""

    def thawing(at: float, where: list[str]) -> bool:
        """Two agents right after a thaw, one the thawed host's: the bounded window above."""
        return any(
            thawed <= at <= thawed + stale_s + SAMPLE_S
            and any(w.startswith(f"{host}:") for w in where)
            for host, thawed, stale_s in record.thaws
        )

    overlaps = [o for o in record.overlaps if not thawing(o[0], o[2])]
    assert overlaps == [], f"two live agents for one session: {overlaps}"
    for name in names:
        final = git(bare, "rev-parse", f"refs/herd/{name}/last")
        # A late push of a host that lost the session, pushed over by its owner, is kept aside.
        displaced = git(
            bare, "for-each-ref", "--format=%(objectname)", f"refs/herd/{name}/hosts/*/displaced/*"
        ).split()
        for sha in record.pushed[name]:
            kept = subprocess.run(["git", "merge-base", "--is-ancestor", sha, final], cwd=bare)
            assert kept.returncode == 0 or sha in displaced, (
                f"{name}: pushed {sha[:12]} lost (final {final[:12]})"
            )
        history = git(bare, "log", "--format=%s", final).splitlines()
        steps = [line for line in reversed(history) if line.startswith("step ")]
        assert steps == [f"step {s}" for s in range(1, plan.steps + 1)], (name, steps)
    cuts = [t for k, _, t in record.events if k == "outage"]
    ends = [t for k, _, t in record.events if k == "outage-end"]
    for cut, end in zip(cuts, ends, strict=True):
        restarted = [m for m in marks if m.kind == "start" and cut <= m.at <= end + plan.lease_s]
        assert restarted == [], f"the outage restarted agents: {restarted}"


def chaos(
    plan: Plan, tmp_path: Path, link: CuttableLink, hosts: list[HostProc], pg_url: str
) -> None:
    seed = int(os.environ.get("HERD_CHAOS_SEED", random.randrange(2**31)))
    print(f"cluster chaos seed: {seed} (replay with HERD_CHAOS_SEED={seed})")
    rng = random.Random(seed)
    names = [f"s{i}" for i in range(plan.sessions)]
    hosts += make_hosts(plan, tmp_path, link, pg_url, names)
    for host in hosts:
        host.start()
    fleet = fleet_of(hosts[0], pg_url)
    record = Record()
    bare = tmp_path / "remote.git"
    try:
        with Sampler(hosts, names, bare, record):
            handles = {name: fleet.start(name).handle for name in names}
            wait_until(
                lambda: sum(len(v) for v in live_agents(hosts).values()) == len(names),
                60,
                "every session's agent to run",
            )
            for _ in range(plan.rounds):
                one_round(plan, rng, hosts, link, record)
            for name, handle in handles.items():
                waited = fleet.wait(handle, timeout_s=plan.steps * plan.step_s * 3 + 120)
                record.event(f"{name} {waited.state} on {fleet.task_host(handle)}")
                assert (waited.state, waited.exit) == ("completed", 0), (name, waited)
    finally:
        for host in hosts:
            signal_all(host, signal.SIGCONT)
        link.restore()
        fleet.close()
    marks = read_marks(tmp_path / "marks.txt")
    for name in names:
        starts = [m.host for m in marks if m.kind == "start" and m.session == name]
        print(f"{name} started on: {' '.join(starts)}")
    moved = sorted(failovers(record, marks))
    print(f"samples: {record.samples}; overlaps: {record.overlaps}")
    print(
        "stale agents after a thaw stopped within: "
        + ", ".join(f"{stale_s:.2f}s" for _, _, stale_s in record.thaws)
    )
    if moved:
        p95 = moved[min(len(moved) - 1, round(0.95 * (len(moved) - 1)))]
        print(
            f"failover (kill or freeze to running elsewhere), {len(moved)} moves: "
            f"p50 {statistics.median(moved):.1f}s, p95 {p95:.1f}s, max {moved[-1]:.1f}s "
            f"(lease {plan.lease_s:g}s + grace {plan.grace_s:g}s)"
        )
    check(plan, record, marks, bare, names)


@pytest.mark.timeout(420)
def test_cluster_chaos_short(
    tmp_path: Path, link: CuttableLink, hosts: list[HostProc], pg_url: str
) -> None:
    chaos(SHORT, tmp_path, link, hosts, pg_url)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_cluster_chaos_long(
    tmp_path: Path, link: CuttableLink, hosts: list[HostProc], pg_url: str
) -> None:
    chaos(LONG, tmp_path, link, hosts, pg_url)
