"""One inotify watch for the whole fleet: plan, progress and log files and git metadata.

The inotify descriptor sits in the event loop's epoll, so a quiet fleet costs no wake-up at
all (watchfiles' notify thread looked at its stop event every step, 100 times a second)."""

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

from agentherd.supervisor.files.inotify import Inotify

log = logging.getLogger(__name__)

WatchKind = Literal["plan", "progress", "git", "log", "signals"]
Hit = tuple[str, WatchKind]
DirId = tuple[int, int]

FAILURE_RETRY_S = 5.0
"""After watching fails (e.g. inotify limits) wait this long to retry; reconcile covers the gap."""
DISPATCH_STEP = 8
"""Changes handed on per loop step when a batch concerns many sessions."""
GIT_NOISE_SUFFIX = ".lock"
"""Git's lockfiles come and go around every write; the renamed result is what matters."""
GIT_NOISE_NAMES = frozenset({"objects"})
"""Object writes say nothing about HEAD; the ref and reflog changes of a commit do."""


@dataclass(frozen=True)
class WatchTarget:
    """A file (plan, progress, output.log, an interactive run's signals) or, for kind "git", a
    folder a session wants watched."""

    session: str
    kind: WatchKind
    path: Path

    @property
    def directory(self) -> Path:
        """The folder to watch: the git folder itself, or the folder holding the file."""
        return self.path if self.kind == "git" else self.path.parent


_Index = tuple[dict[str, list[Hit]], dict[str, list[Hit]], dict[str, str]]
"""Watched files and git folders (real paths), each with the (session, kind) pairs it concerns,
and the log folders watched one change at a time (the log's path as given -> real folder)."""


def _index(targets: Iterable[WatchTarget]) -> _Index:
    """The targets by real path: files by their path, git folders by theirs."""
    files: dict[str, list[Hit]] = {}
    git_dirs: dict[str, list[Hit]] = {}
    log_dirs: dict[str, str] = {}
    other_dirs: set[str] = set()
    for target in targets:
        directory = os.path.realpath(target.directory)
        hit: Hit = (target.session, target.kind)
        if target.kind == "git":
            git_dirs.setdefault(directory, []).append(hit)
        else:
            files.setdefault(os.path.join(directory, target.path.name), []).append(hit)
        if target.kind == "log":
            log_dirs[str(target.path)] = directory
        else:
            other_dirs.add(directory)
    # Only a folder that holds nothing but logs is watched one change at a time: its readers
    # arm it again; a plan or progress file beside a log must raise every change.
    log_dirs = {given: real for given, real in log_dirs.items() if real not in other_dirs}
    return files, git_dirs, log_dirs


