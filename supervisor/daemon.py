"""The supervisor daemon: owns the sessions and the store, serves the control API."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from agentherd.sessions.config import ConfigError, HerdConfig, SessionConfig, load_config
from agentherd.sessions.records import Event, SessionRecord
from agentherd.sessions.states import ACTIVE_STATES, State
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor import memtrace
from agentherd.supervisor.api import server
from agentherd.supervisor.api.operations import ControlApi
from agentherd.supervisor.api.protocol import HERD_VERSION, ApiError
from agentherd.supervisor.checks import leftovers
from agentherd.supervisor.checks.verify import VerificationQueue
from agentherd.supervisor.files.paths import prepare_state_dir, socket_path_for
from agentherd.supervisor.files.store import Change, Store
from agentherd.supervisor.files.watcher import FleetWatcher, WatchKind
from agentherd.supervisor.process import cgroups, childwatch, spawn
from agentherd.supervisor.session import fleetstart
from agentherd.supervisor.session.budgets import FleetShare
from agentherd.supervisor.session.context import Context, Timings
from agentherd.supervisor.session.news import News
from agentherd.supervisor.session.stalltimer import watch_stalls
from agentherd.supervisor.session.supervisor import SessionSupervisor

log = logging.getLogger("herd.daemon")

RUN_MAY_LIVE = frozenset(
    {
        State.STARTING,
        State.RUNNING,
        State.PAUSED,
        State.WAITING_APPROVAL,
        State.WAITING_INPUT,
        State.STOPPING,
    }
)
"""States of a session whose run's processes may be alive (backoff and verifying have none)."""

FIRST_GIT_READ_DELAY_S = 0.2
"""The boot's git reads wait this long for the `herd up` that started the daemon to ask."""

FIRST_GIT_READS_AT_ONCE = 4
"""Sessions reading git for the first time at once: a `herd up` arriving waits for these."""

MAX_CONCURRENT_VERIFICATIONS = 2
"""Verifications across the fleet at once: a test suite can use a core each, and we have few."""

RECONCILE_STEP_S = 1.0
"""The slow pass's shortest step: its sessions are visited in groups at most this often."""


class DaemonAlreadyRunning(Exception):
    """Another daemon holds this state folder's lock."""


