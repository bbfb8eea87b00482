"""A chained session's turn: its task queues until its `after` sessions completed, then runs.

The rules are sessions/chain.py's; this part writes what they decide through the session's pen.
"""

from __future__ import annotations

from collections.abc import Callable

from agentherd.sessions import chain
from agentherd.sessions.chain import Next, Step
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.records import TaskRecord
from agentherd.sessions.states import ACTIVE_STATES, State
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.launcher import Launcher
from agentherd.supervisor.session.pen import Pen


class Queue:
    """Puts a task in the queue and moves it on: to its start, or to its end when it never can."""

    def __init__(self, ctx: Context, pen: Pen, launcher: Launcher) -> None:
        self.ctx = ctx
        self.pen = pen
        self.record = pen.record
        self.launcher = launcher

    def next_step(self) -> Next:
        """What the session's `after` sessions allow now."""
        after = self.pen.config().after
        return chain.next_step(after, self.ctx.chains.links(after))

    async def takes_start(self, now: bool, new_task: Callable[[], TaskRecord]) -> bool:
        """Whether a start ends here (the caller holds the lock): a queued task a person starts
        `now` moves on, an active one stays, a chained one's new task waits for its `after`
        sessions. False: the caller begins a task at once."""
        if self.record.state == State.QUEUED and now:
            await self.advance(now=True)
        if self.record.state in ACTIVE_STATES and self.record.handle:
            return True
        step = None if now or not self.pen.config().after else self.next_step()
        if step is None or step.step is Step.GO:
            return False
        self.enter(new_task(), step)
        return True

    def enter(self, task: TaskRecord, step: Next) -> None:
        """Begin `task` queued (the caller holds the lock); a chain already broken ends it."""
        task.state = State.QUEUED
        self.record.task_started_at = None  # its wall time counts from its first run
        waits_for = step.name if step.step is Step.WAIT else None
        queued = self.pen.event(
            "queued",
            f"task {task.handle} queued: it starts once {waits_for} has completed"
            if waits_for
            else f"task {task.handle} queued",
            task.first_run,
            handle=task.handle,
            waits_for=waits_for,
        )
        reason = step.reason if step.step is Step.WAIT else None
        self.pen.transition(State.QUEUED, reason, queued, by=Trigger.START, task=task)
        if step.step is Step.NEVER:
            self._never(step)

    async def advance(self, now: bool = False) -> None:
        """Look at the `after` sessions again (the caller holds the lock); `now`: a person
        starts it whatever they say."""
        if self.record.state != State.QUEUED:
            return
        step = Next(Step.GO) if now else self.next_step()
        if step.step is Step.NEVER:
            self._never(step)
        elif step.step is Step.WAIT:
            self._wait(step.reason or "", step.name or "")
        else:
            await self._go(now)

    def _wait(self, reason: str, name: str) -> None:
        """Keep waiting, saying for what when that changed."""
        if self.record.reason == reason:
            return
        what = (
            f"session {name} runs in the same worktree"
            if reason.startswith(chain.WORKTREE_PREFIX)
            else f"it starts once {name} has completed"
        )
        handle = self.record.handle
        queued = self.pen.event(
            "queued", f"task {handle} queued: {what}", None, handle=handle, waits_for=name
        )
        self.pen.transition(State.QUEUED, reason, queued, by=Trigger.AFTER_DONE)

    def _never(self, step: Next) -> None:
        """End the queued task: an `after` session ended without completing."""
        name = step.name or ""
        link = self.ctx.chains.links([name]).get(name) or chain.Link(State.FAILED)
        how = f"{link.state} ({link.reason})" if link.reason else str(link.state)
        message = f"stopped: {name} ended {how}, so this link of the chain never runs"
        self.pen.end_task(State.STOPPED, step.reason, message, Trigger.AFTER_FAILED)

    async def _go(self, now: bool) -> None:
        """Start the queued task: its first run, in a worktree no other agent works in (a
        person's `--now` is refused there, as any start is)."""
        config = self.pen.config()
        other = self.ctx.worktree_user(config.name, config.cwd)
        if other is not None and now:
            await self.launcher.refuse_if_taken(other, None)
        if other is not None:
            self._wait(f"{chain.WORKTREE_PREFIX}{other}", other)
            return
        handle = self.record.handle or ""
        self.record.task_started_at = iso(utc_now())
        task = self.ctx.store.task(handle)
        if task is not None:
            started_at = self.record.task_started_at or task.started_at
            task = task.model_copy(update={"state": State.STARTING, "started_at": started_at})
        first_run = self.record.run + 1
        begun = self.pen.event("task-started", f"task {handle} started", first_run, handle=handle)
        by = Trigger.START if now else Trigger.AFTER_DONE
        self.pen.transition(State.STARTING, None, begun, by=by, task=task)
        try:
            await self.launcher.refuse_if_taken(None, None)
        except SessionError as exc:  # processes of an earlier run hold its folder
            self.pen.end_task(State.FAILED, "run-folder-busy", str(exc), Trigger.SPAWN_FAILED)
            return
        await self.launcher.launch(mode="command", env_extra={})
