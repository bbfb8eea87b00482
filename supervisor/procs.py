"""Agent processes: launch into their own group with output to a file, find them, stop the tree."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil
from anyio.abc import Process

from agentherd.supervisor import agentfiles

EXIT_FILE = "exit_status"
EXIT_FILE_MAX_BYTES = 64
"""The wrapper writes one number; anything longer is not its file."""
LOCK_FILE = "alive.lock"
OUTPUT_FILE = "output.log"
TAG_VAR = "HERD_RUN_TAG"

# The wrapper stays the group leader so a new daemon can learn how a run it did not start
# ended. It traps (not ignores) the usual stop signals: a trap is reset in the exec'd agent,
# an ignored signal would be inherited. The shell records the status after the agent exits.
_WRAPPER = (
    'trap : TERM INT HUP QUIT USR1 USR2; "$@"; s=$?; '
    'printf "%s\\n" "$s" > "$HERD_RUN_DIR/exit_status.tmp" && '
    'mv "$HERD_RUN_DIR/exit_status.tmp" "$HERD_RUN_DIR/exit_status"; exit $s'
)


@dataclass(frozen=True)
class RunIdentity:
    """Enough to find every process of a run again, and never to signal a recycled PID."""

    pid: int
    pgid: int
    create_time: float
    tag: str


@dataclass(frozen=True)
class ExitInfo:
    """How a run's leader ended: an exit code, a signal name, or neither when unknown."""

    exit_code: int | None
    signal: str | None

    @property
    def clean(self) -> bool:
        """Exited on its own with code 0."""
        return self.exit_code == 0 and self.signal is None

    def describe(self) -> str:
        """`exit 1`, `signal SIGKILL` or `exit unknown`."""
        if self.signal:
            return f"signal {self.signal}"
        return f"exit {self.exit_code}" if self.exit_code is not None else "exit unknown"


def signal_name(number: int) -> str:
    """SIGTERM for 15, or `SIG<n>` for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def decode_status(status: int | None) -> ExitInfo:
    """Turn a wait status (negative = killed by signal) or a shell's 128+N into ExitInfo."""
    if status is None:
        return ExitInfo(None, None)
    if status < 0:
        return ExitInfo(None, signal_name(-status))
    if 128 < status < 128 + 65:
        return ExitInfo(None, signal_name(status - 128))
    return ExitInfo(status, None)


def read_exit_file(folder: Path) -> ExitInfo | None:
    """The exit status the wrapper wrote for a run, or None when it never wrote one."""
    try:
        # The run folder is reachable by the agent: never block on a FIFO planted there.
        text = agentfiles.read_regular(folder / EXIT_FILE, EXIT_FILE_MAX_BYTES)
        return decode_status(int(text.strip()))
    except (OSError, ValueError):
        return None


@dataclass
class Launched:
    """A run just started by this daemon."""

    process: Process
    identity: RunIdentity


async def launch(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], folder: Path, tag: str
) -> Launched:
    """Start `argv` in its own session, stdin /dev/null, stdout+stderr appended to output.log.

    The run holds `alive.lock` (inherited by every descendant) for as long as any of it lives.
    Raises OSError when the program cannot be started.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (folder / EXIT_FILE).unlink()
    full_env = {**env, "HERD_RUN_DIR": str(folder), TAG_VAR: tag, "PYTHONUNBUFFERED": "1"}
    log_fd = os.open(folder / OUTPUT_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lock_fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        _check_program(argv, cwd, full_env)
        process = await anyio.open_process(
            ["/bin/sh", "-c", _WRAPPER, "herd-run", *argv],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            cwd=cwd,
            env=full_env,
            start_new_session=True,
            pass_fds=(lock_fd,),
        )
    finally:
        os.close(log_fd)
        os.close(lock_fd)
    create_time = _create_time(process.pid) or time.time()
    return Launched(process, RunIdentity(process.pid, process.pid, create_time, tag))


def _check_program(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
    """Raise the OSError the exec would give, before the wrapper shell hides it."""
    if not argv:
        raise OSError("empty command")
    program = argv[0]
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", program)
        if not os.access(path, os.X_OK) or path.is_dir():
            raise PermissionError(13, "Permission denied", program)
        return
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(2, "not found on PATH", program)


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def lock_held(folder: Path) -> bool:
    """True while any process of the run still holds its inherited `alive.lock`."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def leader_alive(identity: RunIdentity) -> bool:
    """True while the run's leader process (checked by start time, not PID alone) lives."""
    try:
        proc = psutil.Process(identity.pid)
        return (
            abs(proc.create_time() - identity.create_time) < 0.05
            and proc.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def run_processes(identity: RunIdentity) -> list[psutil.Process]:
    """Every live process of the run: its group members and anything carrying its env tag."""
    found: list[psutil.Process] = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        info = proc.info
        if info["pid"] == me or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if info["create_time"] is None or info["create_time"] < identity.create_time - 0.05:
            continue
        try:
            in_group = os.getpgid(info["pid"]) == identity.pgid
        except OSError:
            continue
        if in_group or _has_tag(proc, identity.tag):
            found.append(proc)
    return found


def _has_tag(proc: psutil.Process, tag: str) -> bool:
    try:
        return proc.environ().get(TAG_VAR) == tag
    except (psutil.Error, OSError):
        return False


def find_leader(tag: str) -> RunIdentity | None:
    """The wrapper (group leader) of the run carrying `tag`, if any process of it lives."""
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        info = proc.info
        if info["status"] == psutil.STATUS_ZOMBIE or not _has_tag(proc, tag):
            continue
        try:
            if os.getpgid(info["pid"]) == info["pid"]:
                return RunIdentity(info["pid"], info["pid"], info["create_time"], tag)
        except OSError:
            continue
    return None


def signal_run(identity: RunIdentity, signum: int) -> int:
    """Send `signum` to every process of the run (each re-checked by psutil); returns how many."""
    sent = 0
    for proc in run_processes(identity):
        try:
            proc.send_signal(signum)  # psutil refuses a PID that was reused since we found it
            sent += 1
        except psutil.Error:
            pass
    return sent


async def stop_tree(
    identity: RunIdentity,
    stop_signal: int,
    grace_s: float,
    kill_wait_s: float,
    poll_s: float,
    continue_first: bool = False,
) -> bool:
    """Signal the run, wait `grace_s`, SIGKILL what is left, wait `kill_wait_s`.

    Returns True when nothing of the run is left; False means it could not be killed.
    """
    if stop_signal != signal.SIGKILL:
        await anyio.to_thread.run_sync(signal_run, identity, stop_signal)
        if continue_first:
            await anyio.to_thread.run_sync(signal_run, identity, signal.SIGCONT)
        if await _wait_empty(identity, grace_s, poll_s):
            return True
    return await _wait_empty(identity, kill_wait_s, poll_s, resend=signal.SIGKILL)


async def _wait_empty(
    identity: RunIdentity, timeout_s: float, poll_s: float, resend: int | None = None
) -> bool:
    """Wait until nothing of the run is left, re-sending `resend` to what a fork left behind."""
    deadline = time.monotonic() + timeout_s
    while True:
        if resend is not None:
            await anyio.to_thread.run_sync(signal_run, identity, resend)
        left = await anyio.to_thread.run_sync(run_processes, identity)
        if not left:
            return True
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(poll_s)
