"""Drift as conditions a person can act on: closing, acknowledging, notifying, on_drift actions.

The rules are pure (sessions/drift.py, open_warnings.py, notify.py); this part of a session
supervisor applies them: after each commit it notifies and acts on what opened, and on the
slow pass it judges the burn rate. It never writes but through the session's `_commit`.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio

from agentherd.sessions import lifecycle, notify
from agentherd.sessions.drift import (
    DRIFT_KIND_NAMES,
    DRIFT_KINDS,
    FailureStreak,
    StallClock,
    burn_without_progress,
    failure_signature,
)
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.records import WARNING_KINDS, Event, RunRecord
from agentherd.sessions.sanitize import inert
from agentherd.sessions.states import State
from agentherd.sessions.times import iso, parse_iso, utc_now
from agentherd.supervisor.process import procs
from agentherd.supervisor.process.notifier import run_notify
from agentherd.supervisor.session.parts import SessionParts

log = logging.getLogger("herd.drift")

TASK_END_KINDS = frozenset({"completed", "failed", "stopped"})
"""The events that end a task (`lifecycle.task_end_kind`)."""

STALL_HELD_STATES = frozenset({State.PAUSED, State.WAITING_APPROVAL})
"""A run held by a person (or the approval gate): its stall clock is stopped."""

STALL_KEPT_STATES = frozenset({State.RUNNING}) | STALL_HELD_STATES
"""A live run whose stall clock a new daemon takes over (a new run starts a new clock)."""

DRIFT_RESTART = "drift:"
"""A run's `stop_reason` while on_drift = restart stops it, before the drift kind."""

CLOSED_BY_PROGRESS = tuple(kind.name for kind in DRIFT_KINDS if kind.closed_by_progress)
"""Warnings whose cause is gone once a plan item flips to passing."""


@dataclass
class DriftState:
    """What the drift rules remember between events, per session (in memory)."""

    verify_streak: FailureStreak = field(default_factory=FailureStreak)
    crash_streak: FailureStreak = field(default_factory=FailureStreak)
    passing_seen: int | None = None
    """Plan items passing at the last look: a rise is progress."""
    spent_at_flip: dict[str, float] = field(default_factory=dict)
    """What the task had spent when an item last flipped to passing (or when it began)."""
    carry_streaks: bool = False
    """The task was stopped by `herd down`: the next task (`herd up`) continues its streaks."""
    restart_run: int | None = None
    """The run that on_drift = restart is stopping: its end restarts from a verified checkpoint."""
    restart_kind: str = ""


