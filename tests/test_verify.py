"""Verification runs against one commit in a scratch worktree, and the fleet-wide queue."""

from __future__ import annotations

import functools
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from conftest import git, make_repo

from agentherd.supervisor.checks.verify import (
    TAIL_LINES,
    TAIL_MAX_BYTES,
    VerificationQueue,
    VerifyResult,
    run_verification,
)

PY = sys.executable


@pytest.fixture
def anyio_backend() -> str:
    """The daemon runs on asyncio."""
    return "asyncio"


def py(code: str) -> list[str]:
    """An argv running `code` with this Python."""
    return [PY, "-c", textwrap.dedent(code)]


def commit(repo: Path, files: dict[str, str], message: str = "change") -> str:
    """Commit `files` in `repo`; the new commit's sha."""
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def worktrees(repo: Path) -> list[Path]:
    """The worktrees git knows for `repo`."""
    out = git(repo, "worktree", "list", "--porcelain")
    return [
        Path(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("worktree ")
    ]


def assert_clean(repo: Path, scratch: Path) -> None:
    """Only the main worktree is left, and nothing under the scratch folder."""
    assert worktrees(repo) == [repo.resolve()]
    assert not scratch.exists() or list(scratch.iterdir()) == []


def gone(pid: int) -> bool:
    """True when no live (non-zombie) process has `pid`."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def until(predicate: Callable[[], Any], timeout_s: float = 15.0) -> None:
    """Wait until `predicate()` is truthy; fail after `timeout_s`."""
    with anyio.fail_after(timeout_s):
        while not predicate():
            await anyio.sleep(0.02)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repo whose first commit has feature.txt = "good"."""
    return make_repo(tmp_path / "repo", {"feature.txt": "good"})


CHECK_FILE = py("""
    import os, pathlib, sys
    text = pathlib.Path("feature.txt").read_text()
    print("feature is", text, "at", os.environ["HERD_VERIFY_SHA"], flush=True)
    sys.exit(0 if text == os.environ.get("WANT", "good") else 1)
""")


@pytest.mark.anyio
async def test_passing_verify_in_scratch_worktree(repo: Path, tmp_path: Path) -> None:
    """A committed file is there; output goes to the log; the scratch worktree is removed."""
    sha = git(repo, "rev-parse", "HEAD").strip()
    log = tmp_path / "logs" / "verify.log"
    scratch = tmp_path / "scratch"
    result = await run_verification(repo, "HEAD", CHECK_FILE, None, 30, scratch, log_path=log)
    assert result.passed and result.exit_code == 0 and not result.timed_out
    assert result.error is None and result.sha == sha
    assert result.output_tail == f"feature is good at {sha}"
    assert f"herd verify {sha}" in log.read_text()
    assert VerifyResult.from_json(result.to_json()) == result
    assert_clean(repo, scratch)
    again = await run_verification(repo, sha, CHECK_FILE, None, 30, scratch, log_path=log)
    assert again.output_tail == result.output_tail  # only this run's output
    assert log.read_text().count("feature is good") == 2


@pytest.mark.anyio
async def test_sees_the_commit_not_the_dirty_worktree(repo: Path, tmp_path: Path) -> None:
    """An uncommitted change does not count, and the agent's dirty file is left alone."""
    (repo / "feature.txt").write_text("bad")
    (repo / "untracked.txt").write_text("agent notes")
    status = git(repo, "status", "--porcelain")
    scratch = tmp_path / "scratch"
    result = await run_verification(repo, "HEAD", CHECK_FILE, None, 30, scratch)
    assert result.passed, result
    assert (repo / "feature.txt").read_text() == "bad"
    assert (repo / "untracked.txt").read_text() == "agent notes"
    assert git(repo, "status", "--porcelain") == status
    assert_clean(repo, scratch)


@pytest.mark.anyio
async def test_older_commit_while_head_moved_on(repo: Path, tmp_path: Path) -> None:
    """Each commit is verified as it was, whatever HEAD is now."""
    first = git(repo, "rev-parse", "HEAD").strip()
    second = commit(repo, {"feature.txt": "better"})
    scratch = tmp_path / "scratch"
    old = await run_verification(repo, first, CHECK_FILE, None, 30, scratch)
    new = await run_verification(repo, second, CHECK_FILE, None, 30, scratch, {"WANT": "better"})
    assert old.passed and old.sha == first
    assert new.passed and new.sha == second
    assert_clean(repo, scratch)


@pytest.mark.anyio
async def test_failing_verify_keeps_the_output_tail(repo: Path, tmp_path: Path) -> None:
    """Exit 1 fails; the tail keeps the last lines of stdout and stderr together."""
    command = py("""
        import sys
        for i in range(1, 30):
            print(f"line {i}", flush=True)
        print("line 30", file=sys.stderr, flush=True)
        sys.exit(1)
    """)
    scratch = tmp_path / "scratch"
    result = await run_verification(repo, "HEAD", command, None, 30, scratch)
    assert not result.passed and result.exit_code == 1 and result.error is None
    expected = [f"line {i}" for i in range(31 - TAIL_LINES, 31)]
    assert result.output_tail.splitlines() == expected
    assert_clean(repo, scratch)


@pytest.mark.anyio
async def test_output_tail_is_capped_in_bytes(repo: Path, tmp_path: Path) -> None:
    """One huge line does not bloat the result."""
    command = py('print("x" * 100_000); print("summary: 3 passed")')
    result = await run_verification(repo, "HEAD", command, None, 30, tmp_path / "scratch")
    assert result.passed
    assert len(result.output_tail.encode()) <= TAIL_MAX_BYTES
    assert result.output_tail.endswith("summary: 3 passed")


@pytest.mark.anyio
async def test_setup_runs_first_in_the_scratch_worktree(repo: Path, tmp_path: Path) -> None:
    """A shell-string setup prepares the tree the command then checks."""
    command = py("import pathlib, sys; sys.exit(0 if pathlib.Path('prepared').exists() else 1)")
    scratch = tmp_path / "scratch"
    result = await run_verification(repo, "HEAD", command, "echo ok > prepared", 30, scratch)
    assert result.passed, result
    assert not (repo / "prepared").exists()
    assert_clean(repo, scratch)


@pytest.mark.anyio
async def test_failing_setup_fails_without_running_the_command(repo: Path, tmp_path: Path) -> None:
    """A setup exit N is a failed verification; the command never runs."""
    setup = py("import sys; print('installing', flush=True); sys.exit(3)")
    command = py("print('command ran')")
    scratch = tmp_path / "scratch"
    result = await run_verification(repo, "HEAD", command, setup, 30, scratch)
    assert not result.passed and result.exit_code == 3
    assert result.error == "verify_setup failed: exit 3"
    assert "installing" in result.output_tail and "command ran" not in result.output_tail
    assert_clean(repo, scratch)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "command", [["no-such-program-herd-test"], ["./missing.sh"], "no-such-program-herd-test"]
)
async def test_command_that_does_not_exist(
    repo: Path, tmp_path: Path, command: list[str] | str
) -> None:
    """A missing program is a failed verification that says it could not run."""
    scratch = tmp_path / "scratch"
    result = await run_verification(repo, "HEAD", command, None, 30, scratch)
    assert not result.passed
    assert result.error is not None and result.error.startswith("cannot run"), result.error
    assert_clean(repo, scratch)


