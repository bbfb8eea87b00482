"""One watchfiles watcher for the whole fleet: plan, progress and log files and git metadata."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import anyio.lowlevel
from anyio.abc import TaskStatus
from watchfiles import Change, awatch

log = logging.getLogger(__name__)

WatchKind = Literal["plan", "progress", "git", "log"]
Hit = tuple[str, WatchKind]
DirId = tuple[int, int]

RUST_TIMEOUT_MS = 500
"""The notify thread returns to the loop at least this often, so it never holds a thread long."""
FAILURE_RETRY_S = 5.0
"""After awatch fails (e.g. inotify limits) wait this long to retry; reconcile covers the gap."""
DISPATCH_STEP = 8
"""Changes handed on per loop step when a batch concerns many sessions."""
GIT_NOISE_SUFFIX = ".lock"
"""Git's lockfiles come and go around every write; the renamed result is what matters."""
GIT_NOISE_NAMES = frozenset({"objects"})
"""Object writes say nothing about HEAD; the ref and reflog changes of a commit do."""


@dataclass(frozen=True)
class WatchTarget:
    """A file (plan, progress, output.log) or, for kind "git", a folder a session wants watched."""

    session: str
    kind: WatchKind
    path: Path

    @property
    def directory(self) -> Path:
        """The folder to watch: the git folder itself, or the folder holding the file."""
        return self.path if self.kind == "git" else self.path.parent


_Index = tuple[dict[str, list[Hit]], dict[str, list[Hit]]]
"""Watched files and git folders (real paths), each with the (session, kind) pairs it concerns."""


def _index(targets: Iterable[WatchTarget]) -> _Index:
    """The targets by real path: files by their path, git folders by theirs."""
    files: dict[str, list[Hit]] = {}
    git_dirs: dict[str, list[Hit]] = {}
    for target in targets:
        directory = os.path.realpath(target.directory)
        hit: Hit = (target.session, target.kind)
        if target.kind == "git":
            git_dirs.setdefault(directory, []).append(hit)
        else:
            files.setdefault(os.path.join(directory, target.path.name), []).append(hit)
    return files, git_dirs


class FleetWatcher:
    """A single non-recursive `awatch` over every target's folder, restarted when they change."""

    def __init__(
        self, on_change: Callable[[str, WatchKind], None], debounce_ms: int = 30, step_ms: int = 10
    ) -> None:
        self._on_change = on_change
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.batches = 0
        self.starts = 0
        self.restarts = 0
        self.failures = 0
        self._warned = False
        self._files: dict[str, list[Hit]] = {}
        self._git_dirs: dict[str, list[Hit]] = {}
        self._dirs: tuple[str, ...] = ()
        self._watched: dict[str, DirId] = {}
        self._stop = anyio.Event()
        self._settled = anyio.Event()
        self._targets_version = 0

    @property
    def watched_dirs(self) -> tuple[str, ...]:
        """The folders the current `awatch` covers."""
        return tuple(self._watched)

    def set_targets(self, targets: Iterable[WatchTarget]) -> None:
        """Replace the targets; restart the watch if the set of existing folders changed."""
        self._targets_version += 1
        self._apply(_index(targets))

    async def set_targets_off_loop(self, targets: Iterable[WatchTarget]) -> None:
        """`set_targets`, resolving the paths in a worker thread: a fleet's realpath calls are
        thousands of lstat calls, over 100 ms of the event loop on a busy machine."""
        self._targets_version += 1
        version = self._targets_version
        index = await anyio.to_thread.run_sync(_index, list(targets))
        if version == self._targets_version:  # else newer targets were set meanwhile
            self._apply(index)

    def _apply(self, index: _Index) -> None:
        self._files, self._git_dirs = index
        files, git_dirs = index
        self._dirs = tuple(sorted({os.path.dirname(path) for path in files} | set(git_dirs)))
        self.recheck()

    def recheck(self) -> bool:
        """Restart the watch if a wanted folder appeared, vanished or was replaced; True if so."""
        if self._existing() == self._watched:
            return False
        if self._settled.is_set():
            self._settled = anyio.Event()
        self._stop.set()
        return True

    async def wait_watching(self) -> None:
        """Return once the watch for the current targets is in place (or has failed)."""
        await self._settled.wait()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; `started` once the first watch is in place."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._stop_on_exit)
            while True:
                await self._watch_once(task_status)
                task_status = anyio.TASK_STATUS_IGNORED

    async def _stop_on_exit(self) -> None:
        """On cancellation, stop the notify thread now instead of at its next timeout."""
        try:
            await anyio.sleep_forever()
        finally:
            self._stop.set()

    async def _watch_once(self, task_status: TaskStatus[None]) -> None:
        """Run one `awatch` over the folders that exist now, until asked to restart."""
        stop = self._stop = anyio.Event()
        dirs = self._watched = self._existing()
        # awatch installs its watches synchronously on first iteration, before it first yields
        # to the loop, so whoever these wake up finds the watch in place.
        self._settled.set()
        task_status.started()
        if not dirs:
            await stop.wait()
            return
        self.starts += 1
        try:
            async for changes in awatch(
                *dirs,
                watch_filter=self._wanted,
                debounce=self.debounce_ms,
                step=self.step_ms,
                stop_event=stop,
                rust_timeout=RUST_TIMEOUT_MS,
                recursive=False,
            ):
                await self._dispatch(changes)
        except Exception as exc:
            if self._existing() != dirs:
                return  # a folder vanished or appeared while starting: just start again
            self.failures += 1
            level = logging.DEBUG if self._warned else logging.WARNING
            log.log(level, "file watching failed, retrying in %ss: %s", FAILURE_RETRY_S, exc)
            self._warned = True
            with anyio.move_on_after(FAILURE_RETRY_S):
                await stop.wait()
            return
        await anyio.lowlevel.checkpoint()  # a stop on shutdown is no restart: let the cancel in
        self.restarts += 1

    def _existing(self) -> dict[str, DirId]:
        """The wanted folders that exist now, with their identity (device, inode)."""
        found: dict[str, DirId] = {}
        for directory in self._dirs:
            try:
                info = os.stat(directory)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                found[directory] = (info.st_dev, info.st_ino)
        return found

    def _hits(self, path: str) -> list[Hit]:
        """The (session, kind) pairs a change of `path` concerns."""
        hits = self._files.get(path, [])
        parent, name = os.path.split(path)
        git = self._git_dirs.get(parent)
        if git and not name.endswith(GIT_NOISE_SUFFIX) and name not in GIT_NOISE_NAMES:
            hits = [*hits, *git]
        return hits

    def _wanted(self, change: Change, path: str) -> bool:
        """The watch filter: keep a change only if some target cares (`.git` included)."""
        return bool(self._hits(path))

    async def _dispatch(self, changes: set[tuple[Change, str]]) -> None:
        """Call `on_change` once per (session, kind) this batch concerns."""
        self.batches += 1
        hits = dict.fromkeys(hit for _, path in sorted(changes) for hit in self._hits(path))
        for number, (session, kind) in enumerate(hits, 1):
            try:
                self._on_change(session, kind)
            except Exception:
                log.exception("watch callback failed for %s (%s)", session, kind)
            if number % DISPATCH_STEP == 0:
                # A batch can concern the whole fleet (start-up, a burst of commits): let the
                # loop breathe between slices instead of holding it for every session at once.
                await anyio.lowlevel.checkpoint()