class DriftHandling(SessionParts):
    """The part of a session supervisor that turns drift into closings, notices and actions."""

    drift: DriftState

    def restored_drift(self) -> DriftState:
        """What the drift rules remember, with the burn baseline and streaks a previous daemon
        saved.

        Without them a new daemon would measure burn from its own start and count the same
        failure from one again (issue 12).
        """
        record = self.record
        saved = record.drift_spent_at_flip
        if saved is None:
            state = DriftState(spent_at_flip=self._spent())
        else:
            state = DriftState(passing_seen=record.drift_passing_seen, spent_at_flip=dict(saved))
        for source, streak in (("verify", state.verify_streak), ("crash", state.crash_streak)):
            kept = record.drift_streaks.get(source)
            if kept is not None:
                streak.signature, streak.length = kept
        # Stopped by `herd down` (or being stopped when that daemon died): `herd up` goes on.
        state.carry_streaks = lifecycle.stopping_for_down(record.state, record.reason)
        return state

    def _keep_burn_baseline(self) -> None:
        """Put the burn baseline on the session record, which every commit writes."""
        self.record.drift_spent_at_flip = dict(self.drift.spent_at_flip)
        self.record.drift_passing_seen = self.drift.passing_seen

    def _keep_streaks(self) -> None:
        """Put the failure streaks on the session record, written with the verdict or exit that
        changed them (one transaction: a daemon killed in between loses neither)."""
        streaks: dict[str, tuple[str, int]] = {}
        for source, streak in (
            ("verify", self.drift.verify_streak),
            ("crash", self.drift.crash_streak),
        ):
            if streak.signature is not None:
                streaks[source] = (streak.signature, streak.length)
        self.record.drift_streaks = streaks

    # ----- the stall clock across daemons -----------------------------------------------------

    def restored_stall_clock(self) -> StallClock:
        """The stall clock as the previous daemon left it, so a stalled agent's silence does
        not start over when a new daemon adopts it (nor does paused time start to count).

        Output, progress and commits read afterwards count from when they were written.
        """
        now_s = time.monotonic()
        record = self.record
        since = parse_iso(record.stall_since_at)
        if since is None or record.state not in STALL_KEPT_STATES:
            return StallClock(now_s)
        clock = StallClock(_monotonic_at(since, now_s))
        if record.state in STALL_HELD_STATES:
            paused = parse_iso(record.stall_paused_at)
            clock.paused_since_s = _monotonic_at(paused, now_s) if paused else now_s
        stalled = self.warnings.get("stalled")
        if stalled is not None:  # raised already: not again, and a later write closes it
            clock.warned = True
            warned_at = parse_iso(stalled.last_at)
            clock.warned_at_s = _monotonic_at(warned_at, now_s) if warned_at else now_s
        return clock

    def keep_stall_clock(self) -> None:
        """Put the stall clock on the session record (as wall times), which every commit writes."""
        clock = self.stall
        now_s, now_wall_s = time.monotonic(), time.time()
        self.record.stall_since_at = _iso_at(clock.last_activity_s, now_s, now_wall_s)
        paused = clock.paused_since_s
        self.record.stall_paused_at = None if paused is None else _iso_at(paused, now_s, now_wall_s)

    def progress_written(self, at_wall_s: float) -> None:
        """The progress file was written at `at_wall_s` (its mtime): activity as of then.

        Read at once, that is now; read first by a new daemon, it is as old as the file, so
        the silence that went before goes on counting.
        """
        now_s = time.monotonic()
        written_s = now_s - max(0.0, time.time() - at_wall_s)
        self.stall.output_written(written_s, now_s, self.config.budget.stall)
        if self.warnings.is_open("stalled") and not self.stall.warned:
            self.close_warning("stalled", "the agent wrote a progress entry", "progress")
        self.version += 1  # the progress shown changed

    # ----- after every commit ----------------------------------------------------------------

    def _after_written(self, written: list[Event]) -> None:
        """Notify and act on events just written (a warning only at its opening)."""
        for event in written:
            kind = event.kind
            if kind == "task-started":
                before = self.drift
                self.drift = DriftState(spent_at_flip=self._spent())
                if before.carry_streaks:  # `herd up` goes on with what `herd down` stopped
                    self.drift.verify_streak = before.verify_streak
                    self.drift.crash_streak = before.crash_streak
                self._keep_burn_baseline()  # written with the next commit
                self._keep_streaks()
            elif kind in TASK_END_KINDS:
                self.drift.carry_streaks = event.data.get("reason") == "down"
            opening = True
            if kind in WARNING_KINDS:
                record = self.warnings.get(kind)
                opening = record is not None and record.opened_seq == event.seq
            drift_kind = kind
            if kind == "failed" and event.data.get("reason") == "crash-loop":
                drift_kind = "crash-loop"  # a task end, not a warning: only `notify` applies
            action: str | None = None
            if drift_kind in DRIFT_KIND_NAMES:
                found = [v for k, v in self.config.on_drift.items() if k == drift_kind]
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
        values = notify.values(self.config.name, event.kind, event.message, self.record.handle)
        argv = notify.fill(argv_template, values)
        async with self.ctx.notifications:
            result = await run_notify(argv, self.ctx.timings.notify_timeout_s)
        if result.error is not None:
            self._commit(
                self._event(
                    "notify-failed",
                    f"notify for {event.kind} failed: {result.error}",
                    event.run,
                    argv0=argv[0],
                    exit_code=result.exit_code,
                    timed_out=result.timed_out,
                    for_seq=event.seq,
                )
            )

    # ----- a person's answer -----------------------------------------------------------------

    def ack(self, kind: str | None) -> list[str]:
        """Acknowledge one open warning (or all): each gets a `warning-acked` event."""
        waiting = [r.kind for r in self.warnings.open() if r.acked_seq is None]
        if kind is not None:
            if kind not in waiting:
                shown = ", ".join(waiting) or "none"
                raise ValueError(
                    f"{self.config.name} has no unacknowledged open warning {kind!r} "
                    f"(open: {shown})"
                )
            waiting = [kind]
        if waiting:
            self._commit(
                *(
                    _naming(
                        self._event("warning-acked", f"{w} acknowledged", self.record.run or None),
                        w,
                    )
                    for w in waiting
                )
            )
        return waiting

    def close_warning(self, kind: str, why: str, by: str) -> None:
        """Close an open warning whose cause is gone (a condition, not another event)."""
        if not self.warnings.is_open(kind):
            return
        self._commit(
            _naming(
                self._event(
                    "warning-closed", f"{kind} closed ({why})", self.record.run or None, by=by
                ),
                kind,
            )
        )

    # ----- on_drift actions ------------------------------------------------------------------

    async def _act(self, action: str, kind: str) -> None:
        """Apply `on_drift`'s action for a warning that just opened."""
        if not self.warnings.is_open(kind):
            return  # its cause went away before the action came to apply (a plan written back)
        try:
            if action == "pause":
                await self._drift_pause(kind)
            elif action == "stop":
                await self.stop(reason=f"drift:{kind}")
            elif action == "restart":
                await self._drift_restart(kind)
        except Exception:  # an action that cannot apply leaves the warning; never the daemon
            log.exception("%s: on_drift %s for %s failed", self.config.name, action, kind)

    async def _drift_pause(self, kind: str) -> None:
        """The approval gate: SIGSTOP the run and wait for `herd approve` or `herd reject`."""
        async with self._lock:
            run = self.run
            if self.record.state not in (State.RUNNING, State.PAUSED):
                return
            if run is None or run.exited.is_set() or not self.warnings.is_open(kind):
                return
            if not run.paused:
                timings = self.ctx.timings
                await anyio.to_thread.run_sync(
                    procs.pause_run, run.identity, timings.pause_wait_s, timings.stop_poll_s
                )
                run.paused = True
                self.stall.pause(time.monotonic())
            name = self.config.name
            self._transition(
                State.WAITING_APPROVAL,
                kind,
                _naming(
                    self._event(
                        "waiting-approval",
                        f"{kind}: the run is paused until `herd approve {name}` "
                        f"or `herd reject {name}`",
                        run.record.run,
                    ),
                    kind,
                ),
                by=Trigger.DRIFT_PAUSE,
            )

    async def continue_after_approval(self, answer: str, *events: Event) -> bool:
        """Continue a run held at the approval gate (SIGCONT); False when none was held."""
        if self.record.state != State.WAITING_APPROVAL:
            return False
        run = self.run
        if run is not None and not run.exited.is_set():
            await anyio.to_thread.run_sync(procs.signal_run, run.identity, signal.SIGCONT)
            run.paused = False
        self.stall.resume(time.monotonic())
        approved = answer == "approved"
        answer_kind = "approved" if approved else "rejected"
        self._transition(
            State.RUNNING,
            None,
            *events,
            self._event(answer_kind, f"{answer_kind}: the run continues", self.record.run or None),
            by=Trigger.APPROVE if approved else Trigger.REJECT,
        )
        return True

    async def _drift_restart(self, kind: str) -> None:
        """Stop the run; its end restarts it from the last verified checkpoint, with resume."""
        async with self._lock:
            run = self.run
            if self.record.state not in (State.RUNNING, State.PAUSED, State.WAITING_APPROVAL):
                return
            if run is None or run.exited.is_set():
                return
            self.drift.restart_run = run.record.run
            self.drift.restart_kind = kind
            # Kept with the run: a daemon that dies before the run's end is handled leaves the
            # next one to finish this stop and restart it the same way.
            run.record.stop_reason = DRIFT_RESTART + kind
            self._commit(run=run.record)
            identity = run.identity
            paused = run.paused
        # Outside the lock: the exit handler takes it to schedule the restart.
        await procs.stop_tree(
            identity,
            self.config.stop_signal_number,
            self.config.stop_grace,
            self.ctx.timings.kill_wait_s,
            self.ctx.timings.stop_poll_s,
            continue_first=paused,
        )

    def drift_restart_of(self, run: int) -> str | None:
        """The drift kind whose `restart` action ended run `run`, once (None: it was not)."""
        if self.drift.restart_run == run:
            self.drift.restart_run = None
            return self.drift.restart_kind
        return _drift_restart_kind(self.run.record if self.run is not None else None, run)

    def resume_drift_restart(self, record: RunRecord) -> None:
        """A new daemon adopted a run that `on_drift = restart` was stopping: stop it again."""
        kind = _drift_restart_kind(record, record.run)
        if kind is not None:
            self.ctx.tg.start_soon(self._drift_restart, kind)

    # ----- repeated-failure -------------------------------------------------------------------

    def verdict_events(self, sha: str, passed: bool, output_tail: str) -> list[Event]:
        """A `repeated-failure` when a checkpoint fails the same way N times in a row."""
        streak = self.drift.verify_streak
        if passed:
            streak.passed()
            self._keep_streaks()
            return []
        length = streak.failed(_digest(failure_signature(output_tail)))
        self._keep_streaks()
        wanted = self.config.drift.repeated_failure
        if length < wanted:
            return []
        return [
            self.make_event(
                "repeated-failure",
                f"checkpoint {sha[:7]} fails the same way as the {length - 1} before it "
                f"({inert(_last_line(output_tail))[:120]})",
                sha=sha,
                streak=length,
                source="verify",
            )
        ]

    def crash_events(self, run: int, outcome: str, last_line: str) -> list[Event]:
        """A `repeated-failure` when runs crash with the same tail N times in a row."""
        streak = self.drift.crash_streak
        if outcome == "success":
            raised = streak.length >= self.config.drift.repeated_failure
            streak.passed()
            self._keep_streaks()
            if raised and self.warnings.is_open("repeated-failure"):
                # The crash that kept coming back is gone: a run ended cleanly.
                closing = self._event(
                    "warning-closed",
                    f"repeated-failure closed (run {run} ended cleanly)",
                    run,
                    by="run-succeeded",
                )
                return [_naming(closing, "repeated-failure")]
            return []
        length = streak.failed(_digest(outcome + "\n" + failure_signature(last_line)))
        self._keep_streaks()
        if length < self.config.drift.repeated_failure:
            return []
        return [
            self._event(
                "repeated-failure",
                f"run {run} crashed the same way as the {length - 1} before it "
                f"({outcome}: {last_line[:120]})",
                run,
                streak=length,
                source="crash",
            )
        ]

    # ----- the slow pass: progress and burn ---------------------------------------------------

    def note_plan_progress(self) -> None:
        """A plan item flipped to passing: a new burn baseline; burn and early-exit close.

        Called as soon as the plan is read, not only on the slow pass: a flip noticed late
        closed the early-exit warning that the next run had opened since.
        """
        plan = self.observer.plan_current
        passing = plan.passing if plan is not None else None
        state = self.drift
        if passing is None or (state.passing_seen is not None and passing <= state.passing_seen):
            return
        flipped = state.passing_seen is not None
        if flipped:
            state.spent_at_flip = self._spent()
        state.passing_seen = passing
        self._keep_burn_baseline()
        if flipped:
            for kind in CLOSED_BY_PROGRESS:
                self.close_warning(kind, f"{passing} plan items pass now", "plan-progress")
        self._commit()  # the new baseline outlives this daemon

    def check_drift(self) -> None:
        """Note plan progress and judge the burn rate (the slow pass)."""
        self.note_plan_progress()
        state = self.drift
        if self.record.state not in (State.RUNNING, State.BACKOFF, State.STARTING):
            return
        if self.warnings.is_open("burn-without-progress"):
            return  # one warning per stretch without progress
        budget = self.config.budget
        limits: dict[str, float | None] = {
            "cost_usd": budget.cost_usd,
            "tokens": budget.tokens,
            "turns": budget.turns,
            "wall_time": budget.wall_time,
            "restarts": budget.restarts,
        }
        if not any(limits.values()):
            return  # nothing to burn: no usage to add up on every pass
        found = burn_without_progress(
            self._spent(), state.spent_at_flip, limits, self.config.drift.burn_without_progress
        )
        if found is None:
            return
        dimension, share = found
        self._commit(
            self.make_event(
                "burn-without-progress",
                f"{share:.0%} of the {dimension} budget spent since a plan item last passed "
                f"(drift.burn_without_progress = {self.config.drift.burn_without_progress:g})",
                dimension=dimension,
                share=round(share, 4),
            )
        )

    def _spent(self) -> dict[str, float]:
        """What the current task has spent, per budget dimension."""
        usage = self.task_usage
        run = self.run
        if run is not None and run.record.ended_at is None:
            usage = usage + run.parser.usage
        started = parse_iso(self.record.task_started_at)
        wall_s = (utc_now() - started).total_seconds() if started is not None else 0.0
        return {
            "cost_usd": usage.cost_usd or 0.0,
            "tokens": float(usage.total_tokens),
            "turns": float(usage.turns),
            "wall_time": wall_s,
            "restarts": float(self.record.restarts),
        }


