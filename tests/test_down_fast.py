"""A fleet's stop without a scan of every process: the cgroup says when a run is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import Herd, git, make_repo, pid_gone, script, wait_until
from test_cgroups import needs_cgroups

from agentherd.supervisor.git.gitops import changes, changes_from_before
from agentherd.supervisor.process import ancestry, cgroups, gonecheck, proctable
from agentherd.supervisor.process.procs import leader_alive
from agentherd.supervisor.process.runid import RunIdentity

SLEEPER = script('print("ready", flush=True); import time; time.sleep(60)')


def _fleet(herd: Herd, count: int) -> list[str]:
    names = [f"s{i}" for i in range(count)]
    herd.write(
        "".join(
            f'[[session]]\nname = "{name}"\ncommand = {SLEEPER}\ncwd = "{name}"\n\n'
            for name in names
        )
    )
    for name in names:
        (herd.root / name).mkdir()
    herd.start().call("up")
    for name in names:
        wait_until(lambda n=name: herd.status(n)["last_line"] == "ready", what=f"{name} to run")
    return names


@needs_cgroups
@pytest.mark.pidns
def test_stopping_runs_with_cgroups_scans_no_process_and_leaves_nothing(herd: Herd) -> None:
    """Each run's end is read from its leader and its cgroup: stopping a fleet reads no
    process's environment (200 stops' polls of the shared scan were seconds of `herd down`),
    and still nothing of any run is left, and every stop is recorded."""
    names = _fleet(herd, 6)
    pids = [herd.status(name)["pid"] for name in names]
    before = proctable.SHARED.scans
    for name in names:
        assert herd.client.call("stop", name=name, socket_timeout_s=None)["state"] == "stopped"
    assert proctable.SHARED.scans == before, "a stop with a cgroup scanned every process"
    for pid in pids:
        assert pid_gone(pid)
    tags = [e.tag for e in proctable.scan().entries if e.run_dir and str(herd.root) in e.run_dir]
    assert tags == [], "a process of a stopped run is left"
    assert len(herd.events(kind="run-exited")) == len(names)
    assert len(herd.events(kind="stopped")) == len(names)


@needs_cgroups
def test_a_run_is_gone_only_once_its_cgroup_is_empty_and_no_known_process_lives() -> None:
    """The cgroup's word decides only for a cgroup herd made; a live member, a live leader or
    a process proven to be the run's during the stop keeps it from being gone."""
    folder = cgroups.create(f"gonecheck-{uuid.uuid4().hex}")
    assert folder is not None
    identity = RunIdentity(None, None, None, "tag", str(folder))
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        assert gonecheck.gone_by_cgroup(identity, False, {}) is True, "empty: gone"
        assert gonecheck.gone_by_cgroup(identity, True, {}) is False, "its leader lives"
        proc = psutil.Process(sleeper.pid)
        known = {(proc.pid, proc.create_time()): proc}
        assert gonecheck.gone_by_cgroup(identity, False, known) is False, "a known process lives"
        (folder / "cgroup.procs").write_text(str(sleeper.pid))
        assert gonecheck.gone_by_cgroup(identity, False, {}) is False, "a member lives"
        no_cgroup = RunIdentity(None, None, None, "tag", None)
        assert gonecheck.gone_by_cgroup(no_cgroup, False, {}) is None, "no cgroup: scan"
        foreign = RunIdentity(None, None, None, "tag", str(folder.parent))
        assert gonecheck.gone_by_cgroup(foreign, False, {}) is None, "not a run's cgroup: scan"
    finally:
        sleeper.kill()
        sleeper.wait()
        wait_until(lambda: not cgroups.populated(folder), what="the sleeper to leave")
        cgroups.remove(folder)
    assert gonecheck.gone_by_cgroup(identity, False, known) is None, "removed: scan instead"


def test_a_leader_checked_by_start_time_is_not_alive_once_reaped() -> None:
    """The gone-check's leader test: alive while it runs, not once it has ended."""
    child = subprocess.Popen(["sleep", "60"])
    made = psutil.Process(child.pid).create_time()
    identity = RunIdentity(child.pid, child.pid, made, "tag", None)
    assert leader_alive(identity)
    child.kill()
    child.wait()
    assert not leader_alive(identity)


def test_the_daemons_ancestors_are_read_again_under_a_new_parent() -> None:
    """A signal never goes to an ancestor of the daemon; the set read once is read again when
    the parent changes (here: a forked child, whose parent is this process)."""
    assert os.getppid() in ancestry.ancestor_pids()
    assert set(ancestry.ancestor_pids()) >= {p.pid for p in psutil.Process().parents()}
    code = (
        "import os, sys\n"
        "from agentherd.supervisor.process import ancestry\n"
        "first = ancestry.ancestor_pids()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if os.getppid() in ancestry.ancestor_pids() else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0


def test_a_task_that_stayed_on_a_root_commit_changed_nothing(tmp_path: Path) -> None:
    """A report's changes from a root commit read from its object, with the same figures
    as git gives: nothing when the task stayed on it, the commit's own change otherwise."""
    repo = make_repo(tmp_path / "r", {"a": "1\n2\n"})
    root = git(repo, "rev-parse", "HEAD").strip()
    assert changes_from_before(repo, root, root) == ((0, 0, 0), []) == changes(repo, root, root)
    (repo / "b").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "b")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert changes_from_before(repo, root, head) == changes(repo, root, head)
    assert changes_from_before(repo, head, head) == changes(repo, f"{head}~1", head)


def test_the_daemon_process_logs_its_end_before_it_exits(tmp_path: Path) -> None:
    """The daemon `herd up` spawns skips the interpreter's teardown at exit: its log's last
    line is still written, and `herd down` returns with it gone."""
    herd = Herd(tmp_path)
    _write_one(herd)
    up = herd.cli("up", "--no-tui")
    assert up.returncode == 0, up.stderr
    pid = int((tmp_path / ".herd" / "daemon.lock").read_text().split()[0])
    down = herd.cli("down")
    assert down.returncode == 0, down.stderr
    assert pid_gone(pid)
    lines = (tmp_path / ".herd" / "daemon.log").read_text().splitlines()
    assert lines[-1].endswith("daemon stopped")
    assert (tmp_path / ".herd" / "reports" / "a.md").exists()


def _write_one(herd: Herd) -> None:
    herd.write(f'[[session]]\nname = "a"\ncommand = {SLEEPER}\n')
