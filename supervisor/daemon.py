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
from anyio.abc import TaskGroup

from agentherd.sessions.config import ConfigError, HerdConfig, SessionConfig, load_config
from agentherd.sessions.records import Event, SessionRecord
from agentherd.sessions.states import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    WAIT_EXIT_CODES,
    State,
    task_state,
)
from agentherd.supervisor import server
from agentherd.supervisor.context import Context, Timings
from agentherd.supervisor.paths import prepare_state_dir, run_dir, socket_path_for
from agentherd.supervisor.procs import OUTPUT_FILE
from agentherd.supervisor.protocol import HERD_VERSION, ApiError
from agentherd.supervisor.reporting import session_report
from agentherd.supervisor.session import SessionError, SessionSupervisor
from agentherd.supervisor.store import Change, Store, iso, utc_now
from agentherd.supervisor.verify import VerificationQueue
from agentherd.supervisor.watcher import FleetWatcher, WatchKind, WatchTarget

log = logging.getLogger("herd.daemon")

SNAPSHOT_INTERVAL_S = 0.05
"""Subscribers get at most 20 snapshots a second, each replacing the last."""

WATCH_UPDATE_DELAY_S = 0.05
"""New runs' logs join the watch after this pause, so fifty starts cost one watcher restart."""

MAX_CONCURRENT_VERIFICATIONS = 2
"""Verifications across the fleet at once: a test suite can use a core each, and we have few."""

DOWN_TIMEOUT_S = 60.0
"""`herd down` gives every session this long to stop before the daemon exits anyway."""


class DaemonAlreadyRunning(Exception):
    """Another daemon holds this state folder's lock."""


