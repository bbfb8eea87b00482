"""Verification: run a session's `verify` against one commit in a scratch worktree, fleet-wide."""

from __future__ import annotations

import inspect
import logging
import os
import shlex
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psutil
from anyio.abc import Process, TaskGroup, TaskStatus

from agentherd.sessions.config import command_argv
from agentherd.supervisor.files import private
from agentherd.supervisor.git import gitops
from agentherd.supervisor.process import procs, runid

log = logging.getLogger("herd.verify")

STOP_GRACE_S = 2.0
"""Time a timed-out verification gets between SIGTERM and SIGKILL: test runners clean up fast."""

KILL_WAIT_S = 5.0
"""How long SIGKILL may take to empty the process tree before we give up waiting on it."""

POLL_S = 0.05
"""Interval of the process-table scans while waiting for a stopped tree to be gone."""

TAIL_LINES = 20
"""Lines of output kept in a result: enough for a test runner's summary and first failure."""

TAIL_MAX_BYTES = 4096
"""Byte cap on the kept output, so one enormous line cannot bloat the store or the event log."""

VERIFY_TAG_VAR = "HERD_VERIFY_TAG"
"""Environment tag naming one verification, for a person looking at the process table."""

SHELL_NOT_FOUND = 127
"""Exit status /bin/sh gives when the command it was asked to run does not exist."""

# Variables that would point git inside the verify command at the daemon's repository or
# index rather than the scratch worktree's.
_GIT_REPOINT_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


@dataclass(frozen=True)
class VerifyResult:
    """How one verification of one commit ended.

    `exit_code` is the last step's exit status (negative: killed by that signal), None when
    it never finished; `duration_s` includes the checkout; `error` says why it could not run.
    """

    sha: str
    passed: bool
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    started_at: str
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VerifyResult:
        """The result `to_json` described (unknown keys are ignored)."""
        return cls(
            sha=str(data["sha"]),
            passed=bool(data["passed"]),
            exit_code=None if data.get("exit_code") is None else int(data["exit_code"]),
            timed_out=bool(data.get("timed_out", False)),
            duration_s=float(data.get("duration_s", 0.0)),
            output_tail=str(data.get("output_tail", "")),
            started_at=str(data.get("started_at", "")),
            error=data.get("error"),
        )


def _shown(command: list[str] | str) -> str:
    """The command as a person would type it, for messages."""
    return command if isinstance(command, str) else shlex.join(command)


def _read_tail(fd: int, start: int) -> str:
    """The last TAIL_LINES lines (at most TAIL_MAX_BYTES) written to `fd` after offset `start`."""
    end = os.fstat(fd).st_size
    begin = max(start, end - TAIL_MAX_BYTES)
    data = os.pread(fd, end - begin, begin)
    lines = data.decode("utf-8", "replace").splitlines()
    if begin > start and len(lines) > 1:
        lines = lines[1:]  # the first line was cut by the byte cap
    return "\n".join(lines[-TAIL_LINES:])


@dataclass
class _Step:
    """One step's outcome: exit status, or timed out, or could not start."""

    exit_code: int | None = None
    timed_out: bool = False
    error: str | None = None


async def _run_step(
    command: list[str] | str,
    cwd: Path,
    env: Mapping[str, str],
    log_fd: int,
    deadline: float,
    started: list[tuple[runid.RunIdentity, Process]],
) -> _Step:
    """Run one command in its own process group until it exits or `deadline` passes."""
    argv = command_argv(command)
    if not argv:
        return _Step(error="cannot run an empty command")
    before = time.time()
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return _Step(error=f"cannot run {_shown(command)!r}: {exc.strerror or exc}")
    try:
        create_time = psutil.Process(process.pid).create_time()
    except psutil.Error:
        create_time = before
    tag = env[runid.TAG_VAR]
    started.append((runid.RunIdentity(process.pid, process.pid, create_time, tag), process))
    with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
        code = await process.wait()
        if isinstance(command, str) and code == SHELL_NOT_FOUND:
            return _Step(code, error=f"cannot run {command!r}: command not found (sh exit 127)")
        return _Step(code)
    return _Step(timed_out=True)


async def _stop_all(
    started: list[tuple[runid.RunIdentity, Process]], stop_grace_s: float = STOP_GRACE_S
) -> None:
    """Stop whatever is left of every step's tree and reap each step's leader."""
    for identity, process in started:
        gone = await procs.stop_tree(identity, signal.SIGTERM, stop_grace_s, KILL_WAIT_S, POLL_S)
        if not gone:
            log.warning("verification processes of %s survived SIGKILL", identity.tag)
        with anyio.move_on_after(KILL_WAIT_S):  # only a process stuck in the kernel waits
            await process.wait()


