"""Drift the session remembers: failure streaks, the burn baseline, and warnings closed.

The rules are pure (sessions/drift.py, open_warnings.py); this part of a session keeps what
they need between events (on the session record, which every commit writes) and returns the
events they raise. It writes only through the session's pen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from agentherd.sessions import lifecycle
from agentherd.sessions.adapters import Usage
from agentherd.sessions.drift import (
    DRIFT_KINDS,
    FailureStreak,
    burn_without_progress,
    failure_signature,
)
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import Event, SessionRecord
from agentherd.sessions.sanitize import inert
from agentherd.sessions.states import State
from agentherd.sessions.times import parse_iso, utc_now
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen

TASK_END_KINDS = frozenset({"completed", "failed", "stopped"})
"""The events that end a task (`lifecycle.task_end_kind`)."""

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


class DriftBook:
    """What the drift rules remember of a session, and the events they raise from it."""

    def __init__(
        self,
        pen: Pen,
        warnings: WarningBook,
        spent: Callable[[], dict[str, float]],
        plan_passing: Callable[[], int | None],
    ) -> None:
        self.record = pen.record
        self.pen = pen
        self.warnings = warnings
        self.spent = spent
        """What the current task has spent, per budget dimension."""
        self.plan_passing = plan_passing
        """Plan items passing now (None without a plan)."""
        self.state = self._restored()

    def _restored(self) -> DriftState:
        """What the drift rules remember, with the burn baseline and streaks a previous daemon
        saved.

        Without them a new daemon would measure burn from its own start and count the same
        failure from one again (issue 12).
        """
        record = self.record
        saved = record.drift_spent_at_flip
        if saved is None:
            state = DriftState(spent_at_flip=self.spent())
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
        self.record.drift_spent_at_flip = dict(self.state.spent_at_flip)
        self.record.drift_passing_seen = self.state.passing_seen

    def _keep_streaks(self) -> None:
        """Put the failure streaks on the session record, written with the verdict or exit that
        changed them (one transaction: a daemon killed in between loses neither)."""
        streaks: dict[str, tuple[str, int]] = {}
        for source, streak in (
            ("verify", self.state.verify_streak),
            ("crash", self.state.crash_streak),
        ):
            if streak.signature is not None:
                streaks[source] = (streak.signature, streak.length)
        self.record.drift_streaks = streaks

    def written(self, event: Event) -> None:
        """A task began (the rules start afresh) or ended (`herd down` keeps its streaks)."""
        kind = event.kind
        if kind == "task-started":
            before = self.state
            self.state = DriftState(spent_at_flip=self.spent())
            if before.carry_streaks:  # `herd up` goes on with what `herd down` stopped
                self.state.verify_streak = before.verify_streak
                self.state.crash_streak = before.crash_streak
            self._keep_burn_baseline()  # written with the next commit
            self._keep_streaks()
        elif kind in TASK_END_KINDS:
            self.state.carry_streaks = event.data.get("reason") == "down"

    def ack(self, kind: str | None) -> list[str]:
        """Acknowledge one open warning (or all): each gets a `warning-acked` event."""
        waiting = [r.kind for r in self.warnings.open() if r.acked_seq is None]
        if kind is not None:
            if kind not in waiting:
                shown = ", ".join(waiting) or "none"
                raise SessionError(
                    f"{self.pen.config().name} has no unacknowledged open warning {kind!r} "
                    f"(open: {shown})"
                )
            waiting = [kind]
        if waiting:
            self.pen.commit(
                *(
                    naming(
                        self.pen.event(
                            "warning-acked", f"{w} acknowledged", self.record.run or None
                        ),
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
        self.pen.commit(
            naming(
                self.pen.event(
                    "warning-closed", f"{kind} closed ({why})", self.record.run or None, by=by
                ),
                kind,
            )
        )

    # ----- repeated-failure -------------------------------------------------------------------

    def verdict_events(self, sha: str, passed: bool, output_tail: str) -> list[Event]:
        """A `repeated-failure` when a checkpoint fails the same way N times in a row."""
        streak = self.state.verify_streak
        if passed:
            streak.passed()
            self._keep_streaks()
            return []
        length = streak.failed(_digest(failure_signature(output_tail)))
        self._keep_streaks()
        wanted = self.pen.config().drift.repeated_failure
        if length < wanted:
            return []
        return [
            self.pen.event(
                "repeated-failure",
                f"checkpoint {sha[:7]} fails the same way as the {length - 1} before it "
                f"({inert(_last_line(output_tail))[:120]})",
                self.record.run or None,
                sha=sha,
                streak=length,
                source="verify",
            )
        ]

    def crash_events(self, run: int, outcome: str, last_line: str) -> list[Event]:
        """A `repeated-failure` when runs crash with the same tail N times in a row."""
        streak = self.state.crash_streak
        if outcome == "success":
            raised = streak.length >= self.pen.config().drift.repeated_failure
            streak.passed()
            self._keep_streaks()
            if raised and self.warnings.is_open("repeated-failure"):
                # The crash that kept coming back is gone: a run ended cleanly.
                closing = self.pen.event(
                    "warning-closed",
                    f"repeated-failure closed (run {run} ended cleanly)",
                    run,
                    by="run-succeeded",
                )
                return [naming(closing, "repeated-failure")]
            return []
        length = streak.failed(_digest(outcome + "\n" + failure_signature(last_line)))
        self._keep_streaks()
        if length < self.pen.config().drift.repeated_failure:
            return []
        return [
            self.pen.event(
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
        passing = self.plan_passing()
        state = self.state
        if passing is None or (state.passing_seen is not None and passing <= state.passing_seen):
            return
        flipped = state.passing_seen is not None
        if flipped:
            state.spent_at_flip = self.spent()
        state.passing_seen = passing
        self._keep_burn_baseline()
        if flipped:
            for kind in CLOSED_BY_PROGRESS:
                self.close_warning(kind, f"{passing} plan items pass now", "plan-progress")
        self.pen.commit()  # the new baseline outlives this daemon

    def check_drift(self) -> None:
        """Note plan progress and judge the burn rate (the slow pass)."""
        self.note_plan_progress()
        state = self.state
        if self.record.state not in (State.RUNNING, State.BACKOFF, State.STARTING):
            return
        if self.warnings.is_open("burn-without-progress"):
            return  # one warning per stretch without progress
        budget = self.pen.config().budget
        limits: dict[str, float | None] = {
            "cost_usd": budget.cost_usd,
            "tokens": budget.tokens,
            "turns": budget.turns,
            "wall_time": budget.wall_time,
            "restarts": budget.restarts,
        }
        if not any(limits.values()):
            return  # nothing to burn: no usage to add up on every pass
        drift = self.pen.config().drift
        found = burn_without_progress(
            self.spent(), state.spent_at_flip, limits, drift.burn_without_progress
        )
        if found is None:
            return
        dimension, share = found
        self.pen.commit(
            self.pen.event(
                "burn-without-progress",
                f"{share:.0%} of the {dimension} budget spent since a plan item last passed "
                f"(drift.burn_without_progress = {drift.burn_without_progress:g})",
                self.record.run or None,
                dimension=dimension,
                share=round(share, 4),
            )
        )


def task_spent(task_usage: Usage, run: LiveRun | None, record: SessionRecord) -> dict[str, float]:
    """What the current task has spent, per budget dimension (its ended runs and this one)."""
    usage = task_usage
    if run is not None and run.record.ended_at is None:
        usage = usage + run.parser.usage
    started = parse_iso(record.task_started_at)
    wall_s = (utc_now() - started).total_seconds() if started is not None else 0.0
    return {
        "cost_usd": usage.cost_usd or 0.0,
        "tokens": float(usage.total_tokens),
        "turns": float(usage.turns),
        "wall_time": wall_s,
        "restarts": float(record.restarts),
    }


def _digest(signature: str) -> str:
    """A failure signature as the record keeps it: bounded, however many tests fail."""
    return hashlib.sha256(signature.encode("utf-8", "replace")).hexdigest()[:32]


def _last_line(text: str) -> str:
    """The last non-empty line of `text` (what a person recognises a failure by)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def naming(event: Event, warning_kind: str) -> Event:
    """`event` with its data naming a warning kind (`kind`, the word the contract uses)."""
    event.data["kind"] = warning_kind
    return event
