"""Issue 8, cases 2, 8, 9 and 12: rescued work is never lost, a run keeps its worktree, a killed
verification is cleaned up and redone, and filter drivers cannot hold herd up."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest
from conftest import FAST, HERD, PY, Herd, git, make_repo, script, wait_until

from agentherd.supervisor.checks.verify import VERIFY_TAG_VAR, run_verification
from agentherd.supervisor.files.paths import prepare_state_dir
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.git import gitops

REF = "refs/herd/api/rescue/3"


def unreachable(repo: Path) -> str:
    """What `git fsck` finds that no ref (reflogs aside) reaches.

    A verification's scratch worktree being added or removed is a half-written worktree to
    fsck (it exits 8), and the daemon may start one at any moment, so ask again until fsck
    sees a settled repository.
    """

    def settled_fsck() -> subprocess.CompletedProcess[str] | None:
        result = subprocess.run(
            ["git", "fsck", "--unreachable", "--no-reflogs", "--no-progress"],
            cwd=repo,
            capture_output=True,
            text=True,
        )
        return result if result.returncode == 0 else None

    found: subprocess.CompletedProcess[str] = wait_until(
        settled_fsck, 30, "git fsck to see no half-written verification worktree", poll_s=0.1
    )
    return found.stdout


def slow_filter(repo: Path, kind: str, marker: Path | None = None) -> None:
    """Route every file through a filter driver that takes 30 s (a stuck git-lfs, say)."""
    touch = f"touch {marker}; " if marker is not None else ""
    git(repo, "config", f"filter.slow.{kind}", f"{touch}sleep 30; cat")
    git(repo, "config", f"filter.slow.{'smudge' if kind == 'clean' else 'clean'}", "cat")
    (repo / ".gitattributes").write_text("* filter=slow\n")


@pytest.fixture
def slow_herd(tmp_path: Path) -> Iterator[Herd]:
    """A Herd whose rescue and reset each get one second."""
    instance = Herd(tmp_path, dataclasses.replace(FAST, git_write_timeout_s=1.0))
    yield instance
    instance.down()


# --- case 2: a rescue ref is never overwritten ----------------------------------------------


def test_a_second_rescue_of_the_same_run_keeps_the_first(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("the agent's edit\n")
    (repo / "new.py").write_text("print('work')\n")
    first = gitops.save_rescue(repo, REF, "rescue of run 3")
    # A daemon killed mid-reset leaves a half-reset tree, which the next daemon rescues again.
    git(repo, "checkout", "--", "README.md")
    second = gitops.save_rescue(repo, REF, "rescue of run 3")
    assert first is not None and second is not None
    assert first.ref == REF and second.ref == f"{REF}.2" and second.earlier == (REF,)
    assert git(repo, "rev-parse", REF).strip() == first.sha
    assert git(repo, "rev-parse", f"{REF}.2").strip() == second.sha
    assert git(repo, "show", f"{REF}:README.md") == "the agent's edit\n"
    found = unreachable(repo)
    assert first.sha not in found and second.sha not in found
    again = gitops.save_rescue(repo, REF, "rescue of run 3")
    assert again == gitops.SavedRef(f"{REF}.2", second.sha, (REF,)), "the same tree: no copy"


@pytest.mark.parametrize("name", ["index.lock", "HEAD.lock", "refs/heads/main.lock"])
def test_a_reset_removes_a_stale_lock_never_one_a_live_process_holds(
    tmp_path: Path, name: str
) -> None:
    """A git killed mid-commit (a run's SIGKILL, a fenced host's stop) leaves the index's,
    HEAD's or the branch's lock: every reset, and every commit of the next run, fails on it."""
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "README.md").write_text("dirty\n")
    lock = repo / ".git" / name
    holder = subprocess.Popen(
        [PY, "-c", f"f = open({str(lock)!r}, 'w'); print('held', flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(gitops.GitError, match="held by a live"):
            gitops.reset_worktree(repo, base, deadline=gitops.GitDeadline(0.3))
        assert lock.exists() and (repo / "README.md").read_text() == "dirty\n"
    finally:
        holder.communicate("\n", timeout=10)
    gitops.reset_worktree(repo, base, deadline=gitops.GitDeadline(10))  # now stale: removed
    assert not lock.exists() and (repo / "README.md").read_text() == "hello\n"
    (repo / "next.txt").write_text("the next run's work\n")
    git(repo, "add", "next.txt")
    git(repo, "commit", "-q", "-m", "the next run commits")


# --- case 12: filter drivers are bounded ------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_rescue_stuck_in_a_clean_filter_is_killed_at_its_deadline(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    slow_filter(repo, "clean")
    (repo / "README.md").write_text("work\n")
    began = time.monotonic()
    with pytest.raises(gitops.GitTimeout):
        gitops.save_rescue(repo, REF, "m", deadline=gitops.GitDeadline(0.5))
    # The filter sleeps 30 s: 20 s tells a kill from a wait, with room for a loaded machine.
    assert time.monotonic() - began < 20, "git and its filter were killed, not waited for"
    assert git(repo, "for-each-ref", "refs/herd") == ""


def _crash_once_agent(marker: Path) -> str:
    """An agent that leaves a dirty file and crashes on its first run, and succeeds after."""
    return script(f"""
        import pathlib, sys
        marker = pathlib.Path({str(marker)!r})
        if not marker.exists():
            marker.write_text("x")
            pathlib.Path("work.txt").write_text("unsaved work\\n")
            sys.exit(3)
    """)


def _killed_mid_commit_agent(marker: Path) -> str:
    """First run: a step of work, then killed in its commit (it leaves what a SIGKILLed `git
    commit` does: HEAD's and the branch's locks). The next run commits, or fails on a lock."""
    return script(f"""
        import os, pathlib, signal, subprocess
        ident = ["-c", "user.name=agent", "-c", "user.email=agent@example.com"]
        marker = pathlib.Path({str(marker)!r})
        pathlib.Path("work.txt").write_text("step\\n")
        subprocess.run(["git", "add", "work.txt"], check=True)
        if not marker.exists():
            marker.write_text("x")
            pathlib.Path(".git/HEAD.lock").write_text("")
            pathlib.Path(".git/refs/heads/main.lock").write_text("")
            os.kill(os.getpid(), signal.SIGKILL)
        subprocess.run(["git", *ident, "commit", "-q", "-m", "the next run"], check=True)
    """)


@pytest.mark.timeout(90)
def test_a_run_killed_in_its_commit_restarts_and_commits(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {_killed_mid_commit_agent(herd.root / "ran")}
        restart_delay = 0
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed", "failed", timeout_s=60)
    assert herd.status("api")["state"] == "completed", herd.events("api")
    assert git(repo, "log", "-1", "--format=%s").strip() == "the next run"
    assert not (repo / ".git" / "HEAD.lock").exists()
    assert not (repo / ".git" / "refs" / "heads" / "main.lock").exists()


@pytest.mark.timeout(90)
def test_a_crash_whose_rescue_hangs_in_a_filter_is_not_reset(slow_herd: Herd) -> None:
    repo = make_repo(slow_herd.root / "repo")
    slow_filter(repo, "clean")
    slow_herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {_crash_once_agent(slow_herd.root / "ran")}
        restart_delay = 0
    """)
    slow_herd.start().call("start", name="api")
    slow_herd.wait_state("api", "completed", timeout_s=30)
    failed = slow_herd.events("api", "rescue-failed")
    assert len(failed) == 1 and failed[0]["data"]["step"] == "rescue"
    assert slow_herd.events("api", "worktree-reset") == []
    assert (repo / "work.txt").read_text() == "unsaved work\n", "the tree was not reset"