async def run_verification(
    worktree: Path,
    sha: str,
    command: list[str] | str,
    setup: list[str] | str | None,
    timeout_s: float,
    scratch_root: Path,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    stop_grace_s: float = STOP_GRACE_S,
) -> VerifyResult:
    """Check out `sha` in a scratch worktree, run `setup` then `command` there, report.

    Setup and command together get `timeout_s`; on timeout every process of the tree (found
    by group and env tag) gets SIGTERM, then SIGKILL `stop_grace_s` later. The scratch worktree
    never outlives the call, also when it is cancelled. Output goes to `log_path` (appended) or
    a temp file.
    """
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()

    def result(rev: str, step: _Step, tail: str = "") -> VerifyResult:
        """The result of the verification of `rev` as far as it got."""
        passed = step.exit_code == 0 and step.error is None and not step.timed_out
        duration = time.monotonic() - clock
        return VerifyResult(
            rev, passed, step.exit_code, step.timed_out, duration, tail, started_at, step.error
        )

    try:
        full = await anyio.to_thread.run_sync(gitops.resolve_commit, worktree, sha)
    except (ValueError, gitops.NotAGitRepo, gitops.GitError) as exc:
        return result(sha, _Step(error=f"cannot check out {sha}: {exc}"))
    try:
        log_fd, start = await anyio.to_thread.run_sync(_open_log, log_path, full, started_at)
    except OSError as exc:
        return result(full, _Step(error=f"cannot write the verify log {log_path}: {exc}"))
    # The tag names the folder too: a new daemon finding the folder left by a killed one knows
    # which processes are provably this verification's (they carry the tag in their env, the
    # git adding and removing the worktree too).
    tag = uuid.uuid4().hex
    dest = Path(scratch_root) / f"{full[:12]}-{tag}"
    checkout = gitops.GitDeadline(timeout_s)  # the checkout counts against verify_timeout
    scratch = gitops.scratch_worktree(worktree, full, dest, checkout, {VERIFY_TAG_VAR: tag})
    try:
        try:
            await anyio.to_thread.run_sync(private.make_folder, Path(scratch_root))
            where = await _checkout(scratch, checkout)
        except gitops.GitTimeout:
            error = f"checkout timed out after {timeout_s:g}s (verify_timeout)"
            return result(full, _Step(timed_out=True, error=error))
        except (OSError, ValueError, gitops.GitError) as exc:
            return result(full, _Step(error=f"cannot check out {full}: {exc}"))
        try:
            outcome = await _run_steps(
                where,
                full,
                command,
                setup,
                timeout_s,
                env,
                log_fd,
                tag,
                checkout.remaining_s(),
                stop_grace_s,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(scratch.__exit__, None, None, None)
        tail = await anyio.to_thread.run_sync(_read_tail, log_fd, start)
    finally:
        os.close(log_fd)
    return result(full, outcome, tail)


async def _checkout(scratch: AbstractContextManager[Path], checkout: gitops.GitDeadline) -> Path:
    """Enter the scratch worktree; a cancellation meanwhile kills the checkout's git at once.

    The thread itself is waited for (shielded): a worktree that was made must be removed,
    here when the cancellation lands after the checkout, else by the caller.
    """
    where: Path | None = None

    async def kill_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            checkout.cancel()  # harmless once the checkout is over: no git runs then

    failed: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_when_cancelled)
            with anyio.CancelScope(shield=True):
                try:
                    where = await anyio.to_thread.run_sync(scratch.__enter__)
                except Exception as exc:  # raised below, not wrapped in an exception group
                    failed = exc
            tg.cancel_scope.cancel()
    except BaseException:
        if where is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(scratch.__exit__, None, None, None)
        raise
    if failed is not None:
        raise failed
    assert where is not None  # the thread returned it
    return where


def _open_log(log_path: Path | None, sha: str, started_at: str) -> tuple[int, int]:
    """An fd for the verification's output, and the offset where this verification's begins."""
    if log_path is None:
        with tempfile.TemporaryFile() as temp:
            return os.dup(temp.fileno()), 0
    private.make_folder(log_path.parent)
    fd = private.open_file(log_path, os.O_RDWR | os.O_APPEND)
    os.write(fd, f"--- herd verify {sha} at {started_at} ---\n".encode())
    return fd, os.fstat(fd).st_size


