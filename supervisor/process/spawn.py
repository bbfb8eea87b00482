"""Starting a run: the agent in its own session and group, output to a file, in its cgroup."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil
from anyio.abc import Process

from agentherd.supervisor.files import private
from agentherd.supervisor.files.paths import OUTPUT_FILE
from agentherd.supervisor.process import cgroups, execwait
from agentherd.supervisor.process.runfolder import EXIT_FILE, LOCK_FILE, describe_users
from agentherd.supervisor.process.runid import TAG_VAR, RunIdentity

CGROUP_VAR = "HERD_CGROUP"

# The wrapper first moves itself into the run's cgroup (when it has one), so everything it
# starts is inside before it exists. It stays the group leader so a new daemon can learn how a
# run it did not start ended. It traps (not ignores) the usual stop signals: a trap is reset in
# the exec'd agent, an ignored signal would be inherited. It records the status after the exit,
# under umask 077 set only then: the agent ran under the umask herd was started with.
_WRAPPER = (
    'if [ -n "$HERD_CGROUP" ]; then { echo $$ > "$HERD_CGROUP/cgroup.procs"; } 2>/dev/null; fi; '
    'trap : TERM INT HUP QUIT USR1 USR2; "$@"; s=$?; umask 077; '
    'printf "%s\\n" "$s" > "$HERD_RUN_DIR/exit_status"; exit $s'
)
# The status is written in place, by the shell itself: an `mv` from a temporary name cost a
# fork and exec between the agent's exit and the wrapper's, on every crash's relaunch. No
# reader needs the rename: each reads the file only once the wrapper is gone (its leader, or
# the run's lock that it holds), and a file cut short reads as no status (exit unknown).


class RunFolderBusy(Exception):
    """The run's folder is held by a live process: a run that no state remembers still runs."""


@dataclass
class Launched:
    """A run just started by this daemon."""

    process: Process
    identity: RunIdentity


def new_cgroup(tag: str) -> str | None:
    """Make the cgroup a run will move into, or None where the machine does not allow it."""
    path = cgroups.create(tag)
    return str(path) if path is not None else None


def remove_cgroup(identity: RunIdentity) -> None:
    """Remove the run's cgroup once nothing is left in it."""
    cgroups.remove(identity.cgroup)


async def launch(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    folder: Path,
    tag: str,
    cgroup: str | None = None,
    interactive: bool = False,
) -> Launched:
    """Start `argv` in its own session, stdin /dev/null, stdout+stderr appended to output.log.

    The run holds `alive.lock` (inherited by every descendant) for as long as any of it lives;
    a lock already held means a run no state remembers still lives there: RunFolderBusy, never
    a wait and never a second agent. Raises OSError when the program cannot be started.
    `interactive` runs it on a pseudo-terminal kept by its holder (termspawn.py); the run's
    leader is then the holder's child, and the process returned the holder.
    """
    private.make_folder(folder)
    lock_fd = private.open_file(folder / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # never block the event loop
    except BlockingIOError:
        os.close(lock_fd)
        users = await anyio.to_thread.run_sync(describe_users, folder)
        raise RunFolderBusy(
            f"processes of an earlier run still hold {folder} ({users}); "
            "stop them, then start again"
        ) from None
    try:
        with contextlib.suppress(FileNotFoundError):
            (folder / EXIT_FILE).unlink()
        full_env = {**env, "HERD_RUN_DIR": str(folder), TAG_VAR: tag, "PYTHONUNBUFFERED": "1"}
        full_env.pop(CGROUP_VAR, None)  # never an outer run's (herd under herd)
        if cgroup is not None:
            full_env[CGROUP_VAR] = cgroup
        check_program(argv, cwd, full_env)
        log_fd = private.open_file(folder / OUTPUT_FILE, os.O_WRONLY | os.O_APPEND)
        wrapper = ["/bin/sh", "-c", _WRAPPER, "herd-run", *argv]
        try:
            if interactive:  # the holder's modules only then (~4 ms of a daemon's start)
                from agentherd.supervisor.process import termspawn

                process, leader = await termspawn.open_holder(
                    wrapper, cwd, full_env, folder, lock_fd, log_fd
                )
            else:
                process = await anyio.open_process(
                    wrapper,
                    stdin=subprocess.DEVNULL,
                    stdout=log_fd,
                    stderr=log_fd,
                    cwd=cwd,
                    env=full_env,
                    start_new_session=True,
                    pass_fds=(lock_fd,),
                )
                leader = process.pid
        finally:
            os.close(log_fd)
    finally:
        os.close(lock_fd)
    create_time = _create_time(leader) or time.time()
    await execwait.wait_agent_exec(leader)
    return Launched(process, RunIdentity(leader, leader, create_time, tag, cgroup))


def disown(process: Process) -> None:
    """Leave a still-running agent alive when the daemon exits without stopping it.

    asyncio SIGKILLs a child whose subprocess transport is closed or garbage-collected while
    it runs (BaseSubprocessTransport.close): a daemon stopped by SIGTERM or `shutdown` killed
    every run's wrapper on its way out, so the next daemon found each run ended, exit unknown,
    and restarted it as a crash. Marked closed, the transport leaves the child alone; our runs
    have no pipes for it to close (stdin is /dev/null, output goes to a file).
    """
    transport = getattr(process, "_transport", None) or getattr(
        getattr(process, "_process", None), "_transport", None
    )
    if transport is not None and hasattr(transport, "_closed"):
        transport._closed = True


def check_program(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
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
