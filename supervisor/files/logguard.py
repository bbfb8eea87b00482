"""One timer for every growing run log: each is looked at against its cap in fleet passes.

A chatty log must be looked at again before the fastest planned writer could pass its cap
(`room / LOG_WRITE_BYTES_PER_S`, ~0.26 s for the default cap): one task asleep per log woke
200 times a quarter second at 200 chatty agents; here one pass stats every log that is due.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

log = logging.getLogger("herd.logguard")

LOG_CHECK_MIN_S = 0.01
"""A log is looked at at most this often (a flood gets a worker thread instead)."""

LOG_WRITE_BYTES_PER_S = 1 << 30
"""The fastest writer planned for (`yes` into tmpfs): a log with R bytes of room under its cap
is looked at again within R / this, so such a writer passes the cap by ~1% of its rate."""

LOG_FLOOD_BYTES = 256 * 1024
"""A log that grew this much since its last check is flooding: its own guard takes it over."""

QUIET_LOOKS = 2
"""Looks in a row that find a log not grown before it counts as quiet (its watch is armed
again, each write then an event): a pass may look early, half way to its due time, and one
early look can fall between two writes of a steady writer. 50 screens redrawn five times a
second had a daemon in ten times the wake-ups (138-140 a second against 12-17, 4.8 % of a core
against 1.3), depending on how the passes fell between the frames."""
Check = Callable[[], tuple[int, int]]
"""Look at one log against its cap: (bytes it grew since the last look, room left)."""


def check_interval_s(room_bytes: int) -> float:
    """How long a log with `room_bytes` left under its cap may go unchecked."""
    return max(LOG_CHECK_MIN_S, room_bytes / LOG_WRITE_BYTES_PER_S)


@dataclass(eq=False)
class _Followed:
    """A growing log in the fleet's passes until it is quiet, flooding or its run drained."""

    check: Check
    ended: Callable[[], bool]
    interval_s: float
    due: float
    result: tuple[int, int] = (0, 0)
    done: anyio.Event = field(default_factory=anyio.Event)
    quiet_looks: int = 0
    """Looks in a row that found it had not grown."""


class FleetLogGuard:
    """Checks every growing log when it is due, in as few wake-ups as the dues allow: a pass
    also takes each log that is at least half its interval along (an early look is safe)."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        self._followed: set[_Followed] = set()
        self._changed = anyio.Event()
        self._running = False
        self._next_pass = float("inf")
        self.passes = 0
        """Wake-ups of the guard that checked at least one log."""
        self.checks = 0
        """Logs looked at in those passes."""

    @property
    def followed(self) -> int:
        """Logs in the fleet's passes now."""
        return len(self._followed)

    async def follow(
        self, check: Check, room_bytes: int, ended: Callable[[], bool]
    ) -> tuple[int, int]:
        """Keep checking a log that grew (`room_bytes` left) until QUIET_LOOKS checks in a row
        find it quiet, or one finds it flooding, or `ended()`; return that check's (grew,
        room) ((0, 0) when ended)."""
        interval_s = check_interval_s(room_bytes)
        entry = _Followed(check, ended, interval_s, time.monotonic() + interval_s)
        self._followed.add(entry)
        if not self._running:
            self._running = True
            self._tg.start_soon(self._run)
        elif entry.due < self._next_pass:
            self._changed.set()  # sooner than the guard means to wake: tell it
        try:
            await entry.done.wait()
        finally:
            self._followed.discard(entry)
        return entry.result

    async def _run(self) -> None:
        try:
            while self._followed:
                now = time.monotonic()
                self._next_pass = min(entry.due for entry in self._followed)
                if self._next_pass > now:
                    with anyio.move_on_after(self._next_pass - now):
                        await self._changed.wait()
                    self._changed = anyio.Event()
                    continue
                self._pass(now)
        finally:
            self._running = False
            self._next_pass = float("inf")

    def _pass(self, now: float) -> None:
        self.passes += 1
        for entry in list(self._followed):
            if entry.due - entry.interval_s / 2 > now:
                continue  # not half way to its due time yet: the next pass takes it
            if entry.ended():
                self._finish(entry, (0, 0))
                continue
            self.checks += 1
            try:
                grew, room = entry.check()
            except Exception:  # the log's own guard looks again, and fails in its own task
                log.exception("log cap check failed")
                self._finish(entry, (0, 0))
                continue
            entry.quiet_looks = entry.quiet_looks + 1 if grew == 0 else 0
            if entry.quiet_looks >= QUIET_LOOKS or grew >= LOG_FLOOD_BYTES:
                self._finish(entry, (grew, room))
            else:
                entry.interval_s = check_interval_s(room)
                entry.due = now + entry.interval_s

    def _finish(self, entry: _Followed, result: tuple[int, int]) -> None:
        entry.result = result
        self._followed.discard(entry)
        entry.done.set()