async def _run_steps(
    where: Path,
    sha: str,
    command: list[str] | str,
    setup: list[str] | str | None,
    timeout_s: float,
    env: Mapping[str, str] | None,
    log_fd: int,
    tag: str,
    left_s: float,
    stop_grace_s: float = STOP_GRACE_S,
) -> _Step:
    """Setup (if any) then command in `where` within `left_s`; the tree is stopped after.

    `left_s` is what the checkout left of `timeout_s` (the limit named in messages).
    """
    full_env = {k: v for k, v in os.environ.items() if k not in _GIT_REPOINT_VARS}
    full_env.update(env or {})
    full_env.update({"HERD_VERIFY_SHA": sha, VERIFY_TAG_VAR: tag, runid.TAG_VAR: tag})
    deadline = anyio.current_time() + left_s
    started: list[tuple[runid.RunIdentity, Process]] = []
    try:
        if setup is not None:
            step = await _run_step(setup, where, full_env, log_fd, deadline, started)
            if step.timed_out:
                return _Step(timed_out=True, error=f"verify_setup timed out after {timeout_s:g}s")
            if step.error is not None:
                return _Step(step.exit_code, error=f"verify_setup failed: {step.error}")
            if step.exit_code != 0:
                return _Step(step.exit_code, error=f"verify_setup failed: exit {step.exit_code}")
        step = await _run_step(command, where, full_env, log_fd, deadline, started)
        if step.timed_out:
            step.error = f"verify timed out after {timeout_s:g}s"
        return step
    finally:
        with anyio.CancelScope(shield=True):
            await _stop_all(started, stop_grace_s)


@dataclass
class _Job:
    """A submitted verification waiting for its turn."""

    sha: str
    job: Callable[[], Awaitable[VerifyResult]]
    on_done: Callable[[VerifyResult], Awaitable[None] | None]
    submitted_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


class VerificationQueue:
    """One verification per session at a time, newest checkpoint first, few across the fleet."""

    def __init__(self, max_concurrent: int = 2) -> None:
        """Allow at most `max_concurrent` verifications to run at once."""
        self._limiter = anyio.CapacityLimiter(max_concurrent)
        self._pending: dict[str, _Job] = {}
        self._active: set[str] = set()
        self._tg: TaskGroup | None = None

    def submit(
        self,
        session: str,
        sha: str,
        job: Callable[[], Awaitable[VerifyResult]],
        on_done: Callable[[VerifyResult], Awaitable[None] | None],
    ) -> str | None:
        """Queue `job` for `session`; returns the sha of the pending job it replaced, if any.

        The replaced (older, never started) checkpoint is skipped; the caller records that.
        """
        old = self._pending.get(session)
        self._pending[session] = _Job(sha, job, on_done)
        self._start(session)
        return old.sha if old is not None and old.sha != sha else None

    def cancel(self, session: str) -> str | None:
        """Drop the session's pending job (a running one finishes); returns its sha, if any."""
        old = self._pending.pop(session, None)
        return old.sha if old is not None else None

    def pending(self, session: str) -> str | None:
        """The sha waiting to be verified for `session`, if any."""
        job = self._pending.get(session)
        return job.sha if job is not None else None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve submitted jobs until cancelled (start it in the daemon's task group)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                for session in list(self._pending):
                    self._start(session)
                task_status.started()
                await anyio.sleep_forever()
            finally:
                self._tg = None

    def _start(self, session: str) -> None:
        """Start the session's worker unless one runs or the queue is not served yet."""
        if self._tg is not None and session not in self._active:
            self._active.add(session)
            self._tg.start_soon(self._drain, session)

    async def _drain(self, session: str) -> None:
        """Run the session's newest pending job, again and again, until none is left."""
        try:
            while session in self._pending:
                async with self._limiter:
                    item = self._pending.pop(session, None)
                    if item is None:
                        break
                    result = await self._run_job(session, item)
                try:
                    done = item.on_done(result)
                    if inspect.isawaitable(done):
                        await done
                except Exception:
                    log.exception("on_done of verification %s of %s failed", item.sha, session)
        finally:
            self._active.discard(session)

    @staticmethod
    async def _run_job(session: str, item: _Job) -> VerifyResult:
        """The job's result; a job that raised is a failed verification, not a dead daemon."""
        try:
            return await item.job()
        except Exception as exc:
            log.exception("verification %s of %s crashed", item.sha, session)
            error = f"verification crashed: {exc!r}"
            return VerifyResult(item.sha, False, None, False, 0.0, "", item.submitted_at, error)
