"""Reading a session's files again when they change: one read at a time per kind of file.

Where the fleet watcher's changes (and the slow pass's looks) of one session arrive: a log that
grew wakes the run's reader, a plan, progress file or git change is read again here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from anyio.abc import TaskGroup

from agentherd.supervisor.checks.observe import Observer

log = logging.getLogger("herd.session")


class Refresher:
    """Reads the plan, progress file or git again; a change during a read asks for one more."""

    def __init__(
        self, name: str, task_group: TaskGroup, observer: Observer, wake: Callable[[], None]
    ) -> None:
        self.name = name
        self.tg = task_group
        self.wake = wake
        """Read the run's log now instead of at its next poll (the follower's)."""
        self.reads: dict[str, Callable[[], Awaitable[None]]] = {
            "plan": observer.refresh_plan,
            "progress": observer.refresh_progress,
            "git": observer.refresh_git,
        }
        """Kind of file -> the observer's read of it."""
        self._refreshing: dict[str, bool] = {}
        """Kind -> a read is under way (True: read again when it finishes)."""

    def changed(self, kind: str) -> None:
        """A file of `kind` changed: read it (in a task), or again after the read under way; a
        `log` wakes the run's reader."""
        if kind == "log":
            self.wake()
            return
        if self._refreshing.get(kind) is not None:
            self._refreshing[kind] = True  # read again when the running read finishes
            return
        self._refreshing[kind] = False
        self.tg.start_soon(self._refresh, kind)

    def everything(self) -> None:
        """Look at the plan, progress file and git again (start-up, slow reconcile pass)."""
        for kind in self.reads:
            self.changed(kind)

    async def now(self, kind: str) -> None:
        """Read `kind` now and return once read (or mark it to be read again by a read under
        way); the daemon's first git reads go a few at a time this way."""
        if self._refreshing.get(kind) is not None:
            self._refreshing[kind] = True
            return
        self._refreshing[kind] = False
        await self._refresh(kind)

    async def _refresh(self, kind: str) -> None:
        refresh = self.reads[kind]
        try:
            while True:
                try:
                    await refresh()
                except Exception:  # one file must never take the daemon down
                    log.exception("refreshing %s of %s failed", kind, self.name)
                if not self._refreshing.get(kind):
                    return
                self._refreshing[kind] = False
        finally:
            self._refreshing.pop(kind, None)