def _drift_restart_kind(record: RunRecord | None, run: int) -> str | None:
    """The drift kind whose restart a previous daemon began on run `run` (None: none)."""
    if record is None or record.run != run or record.stop_requested:
        return None
    reason = record.stop_reason or ""
    return reason.removeprefix(DRIFT_RESTART) if reason.startswith(DRIFT_RESTART) else None


def _monotonic_at(moment: datetime, now_s: float) -> float:
    """The monotonic time of a wall-clock moment (one in the future counts as now)."""
    return now_s - max(0.0, time.time() - moment.timestamp())


def _iso_at(monotonic_s: float, now_s: float, now_wall_s: float) -> str | None:
    """A monotonic time as the ISO wall time the record keeps."""
    return iso(datetime.fromtimestamp(now_wall_s - (now_s - monotonic_s), UTC))


def _digest(signature: str) -> str:
    """A failure signature as the record keeps it: bounded, however many tests fail."""
    return hashlib.sha256(signature.encode("utf-8", "replace")).hexdigest()[:32]


def _last_line(text: str) -> str:
    """The last non-empty line of `text` (what a person recognises a failure by)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _naming(event: Event, warning_kind: str) -> Event:
    """`event` with its data naming a warning kind (`kind`, the word the contract uses)."""
    event.data["kind"] = warning_kind
    return event
