"""What a run's end means: completed, failed or restarted, by the lifecycle's exit rules.

A clean end waits (`verifying`) for its final checkpoint's verdict when `verify` is set. The
rules are pure (sessions/completion.py, sessions/lifecycle.py); this part of a session
gathers the facts, and the session's pen writes what they decide.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import anyio

from agentherd.sessions import completion, lifecycle
from agentherd.sessions.lifecycle import Action, ExitFacts, Trigger
from agentherd.sessions.records import Event
from agentherd.sessions.states import State
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.session.accountlimits import PARKED_WITH_ACCOUNT
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.restarts import Restarts

log = logging.getLogger("herd.session")

VERDICT_MARGIN_S = 60.0
"""Beyond `verify_timeout`, how long completion waits for a queued verification to start."""

VERDICT_POLL_S = 0.1
"""How often the store is asked whether the final checkpoint's verdict came in."""


class Completer:
    """Applies the exit rules to a session's ended run, and refuses a completion not true."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        observer: Observer,
        restarts: Restarts,
        drift_restart_of: Callable[[int], str | None],
        crash_events: Callable[[int, str, str], list[Event]],
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self.lock = pen.lock
        """The session's lock: a verdict that came in is applied under it."""
        self.observer = observer
        self.restarts = restarts
        self.drift_restart_of = drift_restart_of
        """The drift kind whose `restart` action ended a run (once), else None."""
        self.crash_events = crash_events
        """The drift events of a run's end (run, outcome, last line): repeated-failure."""

    async def after_exit(self, live: LiveRun) -> None:
        """Apply the lifecycle's exit rules: completed, failed, or restart after a delay."""
        config = self.pen.config()
        # The run's last commits are checkpoints before its end is judged: a repository made
        # after the session's last look (an agent's own `git init`, a moved session's folder)
        # is watched by no one yet, and the slow reconcile pass would see them a minute later.
        try:
            await self.observer.refresh_git()
        except Exception:  # git unread is no reason to leave the run unjudged: the end goes on
            log.exception("%s: git not read at the end of run %d", config.name, live.record.run)
        record = self.record
        drift_kind = self.drift_restart_of(live.record.run)
        if drift_kind is not None:  # on_drift = restart ended it: from a verified checkpoint
            restart = lifecycle.Decision(
                Action.RESTART,
                f"drift:{drift_kind}",
                "",
                crashed=True,
                crash_times=tuple(record.crash_times),
                idle_runs=record.idle_runs,
            )
            self.restarts.schedule(live, restart)
            return
        if live.record.stop_reason == PARKED_WITH_ACCOUNT:  # its account hit a limit elsewhere
            parked = lifecycle.Decision(Action.RESTART, "rate-limit", "", crashed=False)
            self.restarts.schedule(live, parked)
            return
        outcome = live.record.outcome or "exit unknown"
        plan = None
        if outcome == "success" and config.plan:
            await self.observer.refresh_plan()
            plan = self.observer.plan_current
        plan_facts = self.plan_completion_facts()
        refused = completion.refusal(plan_facts)
        facts = lifecycle.ExitFacts(
            run=live.record.run,
            outcome=outcome,
            policy=config.restart,
            ran_s=time.monotonic() - live.started_monotonic,
            stable_after_s=config.stable_after,
            backoff_step=record.backoff_step,
            now_s=time.time(),
            crash_times=tuple(record.crash_times),
            crash_window_s=config.crash_window,
            max_crashes=config.max_crashes,
            disk_full=outcome != "success" and self.restarts.disk_full(),
            plan_all_passing=plan.all_passing if plan is not None else None,
            passing_now=plan.passing if plan is not None else None,
            passing_at_run_start=record.passing_at_run_start,
            plan_total=plan.total if plan is not None else None,
            idle_runs=record.idle_runs,
            refusal=refused,
            refusal_message=completion.describe(refused, plan_facts) if refused else "",
        )
        decision = lifecycle.after_exit(facts)
        early: list[Event] = self.crash_events(live.record.run, outcome, live.last_line)
        if decision.early_exit is not None:
            early.append(self.pen.event("early-exit", decision.early_exit, live.record.run))
        if decision.action is Action.COMPLETE and config.verify is not None:
            await self._verify_before_completing(live, facts, *early)
            return
        record.backoff_step = decision.backoff_step
        record.crash_times = list(decision.crash_times)
        record.idle_runs = decision.idle_runs
        outcome_facts = live.parser.outcome
        if decision.reason == "permission-denied" and outcome_facts is not None:
            denied = ", ".join(outcome_facts.permission_denials) or "its tools"
            decision = replace(
                decision,
                message=f"failed: run {live.record.run} was denied {denied}; widen the "
                "permission flags of `command` and `resume` (docs/guide.md: agent presets)",
            )
        if decision.reason == "resume-refused":
            early.extend(self._resume_refused(live))
        # Judged again after a daemon restart in `verifying`: the move is the verdict's.
        by = Trigger.VERDICT if record.state == State.VERIFYING else Trigger.EXIT
        if decision.action is Action.RESTART:
            self.restarts.schedule(live, decision, *early, by=by if by is Trigger.VERDICT else None)
        else:
            self.pen.end_task(decision.state, decision.reason, decision.message, by, *early)

    def _resume_refused(self, live: LiveRun) -> tuple[Event, ...]:
        """The agent could not resume its session: forget the id so `command` runs next."""
        sid = self.record.agent_session_id or ""
        self.record.agent_session_id = None
        return (
            self.pen.event(
                "resume-refused",
                f"the agent could not resume session {sid[:40]!r} "
                f"({(live.parser.outcome.message or '')[:120] if live.parser.outcome else ''}); "
                "the next run starts afresh with `command`",
                live.record.run,
                session_id=sid[:80],
            ),
        )

    def plan_completion_facts(self) -> completion.CompletionFacts:
        """The plan's side of completion: items passing, and changes the rules forbid."""
        config = self.pen.config()
        observer = self.observer
        plan = observer.plan_current
        if plan is None or not config.plan:
            return completion.CompletionFacts(verify=False)
        changed = observer.plan_diff.changed_items if observer.plan_diff else ()
        return completion.CompletionFacts(
            verify=False,
            plan_total=plan.total,
            plan_passing=plan.passing,
            plan_changes=completion.changes_of(changed),
        )

    async def _verify_before_completing(
        self, live: LiveRun, facts: ExitFacts, *before: Event
    ) -> None:
        """Enter `verifying` for the final checkpoint; its verdict decides (in a task)."""
        checkpoint = self.observer.checkpoint
        sha = checkpoint.sha if checkpoint is not None else None
        shown = sha[:7] if sha else "none"
        verifying = self.pen.event(
            "verifying",
            f"run {live.record.run} ended cleanly; completion waits for the verification "
            f"of its final checkpoint ({shown})",
            live.record.run,
            sha=sha,
        )
        if self.record.state == State.VERIFYING:  # a new daemon waits again
            self.pen.commit(*before, verifying)
        else:
            self.pen.transition(State.VERIFYING, None, *before, verifying, by=Trigger.VERIFY)
        self.ctx.tg.start_soon(self._await_verdict, live, facts, self.record.handle, sha)

    async def _await_verdict(
        self, live: LiveRun, facts: ExitFacts, handle: str | None, sha: str | None
    ) -> None:
        """Wait for the final checkpoint's verdict, then complete, fail or go on."""
        config = self.pen.config()
        verified: bool | None = None
        if sha is not None:
            deadline = time.monotonic() + config.verify_timeout + VERDICT_MARGIN_S
            while time.monotonic() < deadline:
                found = self.ctx.store.verification(config.name, sha)
                if found is not None:
                    verified = bool(found.get("passed"))
                    break
                await anyio.sleep(VERDICT_POLL_S)
        async with self.lock:
            if self.record.state != State.VERIFYING or self.record.handle != handle:
                return  # a stop or a new task came first
            known = replace(self.plan_completion_facts(), verify=True, verified=verified)
            reason = completion.refusal(known)
            message = completion.describe(reason, known) if reason else ""
            decision = lifecycle.after_exit(replace(facts, refusal=reason, refusal_message=message))
            self.record.idle_runs = decision.idle_runs
            self.record.backoff_step = decision.backoff_step
            if decision.action is Action.RESTART:
                self.restarts.schedule(live, decision, by=Trigger.VERDICT)
            else:
                self.pen.end_task(
                    decision.state, decision.reason, decision.message, Trigger.VERDICT
                )