class FleetWatcher:
    """A single non-recursive inotify watch over every target's folder, restarted when they
    change; a batch of changes ends after a quiet `step_ms` or at `debounce_ms`."""

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
        self._log_dirs: dict[str, str] = {}
        """Log folders watched one change at a time, by the path of their log as given (a
        Path keeps its string: `arm` costs a lookup, not a path resolution)."""
        self._oneshot: frozenset[str] = frozenset()
        self._oneshot_files: dict[str, list[str]] = {}
        """The watched files in each one-shot folder: any change there wakes their readers."""
        self._disarmed: set[str] = set()
        """One-shot folders whose change was reported and that no reader has armed again."""
        self._notify: Inotify | None = None
        self.arms = 0
        self._stop = anyio.Event()
        self._settled = anyio.Event()
        self._targets_version = 0
        self._reporting = False
        """True while a watch runs that will report its own folders going (no event lost)."""

    @property
    def watched_dirs(self) -> tuple[str, ...]:
        """The folders the current watch covers."""
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
        files, git_dirs, self._log_dirs = index
        self._files, self._git_dirs = files, git_dirs
        self._oneshot = frozenset(self._log_dirs.values())
        self._oneshot_files = {}
        for path in files:
            folder = os.path.dirname(path)
            if folder in self._oneshot:
                self._oneshot_files.setdefault(folder, []).append(path)
        self._dirs = tuple(sorted({os.path.dirname(path) for path in files} | set(git_dirs)))
        self._recheck_all()

    def recheck(self) -> bool:
        """Restart the watch if a wanted folder appeared, vanished or was replaced; True if so.

        A watched folder that is deleted or moved is reported by inotify itself, so while the
        watch runs only the wanted folders not watched yet are looked at (none, mostly).
        """
        if self._reporting:
            missing = (d for d in self._dirs if d not in self._watched)
            if not any(os.path.isdir(d) for d in missing):
                return False
        return self._recheck_all()

    def _recheck_all(self) -> bool:
        if self._existing() == self._watched:
            return False
        if self._settled.is_set():
            self._settled = anyio.Event()
        self._stop.set()
        return True

    def arm(self, log_path: Path) -> None:
        """Watch the folder of `log_path` (a log target) for its next change again.

        A log folder's watch reports one change, then ends: a chatty agent's every write would
        otherwise be an event to read and dispatch, while its reader rests between reads anyway.
        Its reader arms it before each read, so a write after that read raises the next event.
        """
        folder = self._log_dirs.get(str(log_path))
        if folder is None or folder not in self._disarmed or self._notify is None:
            return
        self._disarmed.discard(folder)
        self.arms += 1
        try:
            self._notify.add(folder, oneshot=True)
        except OSError:
            self._recheck_all()  # the folder went: watch anew (a deleted one is not watched)

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
        """Run one watch over the folders that exist now, until asked to restart."""
        stop = self._stop = anyio.Event()
        before = self._watched
        dirs = self._watched = self._existing()
        if not dirs:
            self._settled.set()
            task_status.started()
            await stop.wait()
            return
        self.starts += 1
        notify = Inotify()
        try:
            try:
                for directory in dirs:
                    notify.add(directory, oneshot=directory in self._oneshot)
            except OSError as exc:
                # Whoever waits for the watch is told it is in place or has failed.
                self._settled.set()
                task_status.started()
                if self._existing() != dirs:
                    return  # a folder vanished or appeared while starting: just start again
                await self._failed(exc, stop)
                return
            self._reporting = True
            self._notify = notify
            self._disarmed = set()
            # What changed while the last watch gave way to this one raised no event here (its
            # unread events closed with it): every target it covered is reported as changed.
            await self._dispatch_all(before.keys() & dirs.keys())
            # The watches are in place, and those reports made, before anyone waiting wakes up
            # (unless newer targets came meanwhile: the watch for them tells).
            if not stop.is_set():
                self._settled.set()
            task_status.started()
            async with anyio.create_task_group() as tg:

                async def restart_when_asked() -> None:
                    await stop.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(restart_when_asked)
                await self._serve(notify)
        finally:
            self._reporting = False
            self._notify = None
            notify.close()
        await anyio.lowlevel.checkpoint()  # a stop on shutdown is no restart: let the cancel in
        self.restarts += 1

    async def _dispatch_all(self, folders: set[str]) -> None:
        """Report every target in `folders` as changed (their changes may have gone unseen)."""
        files = [path for path in self._files if os.path.dirname(path) in folders]
        heads = [os.path.join(folder, "HEAD") for folder in self._git_dirs if folder in folders]
        if files or heads:
            await self._dispatch([*files, *heads])

    async def _failed(self, exc: Exception, stop: anyio.Event) -> None:
        self.failures += 1
        level = logging.DEBUG if self._warned else logging.WARNING
        log.log(level, "file watching failed, retrying in %ss: %s", FAILURE_RETRY_S, exc)
        self._warned = True
        with anyio.move_on_after(FAILURE_RETRY_S):
            await stop.wait()

    async def _serve(self, notify: Inotify) -> None:
        """Wait for changes on the loop; hand each batch on (never returns)."""
        step_s = self.step_ms / 1000
        while True:
            await anyio.wait_readable(notify.fd)
            paths, gone = self._read(notify)
            paths = await self._pass_progress(paths)
            if not paths and not gone:
                continue  # only files no session cares about changed, or progress files
            # A batch: more changes follow a write closely; gather them until a quiet step.
            deadline = anyio.current_time() + self.debounce_ms / 1000
            while anyio.current_time() < deadline:
                more, more_gone = await self._step(notify, step_s)
                if not more and not more_gone:
                    break
                paths += more
                gone = gone or more_gone
            if gone:
                self._recheck_all()  # a watched folder was deleted or moved: watch anew
            await self._dispatch(paths)

    def _read(self, notify: Inotify) -> tuple[list[str], bool]:
        """The changed paths some target cares about, and whether a watched folder went."""
        paths, gone = notify.read()
        if notify.fired:  # any change in a one-shot folder wakes its readers (they arm it)
            for folder in notify.fired:
                self._disarmed.add(folder)
                paths.extend(self._oneshot_files.get(folder, ()))
            notify.fired.clear()
        if notify.overflowed:  # the kernel dropped events: tell every target to look again
            notify.overflowed = False
            gone = True  # and look at every folder again
            paths = [*self._files, *(os.path.join(d, "HEAD") for d in self._git_dirs)]
            # A one-shot watch may have fired with its event dropped: its readers arm it anew.
            for wd in list(notify.oneshot):
                self._disarmed.add(notify.folders.pop(wd))
            notify.oneshot.clear()
        return [path for path in paths if self._hits(path)], gone

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

    async def _step(self, notify: Inotify, step_s: float) -> tuple[list[str], bool]:
        """The changes of one step of a batch, but progress files' handed on as they come."""
        ends = anyio.current_time() + step_s
        paths: list[str] = []
        gone = False
        while True:
            with anyio.move_on_after(ends - anyio.current_time()):
                await anyio.wait_readable(notify.fd)
            more, more_gone = self._read(notify)
            paths += await self._pass_progress(more)
            gone = gone or more_gone
            if anyio.current_time() >= ends:
                return paths, gone

    async def _pass_progress(self, paths: list[str]) -> list[str]:
        """Hand on at once the changes that concern progress files only; return the others.

        A progress file is read from its tail when its signature changed: nothing is gained
        by waiting for the writes that follow (each would be read in its own batch), and a
        fleet's busy logs kept a batch open most of the time.
        """
        progress = [path for path in paths if self._only_progress(path)]
        if not progress:
            return paths
        await self._dispatch(progress)
        return [path for path in paths if not self._only_progress(path)]

    def _only_progress(self, path: str) -> bool:
        hits = self._hits(path)
        return bool(hits) and all(kind == "progress" for _, kind in hits)

    def _hits(self, path: str) -> list[Hit]:
        """The (session, kind) pairs a change of `path` concerns."""
        hits = self._files.get(path, [])
        parent, name = os.path.split(path)
        git = self._git_dirs.get(parent)
        if git and not name.endswith(GIT_NOISE_SUFFIX) and name not in GIT_NOISE_NAMES:
            hits = [*hits, *git]
        return hits

    async def _dispatch(self, paths: list[str]) -> None:
        """Call `on_change` once per (session, kind) this batch concerns, in order of change."""
        self.batches += 1
        hits = dict.fromkeys(hit for path in paths for hit in self._hits(path))
        for number, (session, kind) in enumerate(hits, 1):
            try:
                self._on_change(session, kind)
            except Exception:
                log.exception("watch callback failed for %s (%s)", session, kind)
            if number % DISPATCH_STEP == 0:
                # A batch can concern the whole fleet (start-up, a burst of commits): let the
                # loop breathe between slices instead of holding it for every session at once.
                await anyio.lowlevel.checkpoint()
