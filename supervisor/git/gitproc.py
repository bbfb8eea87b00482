"""Git commands that a time limit or another thread can end, filter drivers and all.

A repository's own config may run filter drivers (git-lfs, `filter.<x>.clean/smudge`) inside
`add`, `reset` and `checkout`. They are kept (a rescue must store what git would store) but
bounded: each git command runs in its own process group, and on timeout or cancel the whole
group is killed, so no filter keeps a worker thread, a pipe or the session lock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

PIPE_DRAIN_S = 2.0
"""After the kill, how long to wait for the pipes: a filter that escaped the group may hold
them, and it must not hold us."""

BUSY_POLL_S = 0.1
"""How often a reset re-checks whether another git process still works on the index."""


class GitError(RuntimeError):
    """A git command failed; the message is one line naming the command, folder and cause."""


class GitTimeout(GitError):
    """A git command ran past its limit and its process group was killed."""


class GitCancelled(GitError):
    """The operation was cancelled (a stop) and its running git command killed."""


class GitDeadline:
    """The time budget of one operation (a rescue, a reset, a checkout), cancellable."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._ends_at = time.monotonic() + timeout_s
        self._lock = threading.Lock()
        self._running: subprocess.Popen[bytes] | None = None
        self.cancelled = False

    def renew(self) -> None:
        """A full budget again for the next step (a cancel stays in force)."""
        self._ends_at = time.monotonic() + self.timeout_s

    def remaining_s(self) -> float:
        """Seconds left of the budget (may be negative)."""
        return self._ends_at - time.monotonic()

    def check(self, what: str) -> None:
        """Raise when the operation was cancelled or its time is up, before `what` starts."""
        if self.cancelled:
            raise GitCancelled(f"{what}: cancelled")
        if self.remaining_s() <= 0:
            raise GitTimeout(f"{what}: out of time ({self.timeout_s:g}s)")

    def cancel(self) -> None:
        """Stop the operation: kill its running git command; later ones do not start."""
        with self._lock:
            self.cancelled = True
            if self._running is not None:
                _kill_group(self._running)

    def _track(self, process: subprocess.Popen[bytes] | None) -> bool:
        """Remember the running command; False when the operation was cancelled meanwhile."""
        with self._lock:
            self._running = process
            return not self.cancelled


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the group our own unreaped child leads (so its pid cannot have been reused)."""
    pid = process.pid
    # Never group 0/1 or our own: the child was started with start_new_session, so its
    # group is its pid, and it is not reaped while poll() says it runs.
    if pid <= 1 or pid == os.getpgrp() or process.poll() is not None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_bounded(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    stdin: bytes,
    limit_s: float,
    deadline: GitDeadline | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `argv` in its own process group; kill the group after `limit_s` or on cancel."""
    what = f"git {subcommand(argv)}"
    if deadline is not None:
        deadline.check(what)
        limit_s = min(limit_s, deadline.remaining_s())
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    if deadline is not None and not deadline._track(process):
        _kill_group(process)
    try:
        try:
            stdout, stderr = process.communicate(stdin, timeout=limit_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            _drain(process)
            raise GitTimeout(f"{what} took over {limit_s:.1f}s in {cwd}; killed") from None
    finally:
        if deadline is not None:
            deadline._track(None)
    if deadline is not None and deadline.cancelled:
        raise GitCancelled(f"{what} in {cwd}: cancelled")
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)


def _drain(process: subprocess.Popen[bytes]) -> None:
    """Reap a killed command without waiting on pipes an escaped grandchild may hold."""
    try:
        process.communicate(timeout=PIPE_DRAIN_S)
    except subprocess.TimeoutExpired:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()


def subcommand(argv: Sequence[str]) -> str:
    """The git subcommand in an argv that starts with `git` and `-c key=value` pairs."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "-c" else 1
    return argv[i] if i < len(argv) else "?"


def lock_users(worktree: Path, locks: Sequence[Path]) -> list[int]:
    """Pids of live processes that may be writing this worktree's index or refs right now.

    Those holding one of `locks` open (a `reset`, `add` or checkout at work), and git
    processes working in the worktree itself (a `commit` runs hooks with the lock closed).
    """
    top = worktree.resolve()
    held = {str(lock) for lock in locks}
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        if proc.info["pid"] == me:
            continue
        try:
            name = proc.info["name"] or ""
            is_git = name == "git" or name.startswith("git-")
            if (is_git and Path(proc.cwd()) == top) or any(
                f.path in held for f in proc.open_files()
            ):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def wait_locks_free(worktree: Path, locks: Sequence[Path], deadline: GitDeadline | None) -> None:
    """Wait until nobody may be writing the index or a ref; then each of `locks` still there
    is stale (a git killed mid-write: a run's SIGKILL, a fenced host's stop) and removed.

    Raises GitTimeout naming the holders when they outlast the deadline (or at once without
    one): removing a lock a live git holds would corrupt what it writes.
    """
    while left := [lock for lock in locks if lock.exists()]:
        holders = lock_users(worktree, left)
        if not holders:
            for lock in left:
                lock.unlink(missing_ok=True)
            return
        if deadline is None or deadline.remaining_s() <= 0 or deadline.cancelled:
            if deadline is not None and deadline.cancelled:
                raise GitCancelled(f"waiting for {left[0]}: cancelled")
            pids = ", ".join(str(p) for p in holders[:5])
            raise GitTimeout(f"{left[0]} is held by a live git process (pid {pids}); not reset")
        time.sleep(min(BUSY_POLL_S, max(deadline.remaining_s(), 0.0)))


def run_prefix(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], max_bytes: int, limit_s: float
) -> tuple[bytes, bool, int | None]:
    """(the first `max_bytes` of stdout, whether there was more, exit status) of `argv`.

    A command whose output passes the bound is killed (its group) once the bound is read: a
    50 MB diff costs no more than its first `max_bytes`. None for the status of a killed one.
    """
    with tempfile.TemporaryFile() as errors:  # a file, so a chatty stderr never blocks git
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            start_new_session=True,
        )
        assert process.stdout is not None
        timer = threading.Timer(limit_s, _kill_group, (process,))
        timer.start()
        try:
            data = process.stdout.read(max_bytes + 1)
            more = len(data) > max_bytes
            if more:
                _kill_group(process)
            process.stdout.close()
            status = process.wait()
        finally:
            timer.cancel()
        if status < 0 and not more:
            raise GitTimeout(f"git {subcommand(argv)} took over {limit_s:.1f}s in {cwd}; killed")
        if not more and status not in (0, 1):
            errors.seek(0)
            message = errors.read(4096).decode("utf-8", "replace").strip().splitlines()
            raise GitError(f"git {subcommand(argv)} failed in {cwd}: {(message or ['?'])[0]}")
    return data[:max_bytes], more, None if more else status
