"""Holding a session's run stopped, and letting it go on: pause and resume, and the approval
gate (`on_drift = pause` holds the run until a person approves or rejects the plan)."""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable

import anyio

from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.plan import change_text
from agentherd.sessions.records import Event
from agentherd.sessions.states import State
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.process import procs
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.driftbook import naming
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.stallkeep import StallWatch

log = logging.getLogger("herd.session")


class Holder:
    """SIGSTOPs and SIGCONTs a session's run, for a person or for the approval gate."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        observer: Observer,
        run: Callable[[], LiveRun | None],
        stall: StallWatch,
        warnings: WarningBook,
        stop_task: Callable[[], Awaitable[object]],
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self.lock = pen.lock
        """The session's lock: every command here holds it."""
        self.observer = observer
        self.run = run
        """The run being watched, if any."""
        self.stall = stall
        """The session's stall clock: time held does not count as silence."""
        self.warnings = warnings
        self.stop_task = stop_task
        """Stop the task (the lock held): a reject with no plan change to undo."""

    async def _stop_run(self, live: LiveRun) -> bool:
        """SIGSTOP every process of the run, again until each shows as stopped."""
        timings = self.ctx.timings
        stopped = await anyio.to_thread.run_sync(
            procs.pause_run, live.identity, timings.pause_wait_s, timings.stop_poll_s
        )
        live.paused = True
        self.stall.pause()
        return bool(stopped)

    async def pause(self) -> None:
        """SIGSTOP the whole run."""
        async with self.lock:
            run = self.run()
            pausable = (State.RUNNING, State.WAITING_INPUT)
            if run is None or run.exited.is_set() or self.record.state not in pausable:
                name = self.pen.config().name
                raise SessionError(f"{name} is {self.record.state}, not running")
            if not await self._stop_run(run):
                log.warning("%s: a process of the run did not stop", self.pen.config().name)
            self.pen.transition(
                State.PAUSED,
                "user",
                self.pen.event("paused", "paused (SIGSTOP)", run.record.run),
                by=Trigger.PAUSE,
            )

    async def resume(self) -> None:
        """SIGCONT the whole run."""
        async with self.lock:
            run = self.run()
            if run is None or self.record.state != State.PAUSED:
                name = self.pen.config().name
                raise SessionError(f"{name} is {self.record.state}, not paused")
            await anyio.to_thread.run_sync(procs.signal_run, run.identity, signal.SIGCONT)
            run.paused = False
            self.stall.resume()
            self.pen.transition(
                State.RUNNING,
                None,
                self.pen.event("resumed", "resumed (SIGCONT)", run.record.run),
                by=Trigger.RESUME,
            )

    async def hold_for_approval(self, kind: str) -> None:
        """The approval gate: SIGSTOP the run and wait for `herd approve` or `herd reject`."""
        async with self.lock:
            run = self.run()
            if self.record.state not in (State.RUNNING, State.PAUSED):
                return
            if run is None or run.exited.is_set() or not self.warnings.is_open(kind):
                return
            if not run.paused:
                await self._stop_run(run)
            name = self.pen.config().name
            diff = self.observer.plan_diff
            what = kind
            if kind == "plan-tampered" and diff is not None and diff.changed_items:
                # The notice that reaches a phone says what changed, items counted from 1.
                first = diff.changed_items[0]
                more = len(diff.changed_items) - 1
                what += f" ({change_text(first.index, first.change, first.description)}"
                what += f" and {more} more)" if more else ")"
            self.pen.transition(
                State.WAITING_APPROVAL,
                kind,
                naming(
                    self.pen.event(
                        "waiting-approval",
                        f"{what}: the run is paused until `herd approve {name}` "
                        f"or `herd reject {name}`",
                        run.record.run,
                    ),
                    kind,
                ),
                by=Trigger.DRIFT_PAUSE,
            )

    async def approve(self, answered: dict[str, str] | None = None) -> None:
        """Adopt the current plan as the baseline; a run held at the approval gate continues.

        `answered`: who answered and from where (`by`, `origin`), kept in the event's data.
        """
        async with self.lock:
            observer = self.observer
            plan = observer.plan_current
            waiting = self.record.state == State.WAITING_APPROVAL
            if plan is None and not waiting:
                raise SessionError(f"{self.pen.config().name} has no plan to approve")
            if plan is not None:
                changes = len(observer.plan_diff.changed_items) if observer.plan_diff else 0
                accepted = observer.accept_plan()
                assert accepted is not None  # there is a current plan
                self.record.plan_baseline, self.record.plan_baseline_raw = accepted
                self.pen.commit(
                    self.pen.event(
                        "plan-approved",
                        f"plan approved as the new baseline ({changes} change(s) accepted)",
                        self.record.run or None,
                        passing=plan.passing,
                        total=plan.total,
                        **(answered or {}),
                    ),
                )
            await self._continue("approved")

    async def reject(self, answered: dict[str, str] | None = None) -> None:
        """Write the baseline plan back (keeping items that pass now) after a forbidden change.

        At the approval gate the run then continues; with no plan change to undo there, a
        reject stops the task instead.
        """
        name = self.pen.config().name
        async with self.lock:
            diff = self.observer.plan_diff
            waiting = self.record.state == State.WAITING_APPROVAL
            if diff is None or not diff.changed_items:
                if waiting:
                    await self.stop_task()
                    return
                raise SessionError(f"{name}: the plan matches its baseline")
            try:
                await self.observer.restore_baseline()
            except (ValueError, OSError) as exc:
                raise SessionError(f"{name}: {exc}") from None
            try:
                self.pen.commit(
                    self.pen.event(
                        "plan-rejected",
                        f"plan restored to its baseline ({len(diff.changed_items)} change(s) "
                        "undone)",
                        self.record.run or None,
                        **(answered or {}),
                    )
                )
            finally:
                self.observer.restoring = False
            await self.observer.refresh_plan()
            await self._continue("rejected")

    async def _continue(self, answer: str, *events: Event) -> bool:
        """Continue a run held at the approval gate (SIGCONT); False when none was held."""
        if self.record.state != State.WAITING_APPROVAL:
            return False
        run = self.run()
        if run is not None and not run.exited.is_set():
            await anyio.to_thread.run_sync(procs.signal_run, run.identity, signal.SIGCONT)
            run.paused = False
        self.stall.resume()
        approved = answer == "approved"
        answer_kind = "approved" if approved else "rejected"
        goes_on = f"{answer_kind}: the run continues"
        self.pen.transition(
            State.RUNNING,
            None,
            *events,
            self.pen.event(answer_kind, goes_on, self.record.run or None),
            by=Trigger.APPROVE if approved else Trigger.REJECT,
        )
        return True