class Daemon:
    """One per state folder: the single writer of state, and the control API's server."""

    def __init__(
        self,
        config: HerdConfig,
        socket_path: Path | None = None,
        timings: Timings | None = None,
        owns: Callable[[str], bool] | None = None,
        fleet_share: FleetShare | None = None,
    ) -> None:
        self.config = config
        self.owns = owns
        self.fleet_share = fleet_share
        """Across hosts: the other hosts' spend, for the fleet budget's sum."""
        """Across hosts: whether this host may restart or re-adopt a session (Context.owns)."""
        self.state_dir = config.state_dir
        self.socket_path = socket_path or socket_path_for(self.state_dir)
        self.timings = timings or Timings()
        self.sessions: dict[str, SessionSupervisor] = {}
        self.store: Store | None = None
        self._shutdown = anyio.Event()
        self.reconciled = anyio.Event()
        """Set once every session has reconciled its stored state with what still runs."""
        self.news = News()
        """Told of every event written; clients that wait for a change wait on it."""
        self._lock_fd: int | None = None
        self.task_group: TaskGroup | None = None
        self.watcher: FleetWatcher | None = None
        self.ctx: Context | None = None
        self.queue: VerificationQueue | None = None
        self.reconcile_passes = 0
        self.started_at = iso(utc_now())
        self.fleet_starts = fleetstart.InFlight()
        """`herd up`s under way; the boot's git reads wait for them."""

    @property
    def changed(self) -> anyio.Event:
        """Set at the next event written (then replaced): what `wait` and `events` wait on."""
        return self.news.changed

    # ----- life --------------------------------------------------------------------------

    def take_lock(self) -> None:
        prepare_state_dir(self.state_dir)
        fd = os.open(self.state_dir / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DaemonAlreadyRunning(f"a herd daemon already runs for {self.state_dir}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until `down` or `shutdown`; agents keep running when the daemon exits."""
        if self._lock_fd is None:
            self.take_lock()
        log.info("open-file limit %d", server.raise_fd_limit(len(self.config.sessions)))
        childwatch.use_pidfd_watcher()
        try:
            self.store = Store(self.state_dir / "state.db")
            await anyio.to_thread.run_sync(cgroups.sweep_stale)
            async with anyio.create_task_group() as tg:
                self.task_group = tg
                self.watcher = FleetWatcher(
                    self._on_file_change, self.timings.watch_debounce_ms, self.timings.watch_step_ms
                )
                self.ctx = ctx = Context(
                    self.store,
                    self.state_dir,
                    tg,
                    self.timings,
                    self.config.path,
                    news=self.news,
                    sessions=self.sessions,
                    watcher=self.watcher,
                    owns=self.owns,
                )
                assert ctx.watch is not None
                ctx.budgets.share = self.fleet_share
                ctx.use_config(self.config)
                self.queue = VerificationQueue(MAX_CONCURRENT_VERIFICATIONS)
                await tg.start(self.queue.run)
                records = self.store.sessions()
                for session_config in self.config.sessions:
                    self._add_session(session_config, records.get(session_config.name))
                self._keep_removed_with_live_runs(records)
                listener = await server.listen(self.socket_path)
                tg.start_soon(server.serve, listener, ControlApi(self).handle)
                await self._clean_verify_leftovers()
                for supervisor in self.sessions.values():
                    await supervisor.reconcile()
                # A link whose `after` completed while no daemon ran (or just before) moves on.
                ctx.chains.advance_all()
                self.reconciled.set()
                # Plans, progress files, logs (git folders later), resolved off the loop: a
                # fleet's realpath walks on it hold `herd up`'s first requests back.
                await ctx.watch.update_off_loop()
                await tg.start(self.watcher.run)
                for supervisor in list(self.sessions.values()):
                    supervisor.refresher.changed("plan")
                    supervisor.refresher.changed("progress")
                    await anyio.lowlevel.checkpoint()  # a fleet's reads start in slices
                tg.start_soon(self._first_git_reads)
                self.commit_daemon_event(
                    "daemon-started", f"daemon {HERD_VERSION} started (pid {os.getpid()})"
                )
                tg.start_soon(self._reconcile_loop)
                tg.start_soon(
                    watch_stalls, lambda: list(self.sessions.values()), self.timings.reconcile_s
                )
                tg.start_soon(ctx.budgets.run)
                tg.start_soon(self._tick_loop)
                if (trace_dir := memtrace.wanted()) is not None:
                    tg.start_soon(memtrace.run, trace_dir)  # bench/soak.py --trace
                log.info("daemon ready on %s", self.socket_path)
                task_status.started()
                await self._shutdown.wait()
                await ctx.reports.drain(self.timings.report_drain_s)
                tg.cancel_scope.cancel()
        finally:
            for session in self.sessions.values():  # agents outlive the daemon: re-adopted later
                if session.run is not None and session.run.process is not None:
                    spawn.disown(session.run.process)
            if self.store is not None:
                if not self.store.retry():
                    log.error("the disk is still full: changes held in memory are lost")
                self.store.close()
            if self.socket_path.exists():
                self.socket_path.unlink(missing_ok=True)
            self._release_lock()
            log.info("daemon stopped")

    async def _first_git_reads(self) -> None:
        """Each session's first look at git (its folders, HEAD, new commits), in the gaps of
        the fleet's starts: two or three git processes per session took a core from `herd
        up`'s 200 starts (0.9 s of git CPU on a cold start), and no start needs them."""
        await anyio.sleep(FIRST_GIT_READ_DELAY_S)
        limiter = anyio.CapacityLimiter(FIRST_GIT_READS_AT_ONCE)

        async def each(read: Callable[[], Awaitable[object]]) -> None:
            async with limiter:
                await self.fleet_starts.idle()  # a `herd up` that came meanwhile goes first
                await read()

        async with anyio.create_task_group() as lookups:  # git folders, for the watcher
            for supervisor in self.sessions.values():
                lookups.start_soon(each, supervisor.observer.git_paths)
        if self.ctx is not None and self.ctx.watch is not None:
            # Off the loop: on it, this held a fleet's starts 0.3-0.8 s.
            await self.ctx.watch.update_off_loop()
        async with anyio.create_task_group() as reads:
            for supervisor in list(self.sessions.values()):
                reads.start_soon(each, functools.partial(supervisor.refresher.now, "git"))

    async def _clean_verify_leftovers(self) -> None:
        """Remove what a daemon killed mid-verification left; the checkpoint is verified again."""
        repos = {name: s.config.cwd for name, s in self.sessions.items()}
        root = self.state_dir / "verify"
        cleaned = await anyio.to_thread.run_sync(leftovers.clean_verify_leftovers, root, repos)
        if cleaned.worktrees or cleaned.processes:
            self.commit_daemon_event(
                "verify-leftovers-removed",
                f"removed {len(cleaned.worktrees)} scratch worktree(s) and stopped "
                f"{len(cleaned.processes)} process(es) of verifications a killed daemon left",
            )

    def _keep_removed_with_live_runs(self, records: dict[str, SessionRecord]) -> None:
        """Keep supervising sessions herd.toml no longer names whose run may still be alive (it
        was edited while they ran): found, shown and stopped like the rest, they go at the
        first `herd up` after they stop. A stand-in config from their last run: never restart."""
        assert self.store is not None
        for name, record in records.items():
            if name in self.sessions or record.state not in RUN_MAY_LIVE:
                continue
            run = self.store.run(name, record.run)
            if run is None or not run.argv:
                continue
            standin = SessionConfig(
                name=name,
                command=run.argv,
                cwd=Path(run.cwd or self.config.path.parent),
                autostart=False,
                restart="never",
            )
            log.info("%s is no longer in herd.toml but its run %d may live: kept", name, run.run)
            self._add_session(standin, record)

    def _add_session(
        self, config: SessionConfig, record: SessionRecord | None
    ) -> SessionSupervisor:
        assert self.ctx is not None and self.queue is not None
        supervisor = SessionSupervisor(config, record or SessionRecord(name=config.name), self.ctx)
        supervisor.observer.use_verifier(self.queue.submit)
        self.sessions[config.name] = supervisor
        return supervisor

    async def reload(self) -> dict[str, list[str]]:
        """Re-read herd.toml: new sessions join, changed ones apply from their next run on.

        A removed session goes unless it is still running; a file with problems changes nothing.
        """
        try:
            config = await anyio.to_thread.run_sync(load_config, self.config.path)
        except ConfigError as exc:
            raise ApiError("bad-config", "; ".join(str(p) for p in exc.problems)) from None
        assert self.store is not None
        records = self.store.sessions()
        added, changed, removed, kept = [], [], [], []
        for session_config in config.sessions:
            current = self.sessions.get(session_config.name)
            if current is None:
                supervisor = self._add_session(session_config, records.get(session_config.name))
                await supervisor.observer.git_paths()
                supervisor.refresher.everything()
                added.append(session_config.name)
            elif current.config != session_config:
                current.config = session_config
                current.touch()  # its status shows the new config (`archived`)
                changed.append(session_config.name)
        wanted = {s.name for s in config.sessions}
        for name in [n for n in self.sessions if n not in wanted]:
            if self.sessions[name].record.state in ACTIVE_STATES:
                kept.append(name)  # it goes once it is stopped and herd.toml is read again
            else:
                del self.sessions[name]
                removed.append(name)
        self.config = config
        assert self.ctx is not None and self.ctx.watch is not None
        self.ctx.use_config(config)
        self.ctx.budgets.mark_all()  # limits may have changed
        self.ctx.watch.update()
        self.ctx.chains.advance_all()  # a link's `after` may have changed
        summary = {"added": added, "changed": changed, "removed": removed, "still_running": kept}
        if added or changed or removed or kept:
            parts = [f"{k.replace('_', ' ')}: {', '.join(v)}" for k, v in summary.items() if v]
            self.commit_daemon_event("config-reloaded", "herd.toml read again; " + "; ".join(parts))
        return summary

    def _on_file_change(self, session: str, kind: WatchKind) -> None:
        supervisor = self.sessions.get(session)
        if supervisor is not None:
            supervisor.refresher.changed(kind)

    async def run_logged(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run background work whose failure must be logged, never take the daemon down."""
        try:
            await work()
        except Exception:
            log.exception("background work failed")

    def request_shutdown(self) -> None:
        """Leave the serve loop; agents keep running (a new daemon will adopt them)."""
        self._shutdown.set()

    async def _reconcile_loop(self) -> None:
        """Catch what the watcher missed (inotify drops events silently) and cap logs.

        Each session once per reconcile period, a few at a time spread over it: a fleet's
        worth of stats at once held the loop over 100 ms on a busy machine; 200 idle sessions
        cost four looks a second instead of 200 every few seconds.
        """
        assert self.ctx is not None
        budgets = self.ctx.budgets
        while True:
            sessions = list(self.sessions.values())
            # A few sessions a wake-up, at most one wake-up a RECONCILE_STEP_S: one a session
            # woke an idle 200-session loop 200 times a minute for a few stats each.
            steps = max(1, min(len(sessions), int(self.timings.reconcile_s / RECONCILE_STEP_S)))
            per_step = -(-len(sessions) // steps)
            groups = [sessions[i : i + per_step] for i in range(0, len(sessions), per_step)]
            for group in groups:
                await anyio.sleep(self.timings.reconcile_s / len(groups))
                for supervisor in group:
                    if self.sessions.get(supervisor.config.name) is not supervisor:
                        continue  # removed by a reload meanwhile
                    supervisor.follower.check_log_cap()
                    supervisor.check_stall()
                    supervisor.refresher.everything()
                    budgets.revisit(supervisor)
            if not sessions:
                await anyio.sleep(self.timings.reconcile_s)
            self.reconcile_passes += 1

    async def _tick_loop(self) -> None:
        """The daemon-wide checks: watched folders that appeared or went, a disk no longer full."""
        failures_seen = 0
        while True:
            await anyio.sleep(self.timings.tick_s)
            if self.watcher is not None:
                restarted = self.watcher.recheck()
                failing = self.watcher.failures > failures_seen
                failures_seen = self.watcher.failures
                if restarted or failing:  # changes in the gap raised no event: read every log
                    await self.watcher.wait_watching()
                    for supervisor in list(self.sessions.values()):
                        supervisor.wake()
            self._catch_up_after_disk_full()

    def _catch_up_after_disk_full(self) -> None:
        """Write what a full disk held back, say so, and read every session's files again."""
        assert self.store is not None
        self.store.retry()
        outage = self.store.take_recovery()
        if outage is None:
            return
        lost = f"; {outage.dropped_events} event(s) were dropped" if outage.dropped_events else ""
        self.commit_daemon_event(
            "disk-full",
            f"the state disk was full for {time.monotonic() - outage.since:.0f}s "
            f"({outage.error}); {outage.held_changes} change(s) held in memory are written "
            f"now{lost}",
        )
        for supervisor in self.sessions.values():
            supervisor.observer.reread()  # checkpoints the store could not take come from git
            supervisor.refresher.everything()

    def commit_daemon_event(self, kind: str, message: str) -> None:
        self.commit_event(Event(at=iso(utc_now()) or "", kind=kind, message=message))

    def commit_event(self, event: Event) -> None:
        """Write an event that changes no state (the daemon's own, a recorded call) and
        announce it."""
        assert self.store is not None
        self.news.announce(self.store.commit(Change(events=(event,))))

    # ----- the API ----------------------------------------------------------------------


def run_foreground(
    config: HerdConfig,
    socket_path: Path | None = None,
    owns: Callable[[str], bool] | None = None,
    fleet_share: FleetShare | None = None,
    on_stop_signal: Callable[[], None] | None = None,
) -> None:
    """`herd daemon`: serve until `herd down`, SIGTERM or SIGINT (which leave agents running);
    `owns`: across hosts, which sessions this host may restart or re-adopt; `fleet_share`:
    the other hosts' spend; `on_stop_signal`: run in a thread at SIGTERM or SIGINT, while the
    daemon still serves, before it goes down (a cluster host stops its agents there)."""
    daemon = Daemon(config, socket_path, owns=owns, fleet_share=fleet_share)
    daemon.take_lock()  # before any task starts, so a second daemon exits at once

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def on_signals() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        if on_stop_signal is not None:
                            await anyio.to_thread.run_sync(on_stop_signal)
                        daemon.request_shutdown()
                        return

            tg.start_soon(on_signals)
            await daemon.serve()
            tg.cancel_scope.cancel()

    anyio.run(main)
