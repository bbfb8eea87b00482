"""Running the `notify` command: argv only (never a shell), bounded in time, never blocking,
and ended whole: nothing it starts outlives it.

A notify command runs under `subreaper.py`, a small process that is its child subreaper: every
process the command's tree orphans (`setsid cmd &`, a double fork) is re-parented to it, so the
whole tree stays its descendants. When the command exits, the reaper SIGKILLs every descendant
it has (found by their parent chain) before it exits itself; at the timeout (or when the daemon
stops) herd asks it to do the same at once, then kills its process group. Where herd can make
cgroups (supervisor/process/cgroups.py) each notify also gets its own, emptied at the end with
`cgroup.kill`: that reaches even a process that left the tree another way. What stays running
is only what was never the command's descendant: a service that acted on its request (a
desktop's notification daemon showing the message).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process

from agentherd.supervisor.process import cgroups, spawn, subreaper

NOTIFY_TIMEOUT_S = 10.0
"""A notify command gets this long; a desktop notifier or a webhook answers in well under it."""

MAX_CONCURRENT_NOTIFICATIONS = 4
"""Notify commands running at once across the fleet: a burst of warnings must not fork-bomb."""

REAPER_GRACE_S = 5.0
"""The reaper ends the command's tree on its own this long after the timeout: the daemon that
should have asked it may have died meanwhile."""

REAPER_EXIT_S = subreaper.SWEEP_LIMIT_S + 1.0
"""Asked to end the tree, the reaper sweeps for at most SWEEP_LIMIT_S; then it is killed."""

CGROUP_EMPTY_S = 2.0
"""After `cgroup.kill` the kernel empties the cgroup in milliseconds; this bounds the wait."""

REAPER = str(Path(subreaper.__file__).resolve())


@dataclass(frozen=True)
class NotifyResult:
    """How one notify command ended: None error means it exited 0 in time."""

    error: str | None = None
    exit_code: int | None = None
    timed_out: bool = False


async def run_notify(argv: list[str], timeout_s: float = NOTIFY_TIMEOUT_S) -> NotifyResult:
    """Run `argv` with no stdin and its output discarded; end all it started when it ends or
    after `timeout_s`."""
    env = {k: v for k, v in os.environ.items() if k != spawn.CGROUP_VAR}
    try:
        spawn.check_program(argv, Path.cwd(), env)
    except OSError as exc:
        return NotifyResult(error=f"cannot run {argv[0]!r}: {exc.strerror or exc}")
    cgroup = cgroups.create(f"notify-{uuid.uuid4().hex}")  # a mkdir: microseconds
    if cgroup is not None:
        env[spawn.CGROUP_VAR] = str(cgroup)
    try:
        process = await anyio.open_process(
            [sys.executable, "-I", "-S", REAPER, f"{timeout_s + REAPER_GRACE_S:g}", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        cgroups.remove(cgroup)
        return NotifyResult(error=f"cannot run {argv[0]!r}: {exc.strerror or exc}")
    try:
        with anyio.move_on_after(timeout_s):
            code = await process.wait()
            if code != 0:
                return NotifyResult(error=f"{argv[0]!r} exited {code}", exit_code=code)
            return NotifyResult()
        return NotifyResult(error=f"{argv[0]!r} timed out after {timeout_s:g}s", timed_out=True)
    finally:
        with anyio.CancelScope(shield=True):  # also when the daemon is shutting down
            await _end_whole(process, cgroup)


async def _end_whole(process: Process, cgroup: Path | None) -> None:
    """End the reaper and everything of the command: it sweeps its tree on SIGTERM; its group
    is killed if it does not exit; the cgroup, if any, is emptied and removed."""
    if process.returncode is None:  # timed out, or the daemon is stopping
        try:
            process.terminate()  # refused (ProcessLookupError) once it has been reaped
        except ProcessLookupError:
            pass
        with anyio.move_on_after(REAPER_EXIT_S):
            await process.wait()
    if process.returncode is None:
        _kill_group(process.pid)
        with anyio.move_on_after(NOTIFY_TIMEOUT_S):
            await process.wait()
    if cgroup is not None:
        await anyio.to_thread.run_sync(_empty_cgroup, cgroup)


def _kill_group(pid: int) -> None:
    """SIGKILL the reaper's process group (it leads one: start_new_session)."""
    # Our unreaped child (checked on the loop, which reaps): its group is no one else's yet.
    if pid > 1:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _empty_cgroup(cgroup: Path) -> None:
    """Kill whatever is left in the notify's cgroup, wait until it is empty, remove it."""
    if not cgroups.kill(cgroup):  # no cgroup.kill (before Linux 5.14): one by one
        for pid in cgroups.members(cgroup):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    give_up = time.monotonic() + CGROUP_EMPTY_S
    while cgroups.populated(cgroup) and time.monotonic() < give_up:
        time.sleep(0.005)
    cgroups.remove(cgroup)
