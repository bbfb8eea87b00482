"""One way to learn that an agent exited, without a thread per agent."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

log = logging.getLogger("herd.childwatch")


class PidfdWatcher(asyncio.AbstractChildWatcher):
    """Python 3.12's child watcher for 3.11: a pidfd per child on the loop that started it.

    3.11's default gives each child a thread blocked in waitpid (200 agents, 200 threads), and
    its PidfdChildWatcher serves one loop only (the tests run several daemons, each on its own
    loop). This one waits only for the PIDs it is handed, so it never reaps a process that is
    not one of ours, as a SIGCHLD watcher calling waitpid(-1) would.
    """

    def __init__(self) -> None:
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, int]] = {}

    def add_child_handler(  # type: ignore[override]
        self, pid: int, callback: Callable[..., Any], *args: Any
    ) -> None:
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(pid)
        self._pending[pid] = (loop, pidfd)
        loop._add_reader(pidfd, self._reap, pid, pidfd, callback, args)  # type: ignore[attr-defined]

    def _reap(self, pid: int, pidfd: int, callback: Callable[..., Any], args: Any) -> None:
        loop, _ = self._pending.pop(pid, (asyncio.get_running_loop(), pidfd))
        loop._remove_reader(pidfd)  # type: ignore[attr-defined]
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped elsewhere: the status is lost
            returncode = 255
            log.warning("the exit status of child %d was already read", pid)
        else:
            returncode = os.waitstatus_to_exitcode(status)
        os.close(pidfd)
        callback(pid, returncode, *args)

    def remove_child_handler(self, pid: int) -> bool:
        entry = self._pending.pop(pid, None)
        if entry is None:
            return False
        loop, pidfd = entry
        loop._remove_reader(pidfd)  # type: ignore[attr-defined]
        os.close(pidfd)
        return True

    def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Nothing to attach: each child is watched on the loop that started it."""

    def close(self) -> None:
        """Nothing to release: pidfds close as their children exit."""

    def is_active(self) -> bool:
        return True

    def __enter__(self) -> PidfdWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def use_pidfd_watcher() -> bool:
    """On Python 3.11, watch children through pidfds on the event loop instead of a thread
    per child; True if in use. Python 3.12 and later do this by themselves."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # an old kernel, or a seccomp filter that refuses it
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if not isinstance(asyncio.get_child_watcher(), PidfdWatcher):
            asyncio.set_child_watcher(PidfdWatcher())
    return True