@pytest.mark.timeout(90)
def test_stop_does_not_wait_behind_a_rescue(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    in_filter = herd.root / "in-filter"
    slow_filter(repo, "clean", in_filter)
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {_crash_once_agent(herd.root / "ran")}
        restart_delay = 0
    """)
    client = herd.start()
    client.call("start", name="api")
    wait_until(in_filter.exists, 20, "the rescue to be inside the filter")
    began = time.monotonic()
    assert client.call("start", name="api", socket_timeout_s=30)["handle"] == "api/1"
    # The rescue's filter sleeps 30 s: 20 s tells a wait from none on a loaded machine too.
    assert time.monotonic() - began < 20, "start answers at once while a rescue runs"
    began = time.monotonic()
    client.call("stop", name="api", socket_timeout_s=30)
    assert time.monotonic() - began < 20, "stop killed the rescue's git instead of waiting"
    assert herd.status("api")["state"] == "stopped"
    assert [e["run"] for e in herd.events("api", "run-started")] == [1], "no restart after it"
    assert herd.events("api", "restart-cancelled")[0]["data"]["step"] == "rescue"
    assert (repo / "work.txt").read_text() == "unsaved work\n"


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_checkout_time_counts_against_verify_timeout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    slow_filter(repo, "smudge")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    sha = git(repo, "rev-parse", "HEAD").strip()
    scratch = tmp_path / "scratch"
    began = time.monotonic()
    result = await run_verification(repo, sha, "true", None, 1.0, scratch)
    assert time.monotonic() - began < 20  # the smudge filter sleeps 30 s
    assert result.timed_out and not result.passed and "checkout" in (result.error or "")
    assert list(scratch.iterdir()) == [] and str(scratch) not in git(repo, "worktree", "list")


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_a_cancelled_verification_does_not_wait_for_its_checkout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    slow_filter(repo, "smudge")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    sha = git(repo, "rev-parse", "HEAD").strip()
    scratch = tmp_path / "scratch"
    began = time.monotonic()
    with anyio.move_on_after(1.0):
        await run_verification(repo, sha, "true", None, 60.0, scratch)
    assert time.monotonic() - began < 20, "the daemon's shutdown kills a slow checkout"
    assert list(scratch.iterdir()) == [] and str(scratch) not in git(repo, "worktree", "list")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- case 8: a run keeps the worktree it started in ------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["reload", "new-daemon"])
def test_a_crash_after_cwd_changed_rescues_the_run_s_own_tree(herd: Herd, how: str) -> None:
    agents_tree = make_repo(herd.root / "agent")
    persons_tree = make_repo(herd.root / "person")
    (persons_tree / "mine.txt").write_text("a person's uncommitted work\n")
    go = herd.root / "go"
    agent = script(f"""
        import os, pathlib, sys, time
        ran = pathlib.Path({str(go)!r} + ".ran")
        if ran.exists():
            sys.exit(0)  # a later run: nothing to do
        ran.write_text("x")
        pathlib.Path("README.md").write_text("agent edit\\n")
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        sys.exit(3)
    """)
    block = """
        [[session]]
        name = "api"
        cwd = "{cwd}"
        command = {agent}
        restart_delay = 0
    """
    herd.write(block.format(cwd=agents_tree, agent=agent))
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: (agents_tree / "README.md").read_text() == "agent edit\n")
    herd.write(block.format(cwd=persons_tree, agent=agent))
    if how == "reload":
        assert client.call("reload")["changed"] == ["api"]
    else:  # the agent outlives its daemon; the next one reads the new herd.toml and adopts it
        herd.stop_daemon()
        herd.start()
        wait_until(lambda: herd.events("api", "adopted"), what="the run adopted")
    go.write_text("crash now")
    herd.wait_state("api", "completed", timeout_s=30)
    rescue = herd.events("api", "rescue-saved")[0]["data"]
    assert git(agents_tree, "show", f"{rescue['ref']}:README.md") == "agent edit\n"
    assert (agents_tree / "README.md").read_text() == "hello\n", "the agent's tree was reset"
    assert (persons_tree / "mine.txt").read_text() == "a person's uncommitted work\n"
    assert git(persons_tree, "for-each-ref", "refs/herd") == ""
    runs = herd.client.call("events", session="api")
    assert any(e["kind"] == "run-started" and e["run"] == 2 for e in runs)


@pytest.mark.timeout(90)
def test_restart_from_verified_keeps_the_commits_after_it_on_a_ref(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    verified = git(repo, "rev-parse", "HEAD").strip()
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {script("import time; time.sleep(60)")}
        verify = "test ! -e broken.txt"
        stop_grace = "2s"
    """)
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: herd.events("api", "verify-passed"), 20, "the first verification")
    (repo / "broken.txt").write_text("the agent's later commit\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "later work")
    later = git(repo, "rev-parse", "HEAD").strip()
    # A loaded run took over 20 s to verify the later commit (a scratch worktree, then verify).
    wait_until(lambda: herd.events("api", "verify-failed"), 60, "the later commit to fail")
    client.call("restart", name="api", socket_timeout_s=None, **{"from": "verified"})
    assert git(repo, "rev-parse", "HEAD").strip() == verified
    reset = herd.events("api", "worktree-reset")[0]["data"]
    assert reset["kept_ref"] == "refs/herd/api/before-reset/1" and reset["kept_sha"] == later
    assert git(repo, "rev-parse", reset["kept_ref"]).strip() == later
    assert later not in unreachable(repo)
    assert herd.events("api", "rescue-saved") == [], "the tree was clean: nothing to rescue"


# --- case 9: a killed verification is cleaned up and done again ------------------------------


@pytest.mark.timeout(90)
def test_a_new_daemon_removes_a_killed_verification_and_verifies_again(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    sha = git(repo, "rev-parse", "HEAD").strip()
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = ["true"]
        autostart = false
        verify = "true"
    """)
    # What a kill -9 of the daemon during a verification leaves: the checkpoint without a
    # verdict, the scratch worktree registered in git, and the verify command still running.
    state = herd.root / ".herd"
    prepare_state_dir(state)
    store = Store(state / "state.db")
    checkpoint = gitops.head_checkpoint(repo)
    assert checkpoint is not None and store.add_checkpoint("api", checkpoint)
    store.close()
    tag = uuid.uuid4().hex
    scratch = state / "verify" / "api" / f"{sha[:12]}-{tag}"
    git(repo, "worktree", "add", "--detach", "-q", str(scratch), sha)
    # A git killed early in `worktree add` leaves the empty folder herd made and a
    # registration without a `gitdir` file; a daemon killed while it removed one leaves the
    # folder (its registration goes first). A person's own worktree, its folder gone, stays.
    half_made = scratch.with_name(f"{sha[:12]}-{uuid.uuid4().hex}")
    half_made.mkdir()
    (repo / ".git" / "worktrees" / half_made.name).mkdir()
    (repo / ".git" / "worktrees" / half_made.name / "locked").write_text("initializing")
    half_removed = scratch.with_name(f"{sha[:12]}-{uuid.uuid4().hex}")
    git(repo, "worktree", "add", "--detach", "-q", str(half_removed), sha)
    shutil.rmtree(repo / ".git" / "worktrees" / half_removed.name)
    mine = herd.root / "mine"
    git(repo, "worktree", "add", "--detach", "-q", str(mine), sha)
    shutil.rmtree(mine)
    stray = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        cwd=scratch,
        env={**os.environ, VERIFY_TAG_VAR: tag},
        start_new_session=True,
    )
    try:
        herd.start()
        wait_until(lambda: herd.events("api", "verify-passed"), 20, "the checkpoint verified")
        assert herd.events("api", "verify-passed")[0]["data"]["sha"] == sha
        assert stray.wait(timeout=10) is not None, "the killed verification's process stopped"
        assert not scratch.exists() and not half_made.exists() and not half_removed.exists()
        assert sorted(p.name for p in (repo / ".git" / "worktrees").iterdir()) == ["mine"]
        assert str(mine) in git(repo, "worktree", "list", "--porcelain")
        removed = [e for e in herd.client.call("events") if e["kind"] == "verify-leftovers-removed"]
        assert len(removed) == 1 and "removed 3 scratch worktree(s)" in removed[0]["message"]
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


# --- case 2 end to end: kill -9 of the daemon in the middle of a reset ----------------------


def _herd(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `herd` command in `cwd`."""
    return subprocess.run(
        [HERD, *args], cwd=cwd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL
    )


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_kill_9_of_the_daemon_mid_reset_loses_no_rescue(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n", "b.txt": "b\n"})
    smudged = tmp_path / "smudged"
    git(repo, "config", "filter.slow.smudge", f"echo x >> {smudged}; sleep 5; cat")
    git(repo, "config", "filter.slow.clean", "cat")
    (repo / ".gitattributes").write_text("*.txt filter=slow\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    base = git(repo, "rev-parse", "HEAD").strip()
    agent = script(f"""
        import pathlib, sys
        ran = pathlib.Path({str(tmp_path / "ran")!r})
        if ran.exists():
            sys.exit(0)
        ran.write_text("x")
        pathlib.Path("a.txt").write_text("the agent's a\\n")
        pathlib.Path("b.txt").write_text("the agent's b\\n")
        sys.exit(3)
    """)
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "c"\ncwd = "{repo}"\ncommand = {agent}\nrestart_delay = 0\n'
    )
    assert _herd(tmp_path, "up", "--no-tui").returncode == 0
    try:
        # (autostart began the task.) The second file's smudge runs: a.txt is reset, b.txt not yet.
        wait_until(
            lambda: smudged.exists() and len(smudged.read_text().split()) >= 2,
            30,
            "the reset to be half-way",
        )
        daemon_pid = int((tmp_path / ".herd" / "daemon.lock").read_text())
        os.kill(daemon_pid, signal.SIGKILL)
        wait_until(lambda: not psutil.pid_exists(daemon_pid) or _zombie(daemon_pid))
        assert _herd(tmp_path, "up", "--no-tui").returncode == 0
        waited = _herd(tmp_path, "wait", "c", "--timeout", "60")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/herd/c/")
        rescues = dict(line.split() for line in refs.splitlines())
        if "refs/herd/c/rescue/1.2" in rescues:  # the new daemon rescued the half-reset tree
            assert git(repo, "show", "refs/herd/c/rescue/1.2:a.txt") == "a\n"
        assert "refs/herd/c/rescue/1" in rescues
        assert git(repo, "show", "refs/herd/c/rescue/1:a.txt") == "the agent's a\n"
        assert git(repo, "show", "refs/herd/c/rescue/1:b.txt") == "the agent's b\n"
        found = unreachable(repo)
        assert not [sha for sha in rescues.values() if sha in found]
        assert git(repo, "rev-parse", "HEAD").strip() == base
        assert git(repo, "status", "--porcelain") == ""
        assert not (repo / ".git" / "index.lock").exists()
        git(repo, "fsck", "--no-progress")
    finally:
        _herd(tmp_path, "down")


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_kill_9_of_the_daemon_mid_verification_leaks_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    started, go = tmp_path / "verify-started", tmp_path / "go"
    verify = f"test -e {go} || {{ touch {started}; sleep 599; }}"
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "c"\ncwd = "{repo}"\ncommand = ["sleep", "600"]\n'
        f"verify = {json.dumps(verify)}\n"
    )
    _kill_the_daemon_once_started(tmp_path, repo, started, go)


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_kill_9_of_the_daemon_mid_checkout_leaks_nothing(tmp_path: Path) -> None:
    # The daemon dies while `git worktree add` of a verification waits on a filter driver:
    # that git and its filter live on. The next daemon stops them before it removes the
    # worktree, or git would go on writing into a folder (and registration) it just removed.
    repo = make_repo(tmp_path / "repo")
    started, go = tmp_path / "checkout-started", tmp_path / "go"
    smudge = f"test -e {go} || {{ touch {started}; sleep 599; }}; cat"
    git(repo, "config", "filter.slow.smudge", smudge)
    git(repo, "config", "filter.slow.clean", "cat")
    (repo / ".gitattributes").write_text("* filter=slow\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "c"\ncwd = "{repo}"\ncommand = ["sleep", "600"]\nverify = "true"\n'
    )
    _kill_the_daemon_once_started(tmp_path, repo, started, go)


def _kill_the_daemon_once_started(tmp_path: Path, repo: Path, started: Path, go: Path) -> None:
    """`herd up`; once `started` exists (a verification's `sleep 599` is under way), SIGKILL
    the daemon; then, `go` written (no more sleeping), `herd up` again: the checkpoint is
    verified, and nothing of the killed verification is left, folder, registration or process."""
    assert _herd(tmp_path, "up", "--no-tui").returncode == 0
    try:
        wait_until(started.exists, 30, "the verification to reach its sleep")
        daemon_pid = int((tmp_path / ".herd" / "daemon.lock").read_text())
        os.kill(daemon_pid, signal.SIGKILL)
        wait_until(lambda: not psutil.pid_exists(daemon_pid) or _zombie(daemon_pid))
        scratch_root = tmp_path / ".herd" / "verify" / "c"
        assert [p for p in scratch_root.iterdir() if p.is_dir()], "the kill left a worktree"
        assert _sleepers("599"), "the killed daemon's verification is still at work"
        go.write_text("no more sleeping")
        assert _herd(tmp_path, "up", "--no-tui").returncode == 0
        sha = git(repo, "rev-parse", "HEAD").strip()

        def verified() -> bool:
            events = [
                json.loads(x) for x in _herd(tmp_path, "events", "--json").stdout.split("\n") if x
            ]
            return any(e["kind"] == "verify-passed" and e["data"]["sha"] == sha for e in events)

        wait_until(verified, 30, "the checkpoint verified by the new daemon")
        assert _sleepers("599") == [], "the killed verification's processes were stopped"
        assert [p for p in scratch_root.iterdir() if p.is_dir()] == []
        assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
        registrations = repo / ".git" / "worktrees"
        assert not registrations.exists() or not any(registrations.iterdir())
    finally:
        _herd(tmp_path, "down")


def _sleepers(mark: str) -> list[psutil.Process]:
    """Live processes whose command line has `mark` (a filter's or a verification's sleep)."""
    return [
        proc
        for proc in psutil.process_iter(["cmdline", "status"])
        if proc.info["status"] != psutil.STATUS_ZOMBIE
        and mark in " ".join(proc.info["cmdline"] or [])
    ]