@pytest.mark.anyio
async def test_unknown_commit(repo: Path, tmp_path: Path) -> None:
    """A sha the repo does not have fails with a message and checks nothing out."""
    scratch = tmp_path / "scratch"
    result = await run_verification(repo, "0" * 40, CHECK_FILE, None, 30, scratch)
    assert not result.passed and result.error is not None
    assert result.error.startswith("cannot check out")
    assert_clean(repo, scratch)


GRANDCHILD = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
time.sleep(600)
"""


@pytest.mark.pidns
@pytest.mark.anyio
async def test_timeout_kills_the_whole_tree(repo: Path, tmp_path: Path) -> None:
    """A setsid grandchild that ignores SIGTERM is killed too; the result says timed out."""
    command = py(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {GRANDCHILD!r}], start_new_session=True)
        time.sleep(600)
    """)
    pid_file = tmp_path / "grandchild.pid"
    scratch = tmp_path / "scratch"
    env = {"PID_FILE": str(pid_file)}
    # A short grace: the grandchild ignores SIGTERM, so the whole grace would pass in real time.
    result = await run_verification(repo, "HEAD", command, None, 2, scratch, env, stop_grace_s=0.2)
    assert result.timed_out and not result.passed and result.exit_code is None
    assert result.error == "verify timed out after 2s"
    assert gone(int(pid_file.read_text()))
    assert_clean(repo, scratch)


@pytest.mark.anyio
async def test_cancelled_caller_leaves_nothing_behind(repo: Path, tmp_path: Path) -> None:
    """Cancelling mid-run stops the command and removes the scratch worktree."""
    started = tmp_path / "started"
    command = py("""
        import os, pathlib, time
        pathlib.Path(os.environ["STARTED"]).write_text(str(os.getpid()))
        time.sleep(600)
    """)
    scratch = tmp_path / "scratch"
    results: list[VerifyResult] = []

    async def verify() -> None:
        env = {"STARTED": str(started)}
        results.append(await run_verification(repo, "HEAD", command, None, 60, scratch, env))

    async with anyio.create_task_group() as tg:
        tg.start_soon(verify)
        await until(lambda: started.exists() and started.read_text())
        tg.cancel_scope.cancel()
    assert results == []
    assert gone(int(started.read_text()))
    assert_clean(repo, scratch)


