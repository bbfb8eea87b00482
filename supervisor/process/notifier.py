"""Running the `notify` command: argv only (never a shell), bounded in time, never blocking."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass

import anyio

NOTIFY_TIMEOUT_S = 10.0
"""A notify command gets this long; a desktop notifier or a webhook answers in well under it."""

MAX_CONCURRENT_NOTIFICATIONS = 4
"""Notify commands running at once across the fleet: a burst of warnings must not fork-bomb."""


@dataclass(frozen=True)
class NotifyResult:
    """How one notify command ended: None error means it exited 0 in time."""

    error: str | None = None
    exit_code: int | None = None
    timed_out: bool = False


async def run_notify(argv: list[str], timeout_s: float = NOTIFY_TIMEOUT_S) -> NotifyResult:
    """Run `argv` with no stdin and its output discarded; kill its group after `timeout_s`."""
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return NotifyResult(error=f"cannot run {argv[0]!r}: {exc.strerror or exc}")
    try:
        with anyio.move_on_after(timeout_s):
            code = await process.wait()
            if code != 0:
                return NotifyResult(error=f"{argv[0]!r} exited {code}", exit_code=code)
            return NotifyResult()
        return NotifyResult(error=f"{argv[0]!r} timed out after {timeout_s:g}s", timed_out=True)
    finally:
        if process.returncode is None:  # timed out, or the daemon is shutting down
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True), anyio.move_on_after(NOTIFY_TIMEOUT_S):
                await process.wait()


def _kill_group(pid: int) -> None:
    """SIGKILL a notify command's process group (it leads one: start_new_session)."""
    # Our unreaped child: its pid (and group) cannot belong to anyone else yet.
    if pid > 1:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
