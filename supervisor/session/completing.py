"""Completion that is true: a clean end waits (`verifying`) for its final checkpoint's verdict.

The rules are pure (sessions/completion.py, sessions/lifecycle.py); this part of a session
supervisor gathers the final checkpoint and its verdict, then applies the exit rules again.
"""

from __future__ import annotations

import time
from dataclasses import replace

import anyio

from agentherd.sessions import completion, lifecycle
from agentherd.sessions.lifecycle import Action, ExitFacts, Trigger
from agentherd.sessions.records import Event
from agentherd.sessions.states import State
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.parts import SessionParts

VERDICT_MARGIN_S = 60.0
"""Beyond `verify_timeout`, how long completion waits for a queued verification to start."""

VERDICT_POLL_S = 0.1
"""How often the store is asked whether the final checkpoint's verdict came in."""


class Completing(SessionParts):
    """The part of a session supervisor that refuses a completion that is not true."""

    def plan_completion_facts(self) -> completion.CompletionFacts:
        """The plan's side of completion: items passing, and changes the rules forbid."""
        observer = self.observer
        plan = observer.plan_current
        if plan is None or not self.config.plan:
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
        await self.observer.refresh_git()
        checkpoint = self.observer.checkpoint
        sha = checkpoint.sha if checkpoint is not None else None
        shown = sha[:7] if sha else "none"
        verifying = self._event(
            "verifying",
            f"run {live.record.run} ended cleanly; completion waits for the verification "
            f"of its final checkpoint ({shown})",
            live.record.run,
            sha=sha,
        )
        if self.record.state == State.VERIFYING:  # a new daemon waits again
            self._commit(*before, verifying)
        else:
            self._transition(State.VERIFYING, None, *before, verifying, by=Trigger.VERIFY)
        self.ctx.tg.start_soon(self._await_verdict, live, facts, self.record.handle, sha)

    async def _await_verdict(
        self, live: LiveRun, facts: ExitFacts, handle: str | None, sha: str | None
    ) -> None:
        """Wait for the final checkpoint's verdict, then complete, fail or go on."""
        verified: bool | None = None
        if sha is not None:
            deadline = time.monotonic() + self.config.verify_timeout + VERDICT_MARGIN_S
            while time.monotonic() < deadline:
                found = self.ctx.store.verification(self.config.name, sha)
                if found is not None:
                    verified = bool(found.get("passed"))
                    break
                await anyio.sleep(VERDICT_POLL_S)
        async with self._lock:
            if self.record.state != State.VERIFYING or self.record.handle != handle:
                return  # a stop or a new task came first
            known = replace(self.plan_completion_facts(), verify=True, verified=verified)
            reason = completion.refusal(known)
            message = completion.describe(reason, known) if reason else ""
            decision = lifecycle.after_exit(replace(facts, refusal=reason, refusal_message=message))
            self.record.idle_runs = decision.idle_runs
            self.record.backoff_step = decision.backoff_step
            if decision.action is Action.RESTART:
                self._schedule_restart(live, decision, by=Trigger.VERDICT)
            else:
                self._end_task(decision.state, decision.reason, decision.message, Trigger.VERDICT)