def fake_result(sha: str) -> VerifyResult:
    """A passing result for `sha`."""
    return VerifyResult(sha, True, 0, False, 0.0, "", "2024-01-01T00:00:00+00:00")


class Jobs:
    """Verification jobs that wait for the test's go, recording how many run at once."""

    def __init__(self, gated: set[str]) -> None:
        """Jobs for shas in `gated` wait for `release`; others finish at once."""
        self.gates = {sha: anyio.Event() for sha in gated}
        self.started: list[str] = []
        self.done: list[str] = []
        self.running: set[str] = set()
        self.most = 0

    def job(self, sha: str) -> Callable[[], Any]:
        """The job verifying `sha`."""

        async def run() -> VerifyResult:
            self.started.append(sha)
            self.running.add(sha)
            self.most = max(self.most, len(self.running))
            if sha in self.gates:
                await self.gates[sha].wait()
            self.running.discard(sha)
            return fake_result(sha)

        return run

    def on_done(self, result: VerifyResult) -> None:
        """Record a finished verification."""
        self.done.append(result.sha)


@pytest.mark.anyio
async def test_queue_one_per_session_newest_first() -> None:
    """While sha1 runs, sha3 replaces pending sha2: sha2 is skipped, sha3 runs after sha1."""
    jobs = Jobs(gated={"sha1"})
    queue = VerificationQueue(max_concurrent=2)
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        assert queue.submit("api", "sha1", jobs.job("sha1"), jobs.on_done) is None
        await until(lambda: jobs.started == ["sha1"])
        assert queue.submit("api", "sha2", jobs.job("sha2"), jobs.on_done) is None
        assert queue.submit("api", "sha3", jobs.job("sha3"), jobs.on_done) == "sha2"
        assert queue.pending("api") == "sha3"
        await anyio.wait_all_tasks_blocked()
        assert jobs.started == ["sha1"]
        jobs.gates["sha1"].set()
        await until(lambda: jobs.done == ["sha1", "sha3"])
        assert jobs.started == ["sha1", "sha3"] and jobs.most == 1
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_queue_limits_the_fleet_and_cancel_drops_pending() -> None:
    """At most max_concurrent run at once; jobs submitted before `run` wait for it."""
    jobs = Jobs(gated={"a1", "b1", "c1"})
    queue = VerificationQueue(max_concurrent=2)
    for session in "abc":
        queue.submit(session, f"{session}1", jobs.job(f"{session}1"), jobs.on_done)
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        await until(lambda: len(jobs.running) == 2)
        await anyio.wait_all_tasks_blocked()
        assert len(jobs.started) == 2
        first, second = jobs.started
        queue.submit(first[0], f"{first[0]}2", jobs.job(f"{first[0]}2"), jobs.on_done)
        assert queue.cancel(first[0]) == f"{first[0]}2"
        assert queue.cancel(first[0]) is None
        jobs.gates[first].set()
        await until(lambda: len(jobs.started) == 3)
        for gate in jobs.gates.values():
            gate.set()
        await until(lambda: len(jobs.done) == 3)
        assert sorted(jobs.done) == ["a1", "b1", "c1"] and jobs.most == 2
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_queue_survives_a_crashing_job() -> None:
    """A job that raises is reported as a failed verification; the queue keeps serving."""
    results: list[VerifyResult] = []

    async def crash() -> VerifyResult:
        raise RuntimeError("boom")

    async def record(result: VerifyResult) -> None:
        results.append(result)

    queue = VerificationQueue()
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        queue.submit("api", "sha1", crash, record)
        await until(lambda: results)
        queue.submit("api", "sha2", Jobs(set()).job("sha2"), record)
        await until(lambda: len(results) == 2)
        tg.cancel_scope.cancel()
    assert not results[0].passed and "boom" in (results[0].error or "")
    assert results[1].passed


@pytest.mark.anyio
async def test_queue_runs_real_verifications(repo: Path, tmp_path: Path) -> None:
    """The daemon's use: run_verification jobs for two commits of one session."""
    first = git(repo, "rev-parse", "HEAD").strip()
    second = commit(repo, {"feature.txt": "bad"})
    scratch = tmp_path / "scratch"
    results: list[VerifyResult] = []
    queue = VerificationQueue()
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        for sha in (first, second):
            job = functools.partial(run_verification, repo, sha, CHECK_FILE, None, 30, scratch)
            assert queue.submit("api", sha, job, results.append) is None
            await until(lambda: queue.pending("api") is None)  # taken up: the next one waits
        await until(lambda: len(results) == 2)
        tg.cancel_scope.cancel()
    assert [(r.sha, r.passed) for r in results] == [(first, True), (second, False)]
    assert_clean(repo, scratch)
