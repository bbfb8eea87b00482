"""Drift a person can act on: notices, and the on_drift actions (pause, stop, restart).

After each commit the session hands its events here: a warning that just opened is notified
and acted on as `on_drift` says. The approval gate (`pause`) and the drift restart hold the
session's lock; every change is written through the session's pen.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from agentherd.sessions import notify
from agentherd.sessions.drift import DRIFT_KIND_NAMES
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import WARNING_KINDS, Event, RunRecord
from agentherd.sessions.states import LIVE_STATES, State
from agentherd.supervisor.process import procs
from agentherd.supervisor.process.notifier import run_notify
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.driftbook import DriftBook
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen

log = logging.getLogger("herd.drift")

DRIFT_RESTART = "drift:"
"""A run's `stop_reason` while on_drift = restart stops it, before the drift kind."""


class DriftActions:
    """Notifies and acts on drift as herd.toml says, after each of the session's commits."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        book: DriftBook,
        run: Callable[[], LiveRun | None],
        hold: Callable[[str], Awaitable[None]],
        stop: Callable[[str], Coroutine[Any, Any, None]],
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self.lock = pen.lock
        self.book = book
        self.warnings: WarningBook = book.warnings
        self.run = run
        """The run being watched, if any."""
        self.hold = hold
        """Hold the run at the approval gate for a drift kind."""
        self.stop = stop
        """Stop the task for a reason (`drift:<kind>`)."""

    def after_written(self, written: list[Event]) -> None:
        """Notify and act on events just written (a warning only at its opening)."""
        for event in written:
            self.book.written(event)
            kind = event.kind
            opening = True
            if kind in WARNING_KINDS:
                record = self.warnings.get(kind)
                opening = record is not None and record.opened_seq == event.seq
            drift_kind = kind
            if kind == "failed" and event.data.get("reason") == "crash-loop":
                drift_kind = "crash-loop"  # a task end, not a warning: only `notify` applies
            action: str | None = None
            if drift_kind in DRIFT_KIND_NAMES:
                found = [v for k, v in self.pen.config().on_drift.items() if k == drift_kind]
                action = found[0] if found else None
            if self.ctx.notify_argv and notify.wanted(kind, self.ctx.notify_on, action, opening):
                self.ctx.tg.start_soon(self._notify, event)
            if opening and drift_kind == kind and action in ("pause", "restart", "stop"):
                self.ctx.tg.start_soon(self._act, str(action), kind)

    async def _notify(self, event: Event) -> None:
        """Run the notify command for one event; a failure becomes `notify-failed`."""
        argv_template = self.ctx.notify_argv
        if not argv_template:
            return
        values = notify.values(
            self.pen.config().name, event.kind, event.message, self.record.handle
        )
        argv = notify.fill(argv_template, values)
        async with self.ctx.notifications:
            result = await run_notify(argv, self.ctx.timings.notify_timeout_s)
        if result.error is None:
            self.book.close_warning("notify-failed", f"notify for {event.kind} ran", "notify")
        else:
            self.pen.commit(
                self.pen.event(
                    "notify-failed",
                    f"notify for {event.kind} failed: {result.error}",
                    event.run,
                    argv0=argv[0],
                    exit_code=result.exit_code,
                    timed_out=result.timed_out,
                    for_seq=event.seq,
                )
            )

    # ----- on_drift actions ------------------------------------------------------------------

    async def _act(self, action: str, kind: str) -> None:
        """Apply `on_drift`'s action for a warning that just opened."""
        if not self.warnings.is_open(kind):
            return  # its cause went away before the action came to apply (a plan written back)
        try:
            if action == "pause":
                await self.hold(kind)
            elif action == "stop":
                await self.stop(f"drift:{kind}")
            elif action == "restart":
                await self._drift_restart(kind)
        except Exception:  # an action that cannot apply leaves the warning; never the daemon
            log.exception("%s: on_drift %s for %s failed", self.pen.config().name, action, kind)

    async def _drift_restart(self, kind: str) -> None:
        """Stop the run; its end restarts it from the last verified checkpoint, with resume."""
        async with self.lock:
            run = self.run()
            if self.record.state not in (*LIVE_STATES, State.WAITING_APPROVAL):
                return
            if run is None or run.exited.is_set():
                return
            if self.book.state.restart_run == run.record.run:
                # Its stop is under way (the warning closed and opened again meanwhile): a
                # second stop signal would cut the grace short (some agents quit at once then).
                return
            self.book.state.restart_run = run.record.run
            self.book.state.restart_kind = kind
            # Kept with the run: a daemon that dies before the run's end is handled leaves the
            # next one to finish this stop and restart it the same way.
            run.record.stop_reason = DRIFT_RESTART + kind
            self.pen.commit(run=run.record)
            identity = run.identity
            paused = run.paused
        # Outside the lock: the exit handler takes it to schedule the restart.
        await procs.stop_tree(
            identity,
            self.pen.config().stop_signal_number,
            self.pen.config().stop_grace,
            self.ctx.timings.kill_wait_s,
            self.ctx.timings.stop_poll_s,
            continue_first=paused,
        )

    def drift_restart_of(self, run: int) -> str | None:
        """The drift kind whose `restart` action ended run `run`, once (None: it was not)."""
        current = self.run()
        if self.book.state.restart_run == run:
            self.book.state.restart_run = None
            return self.book.state.restart_kind
        return _drift_restart_kind(current.record if current is not None else None, run)

    def resume_drift_restart(self, record: RunRecord) -> None:
        """A new daemon adopted a run that `on_drift = restart` was stopping: stop it again."""
        kind = _drift_restart_kind(record, record.run)
        if kind is not None:
            self.ctx.tg.start_soon(self._drift_restart, kind)


def _drift_restart_kind(record: RunRecord | None, run: int) -> str | None:
    """The drift kind whose restart a previous daemon began on run `run` (None: none)."""
    if record is None or record.run != run or record.stop_requested:
        return None
    reason = record.stop_reason or ""
    return reason.removeprefix(DRIFT_RESTART) if reason.startswith(DRIFT_RESTART) else None
