"""Stall warnings on time: a session is checked when its silence reaches its `stall` limit.

The reconcile pass visits each session once a minute, so a 30 s stall seen there came up to a
minute late (the demo's search-index was warned after 1m23s of a 30s stall). One loop per
daemon sleeps until the earliest moment a running session can have stalled and checks the
sessions then due. Activity only moves a moment later, and a run that starts while the loop
sleeps cannot be due before the smallest `stall` of the fleet has passed, so waking at least
that often misses none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol

import anyio

from agentherd.sessions.config import SessionConfig
from agentherd.sessions.drift import StallClock
from agentherd.sessions.records import SessionRecord
from agentherd.sessions.states import State

STALL_SLACK_S = 0.05
"""Sleep this much past a due moment, so the check finds the silence at its limit."""


class Stallable(Protocol):
    """A session as the stall timer sees it: its limit, its silence, and its check."""

    @property
    def config(self) -> SessionConfig: ...

    @property
    def record(self) -> SessionRecord: ...

    @property
    def stall(self) -> StallClock:
        """When the session last showed output, progress or a commit."""
        ...

    def check_stall(self) -> None:
        """Warn once when a running session shows nothing for its `stall` limit."""
        ...


def stall_due_s(supervisor: Stallable) -> float | None:
    """When this session's silence reaches its limit (monotonic), or None if it cannot stall."""
    threshold_s = supervisor.config.budget.stall
    clock = supervisor.stall
    if threshold_s is None or supervisor.record.state != State.RUNNING:
        return None
    if clock.warned or clock.paused_since_s is not None:
        return None  # warned already, or time is not counting
    return clock.last_activity_s + threshold_s


async def watch_stalls(sessions: Callable[[], Iterable[Stallable]], longest_sleep_s: float) -> None:
    """Check each running session with a `stall` limit at the moment it may have stalled."""
    while True:
        now_s = time.monotonic()
        wake_s = now_s + longest_sleep_s
        for supervisor in sessions():
            threshold_s = supervisor.config.budget.stall
            if threshold_s is None:
                continue
            wake_s = min(wake_s, now_s + threshold_s)  # a run started meanwhile is due no sooner
            due_s = stall_due_s(supervisor)
            if due_s is None:
                continue
            if due_s <= now_s:
                supervisor.check_stall()
            else:
                wake_s = min(wake_s, due_s)
        await anyio.sleep(max(wake_s - time.monotonic(), 0.0) + STALL_SLACK_S)
