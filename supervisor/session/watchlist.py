"""What the fleet watcher watches: every session's plan, progress file, run log and git folders.

New runs join the watch once a burst of starts is over, so a fleet starting at once costs a few
watcher updates, not one per run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.files.watcher import FleetWatcher, WatchTarget
from agentherd.supervisor.session.inputwait import signals_path
from agentherd.supervisor.session.liverun import LiveRun

WATCH_UPDATE_DELAY_S = 0.05
"""New runs' logs join the watch after this pause, so fifty starts cost one watcher restart."""

WATCH_UPDATE_COST_RATIO = 4.0
"""After a watch update that took T, the next waits until 4 T have passed: while a fleet
starts, updating the watch costs at most a fifth of the time (each update resolves and watches
every folder of the fleet again, and reads every session's log once)."""


class Watched(Protocol):
    """A session as the watch list sees it: its files, its run, and a way to wake its reader."""

    @property
    def observer(self) -> Observer:
        """Where the session's plan, progress file and git folders are."""
        ...

    @property
    def run(self) -> LiveRun | None:
        """The run being watched, if any (its log is watched)."""
        ...

    def wake(self) -> None:
        """Read the run's log now: it may have changed unseen."""
        ...


class WatchList:
    """Tells the one fleet watcher which files matter, as sessions and runs come and go."""

    def __init__(
        self, watcher: FleetWatcher, sessions: Mapping[str, Watched], task_group: TaskGroup
    ) -> None:
        self.watcher = watcher
        self.sessions = sessions
        """The fleet's sessions by name (the daemon's own mapping, which a reload changes)."""
        self.task_group = task_group
        self._update_pending = False
        self._next_update_s = 0.0

    def targets(self) -> list[WatchTarget]:
        """The files and git folders every session wants watched now."""
        targets: list[WatchTarget] = []
        for name, supervisor in self.sessions.items():
            observer = supervisor.observer
            for kind, path in (("plan", observer.plan_path), ("progress", observer.progress_path)):
                if path is not None:
                    targets.append(WatchTarget(name, kind, path))  # type: ignore[arg-type]
            if supervisor.run is not None:
                targets.append(WatchTarget(name, "log", supervisor.run.tailer.path))
                if supervisor.run.config.interactive:  # in a folder of its own: see inputwait
                    signals = signals_path(supervisor.run.tailer.path.parent)
                    targets.append(WatchTarget(name, "signals", signals))
            paths = observer.cached_git_paths
            if paths is not None:
                targets.extend(WatchTarget(name, "git", folder) for folder in paths.watch_dirs)
        return targets

    def update(self) -> None:
        """Watch what matters now (a reload added or removed sessions)."""
        self.watcher.set_targets(self.targets())

    async def update_off_loop(self) -> None:
        """Watch what matters now, the folders resolved in a worker thread."""
        await self.watcher.set_targets_off_loop(self.targets())

    def runs_changed(self) -> None:
        """A run started: update the watch once the burst is over (a fleet starts at once)."""
        if self._update_pending:
            return
        self._update_pending = True
        self.task_group.start_soon(self._update_later)

    async def _update_later(self) -> None:
        # A storm of starts updates the watch a few times, not once per 50 ms: each update
        # re-resolves and re-watches every folder of the fleet and wakes every session.
        await anyio.sleep(max(WATCH_UPDATE_DELAY_S, self._next_update_s - time.monotonic()))
        self._update_pending = False
        began = time.monotonic()
        await self.update_off_loop()
        await self.watcher.wait_watching()
        # What a new run printed before its folder was watched raised no event.
        for supervisor in list(self.sessions.values()):
            supervisor.wake()
        ended = time.monotonic()
        self._next_update_s = ended + WATCH_UPDATE_COST_RATIO * (ended - began)