class Daemon:
    """One per state folder: the single writer of state, and the control API's server."""

    def __init__(
        self, config: HerdConfig, socket_path: Path | None = None, timings: Timings | None = None
    ) -> None:
        self.config = config
        self.state_dir = config.state_dir
        self.socket_path = socket_path or socket_path_for(self.state_dir)
        self.timings = timings or Timings()
        self.sessions: dict[str, SessionSupervisor] = {}
        self.store: Store | None = None
        self._shutdown = anyio.Event()
        self._changed = anyio.Event()
        self._lock_fd: int | None = None
        self._tg: TaskGroup | None = None
        self.watcher: FleetWatcher | None = None
        self.ctx: Context | None = None
        self.queue: VerificationQueue | None = None
        self.reconcile_passes = 0
        self._targets_update_pending = False
        self.started_at = iso(utc_now())

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
        try:
            self.store = Store(self.state_dir / "state.db")
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self.ctx = Context(
                    self.store,
                    self.state_dir,
                    tg,
                    self.timings,
                    self._announce,
                    self.config.path,
                    self._runs_changed,
                )
                self.queue = VerificationQueue(MAX_CONCURRENT_VERIFICATIONS)
                await tg.start(self.queue.run)
                records = self.store.sessions()
                for session_config in self.config.sessions:
                    self._add_session(session_config, records.get(session_config.name))
                self.watcher = FleetWatcher(
                    self._on_file_change, self.timings.watch_debounce_ms, self.timings.watch_step_ms
                )
                listener = await server.listen(self.socket_path)
                tg.start_soon(server.serve, listener, self.handle)
                for supervisor in self.sessions.values():
                    await supervisor.reconcile()
                async with anyio.create_task_group() as lookups:  # git folders, for the watcher
                    for supervisor in self.sessions.values():
                        lookups.start_soon(supervisor.observer.git_paths)
                self.update_watch_targets()
                await tg.start(self.watcher.run)
                for supervisor in self.sessions.values():
                    supervisor.refresh_everything()
                self._commit_daemon_event(
                    "daemon-started", f"daemon {HERD_VERSION} started (pid {os.getpid()})"
                )
                tg.start_soon(self._reconcile_loop)
                log.info("daemon ready on %s", self.socket_path)
                task_status.started()
                await self._shutdown.wait()
                tg.cancel_scope.cancel()
        finally:
            if self.store is not None:
                self.store.close()
            if self.socket_path.exists():
                self.socket_path.unlink(missing_ok=True)
            self._release_lock()
            log.info("daemon stopped")

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
                supervisor.refresh_everything()
                added.append(session_config.name)
            elif current.config != session_config:
                current.config = session_config
                changed.append(session_config.name)
        wanted = {s.name for s in config.sessions}
        for name in [n for n in self.sessions if n not in wanted]:
            if self.sessions[name].record.state in ACTIVE_STATES:
                kept.append(name)  # it goes once it is stopped and herd.toml is read again
            else:
                del self.sessions[name]
                removed.append(name)
        self.config = config
        self.update_watch_targets()
        summary = {"added": added, "changed": changed, "removed": removed, "still_running": kept}
        if added or changed or removed or kept:
            parts = [f"{k.replace('_', ' ')}: {', '.join(v)}" for k, v in summary.items() if v]
            self._commit_daemon_event(
                "config-reloaded", "herd.toml read again; " + "; ".join(parts)
            )
        return summary

    def _on_file_change(self, session: str, kind: WatchKind) -> None:
        supervisor = self.sessions.get(session)
        if supervisor is not None:
            supervisor.on_file_change(kind)

    def _runs_changed(self) -> None:
        """A run started: update the watch once the burst is over (a fleet starts at once)."""
        if self._targets_update_pending or self._tg is None:
            return
        self._targets_update_pending = True

        async def later() -> None:
            await anyio.sleep(WATCH_UPDATE_DELAY_S)
            self._targets_update_pending = False
            self.update_watch_targets()

        self._tg.start_soon(later)

    def update_watch_targets(self) -> None:
        """Tell the one fleet watcher which files matter now (called when a run starts)."""
        if self.watcher is None:
            return
        targets: list[WatchTarget] = []
        for name, supervisor in self.sessions.items():
            observer = supervisor.observer
            for kind, path in (("plan", observer.plan_path), ("progress", observer.progress_path)):
                if path is not None:
                    targets.append(WatchTarget(name, kind, path))  # type: ignore[arg-type]
            if supervisor.run is not None:
                targets.append(WatchTarget(name, "log", supervisor.run.tailer.path))
            paths = observer.cached_git_paths
            if paths is not None:
                targets.extend(WatchTarget(name, "git", folder) for folder in paths.watch_dirs)
        self.watcher.set_targets(targets)

    async def _logged(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run background work whose failure must be logged, never take the daemon down."""
        try:
            await work()
        except Exception:
            log.exception("background work failed")

    def request_shutdown(self) -> None:
        """Leave the serve loop; agents keep running (a new daemon will adopt them)."""
        self._shutdown.set()

    async def _reconcile_loop(self) -> None:
        """Catch what the watcher missed (inotify drops events silently) and cap logs."""
        while True:
            await anyio.sleep(self.timings.reconcile_s)
            for supervisor in self.sessions.values():
                supervisor.check_log_cap()
                supervisor.check_stall()
                supervisor.refresh_everything()
            if self.watcher is not None:
                self.watcher.recheck()
            self.reconcile_passes += 1

    def _announce(self, events: list[Event]) -> None:
        for event in events:
            log.info("%s %s: %s", event.session or "-", event.kind, event.message)
        self._changed.set()
        self._changed = anyio.Event()

    def _commit_daemon_event(self, kind: str, message: str) -> None:
        assert self.store is not None
        event = Event(at=iso(utc_now()) or "", kind=kind, message=message)
        self._announce(self.store.commit(Change(events=(event,))))

    # ----- the API ----------------------------------------------------------------------

    def _session(self, name: Any) -> SessionSupervisor:
        if not isinstance(name, str) or name not in self.sessions:
            known = ", ".join(sorted(self.sessions)) or "none"
            raise ApiError("unknown-session", f"no session named {name!r} (sessions: {known})")
        return self.sessions[name]

    async def handle(self, request: dict[str, Any], send: server.Sender) -> None:
        """Answer one request; streaming ops call `send` repeatedly."""
        op = request.get("op")
        method = getattr(self, f"op_{str(op).replace('-', '_')}", None)
        if method is None:
            raise ApiError("bad-request", f"unknown operation {op!r}")
        try:
            await method(request, send)
        except SessionError as exc:
            raise ApiError("bad-state", str(exc)) from None

    async def op_ls(self, request: dict[str, Any], send: server.Sender) -> None:
        await send(result=[s.status() for s in self.sessions.values()])

    async def op_status(self, request: dict[str, Any], send: server.Sender) -> None:
        target = request.get("target")
        if not target:
            await send(result=[s.status() for s in self.sessions.values()])
            return
        await send(result=self._target_status(str(target)))

    def _target_status(self, target: str) -> dict[str, Any]:
        """A session's status, or a task's when given a handle like api/3."""
        if "/" not in target:
            return self._session(target).status()
        name, _, number = target.partition("/")
        supervisor = self._session(name)
        if supervisor.record.handle == target:
            return supervisor.status()
        assert self.store is not None
        task = self.store.task(target)
        if task is None:
            raise ApiError(
                "unknown-handle", f"no task {target!r}; `herd status {name}` shows the current one"
            )
        return {
            "session": name,
            "handle": target,
            "run": task.first_run,
            "state": task.state,
            "task_state": task_state(task.state),
            "reason": task.reason,
            "started_at": task.started_at,
            "ended_at": task.ended_at,
        }

    async def op_start(self, request: dict[str, Any], send: server.Sender) -> None:
        supervisor = self._session(request.get("name"))
        handle = await supervisor.start()
        await send(
            result={
                "handle": handle,
                "session": supervisor.config.name,
                "state": str(supervisor.record.state),
            }
        )

    async def op_up(self, request: dict[str, Any], send: server.Sender) -> None:
        names = request.get("names") or [
            s.config.name
            for s in self.sessions.values()
            if s.config.autostart
            and (
                s.record.state == State.IDLE
                or (s.record.state == State.STOPPED and s.record.reason == "down")
            )
        ]
        started = []
        for name in names:
            supervisor = self._session(name)
            started.append({"session": name, "handle": await supervisor.start()})
        await send(result=started)

    async def op_stop(self, request: dict[str, Any], send: server.Sender) -> None:
        supervisor = self._session(request.get("name"))
        kill = bool(request.get("kill"))
        if request.get("no_wait"):
            assert self._tg is not None
            self._tg.start_soon(self._logged, functools.partial(supervisor.stop, kill=kill))
        else:
            await supervisor.stop(kill=kill)
        await send(result=supervisor.status())

    async def op_restart(self, request: dict[str, Any], send: server.Sender) -> None:
        supervisor = self._session(request.get("name"))
        source = request.get("from")
        try:
            handle = await supervisor.restart(source)
        except ValueError as exc:
            raise ApiError("bad-request", str(exc)) from None
        await send(
            result={
                "handle": handle,
                "session": supervisor.config.name,
                "state": str(supervisor.record.state),
            }
        )

    async def op_pause(self, request: dict[str, Any], send: server.Sender) -> None:
        supervisor = self._session(request.get("name"))
        await supervisor.pause()
        await send(result=supervisor.status())

    async def op_resume(self, request: dict[str, Any], send: server.Sender) -> None:
        supervisor = self._session(request.get("name"))
        await supervisor.resume_run()
        await send(result=supervisor.status())

    async def op_wait(self, request: dict[str, Any], send: server.Sender) -> None:
        target = str(request.get("target") or "")
        timeout_s = request.get("timeout_s")
        name = target.partition("/")[0]
        supervisor = self._session(name)
        handle = target if "/" in target else supervisor.record.handle
        if handle is None:
            raise ApiError("bad-state", f"{name} has never been started; `herd start {name}`")
        assert self.store is not None
        deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
        while True:
            task = self.store.task(handle)
            if task is None:
                raise ApiError("unknown-handle", f"no task {handle!r}")
            if task.state in TERMINAL_STATES:
                await send(
                    result={
                        "handle": handle,
                        "state": str(task.state),
                        "reason": task.reason,
                        "exit": WAIT_EXIT_CODES[State(task.state)],
                    }
                )
                return
            changed = self._changed
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                await send(
                    result={
                        "handle": handle,
                        "state": str(task.state),
                        "reason": task.reason,
                        "exit": 124,
                    }
                )
                return
            with anyio.move_on_after(min(remaining or 1.0, 1.0)):
                await changed.wait()

    async def op_events(self, request: dict[str, Any], send: server.Sender) -> None:
        assert self.store is not None
        since = int(request.get("since") or 0)
        session = request.get("session")
        if session is not None:
            self._session(session)
        follow = bool(request.get("follow"))
        limit = int(request.get("limit") or 1000)
        if not follow:
            events = self.store.events(since, session, limit=limit)
            await send(result=[e.to_json() for e in events])
            return
        while True:
            changed = self._changed
            events = self.store.events(since, session, limit=limit)
            for event in events:
                await send(stream=event.to_json())
                since = event.seq or since
            if not events:
                await changed.wait()

    async def op_subscribe(self, request: dict[str, Any], send: server.Sender) -> None:
        """Push coalesced snapshots of every session: at most one per SNAPSHOT_INTERVAL_S."""
        last_version = -1
        while True:
            version = sum(s.version for s in self.sessions.values())
            if version != last_version:
                last_version = version
                await send(
                    stream={
                        "sessions": [s.status() for s in self.sessions.values()],
                        "at": iso(utc_now()),
                    }
                )
            await anyio.sleep(SNAPSHOT_INTERVAL_S)

    async def op_log_info(self, request: dict[str, Any], send: server.Sender) -> None:
        """Where a run's output (and the progress file) is, so clients read it themselves."""
        supervisor = self._session(request.get("name"))
        number = int(request.get("run") or supervisor.record.run or 0)
        progress = supervisor.config.progress
        live = supervisor.run is not None and not supervisor.run.exited.is_set()
        path = run_dir(self.state_dir, supervisor.config.name, number) / OUTPUT_FILE
        await send(
            result={
                "run": number or None,
                "path": str(path) if number else None,
                "current_run": supervisor.record.run,
                "live": live and number == supervisor.record.run,
                "progress": str(supervisor.config.cwd / progress) if progress else None,
                "state": str(supervisor.record.state),
            }
        )

    async def op_approve(self, request: dict[str, Any], send: server.Sender) -> None:
        """Adopt the current plan as the session's baseline (a person accepted the change)."""
        supervisor = self._session(request.get("name"))
        observer = supervisor.observer
        if observer.plan_current is None:
            raise ApiError("bad-state", f"{supervisor.config.name} has no plan to approve")
        changes = len(observer.plan_diff.changed_items) if observer.plan_diff else 0
        observer.accept_plan()
        supervisor.commit_events(
            supervisor.make_event(
                "plan-approved",
                f"plan approved as the new baseline ({changes} change(s) accepted)",
                passing=observer.plan_current.passing,
                total=observer.plan_current.total,
            )
        )
        await send(result=supervisor.status())

    async def op_report(self, request: dict[str, Any], send: server.Sender) -> None:
        supervisor = self._session(request.get("name"))
        await send(result=await session_report(supervisor))

    async def op_down(self, request: dict[str, Any], send: server.Sender) -> None:
        """Stop every session gracefully, then the daemon."""
        with anyio.move_on_after(DOWN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for supervisor in self.sessions.values():
                    tg.start_soon(functools.partial(supervisor.stop, reason="down"))
        self._commit_daemon_event("daemon-stopping", "daemon stopping (herd down)")
        await send(result={"stopped": [s.status() for s in self.sessions.values()]})
        self.request_shutdown()

    async def op_shutdown(self, request: dict[str, Any], send: server.Sender) -> None:
        """Exit the daemon and leave the agents running."""
        await send(result={"pid": os.getpid()})
        self.request_shutdown()

    async def op_reload(self, request: dict[str, Any], send: server.Sender) -> None:
        await send(result=await self.reload())

    async def op_info(self, request: dict[str, Any], send: server.Sender) -> None:
        await send(
            result={
                "version": HERD_VERSION,
                "pid": os.getpid(),
                "config": str(self.config.path),
                "state_dir": str(self.state_dir),
                "started_at": self.started_at,
                "reconcile_passes": self.reconcile_passes,
                "sessions": sorted(self.sessions),
            }
        )


def run_foreground(config: HerdConfig, socket_path: Path | None = None) -> None:
    """`herd daemon`: serve until `herd down`, SIGTERM or SIGINT (which leave agents running)."""
    daemon = Daemon(config, socket_path)
    daemon.take_lock()  # before any task starts, so a second daemon exits at once

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def on_signals() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        daemon.request_shutdown()
                        return

            tg.start_soon(on_signals)
            await daemon.serve()
            tg.cancel_scope.cancel()

    anyio.run(main)
