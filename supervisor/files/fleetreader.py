"""One task reads every run's log when it is due: a wake-up per batch of reads, not per read.

A task per run woke twice per read (the end of its rest, then its wake-up event) under two
cancel scopes; at 200 chatty agents that was 400 task wake-ups a second. Here a read that rests
is due on the next READ_TICK_S boundary, so the reads of the whole fleet land on at most
1 / READ_TICK_S wake-ups a second; a read wanted at once (a run's first, a quiet log's change,
a run's exit) is made on the next loop step.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

READ_TICK_S = 0.05
"""Rested reads are made on multiples of this: a run's reads come at most `gap` + this apart."""


STALE_ENTRIES_MAX = 256
"""Superseded heap entries tolerated beyond two per run before they are swept out."""

PASS_STEP_S = 0.02
"""A pass lets the loop serve clients and the watcher this often (a flood's reads are long)."""


class Reading:
    """One run's log in the fleet reader: when it is read next, and why."""

    def __init__(
        self,
        reader: FleetReader,
        read: Callable[[], bool],
        gap_s: Callable[[], float],
        poll_s: float,
    ) -> None:
        self._reader = reader
        self.read = read
        """Read what is new; True when the run is over and its log fully read."""
        self.gap_s = gap_s
        """How long the log rests after a read (asked at each change: a budget can change it)."""
        self.poll_s = poll_s
        self.last_read = -math.inf
        self.due = math.inf
        self.done = False

    def wake(self) -> None:
        """The log changed: read it once its rest after the last read is over."""
        now = time.monotonic()
        rested = self.last_read + self.gap_s()
        self._reader.schedule(self, now if rested <= now else _tick_after(rested))

    def wake_now(self) -> None:
        """The run ended (or first started): read at once, whatever the rest."""
        self._reader.schedule(self, time.monotonic())


def _tick_after(at: float, tick_s: float = READ_TICK_S) -> float:
    """The first `tick_s` boundary at or after `at` (reads on one boundary share a wake-up)."""
    return math.ceil(at / tick_s) * tick_s


class FleetReader:
    """A heap of the runs' next reads, served by one task started on demand."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        self._heap: list[tuple[float, int, Reading]] = []
        self._order = itertools.count()
        self._changed = anyio.Event()
        self._running = False
        self._next = math.inf
        self.passes = 0
        """Wake-ups of the reader that read at least one log."""
        self.reads = 0
        self.following = 0
        """Runs whose logs are read until their final drain."""

    @property
    def queued(self) -> int:
        """Entries in the heap, superseded ones included."""
        return len(self._heap)

    def follow(
        self, read: Callable[[], bool], gap_s: Callable[[], float], poll_s: float
    ) -> Reading:
        """Read a run's log at once, then after each change (at most every `gap_s()`), or
        `poll_s` after a rest with no change, until `read` returns True."""
        reading = Reading(self, read, gap_s, poll_s)
        self.following += 1
        reading.wake_now()
        return reading

    def schedule(self, reading: Reading, at: float) -> None:
        """Read `reading` at `at` unless it is due sooner already."""
        if reading.done or at >= reading.due:
            return
        reading.due = at
        heapq.heappush(self._heap, (at, next(self._order), reading))
        if len(self._heap) > STALE_ENTRIES_MAX + 2 * self.following:
            # A read moved sooner leaves its later entry behind (a quiet log's poll, a minute
            # out): drop them all now and then, so memory stays bounded by the runs followed.
            self._heap = [e for e in self._heap if not e[2].done and e[0] == e[2].due]
            heapq.heapify(self._heap)
        if not self._running:
            self._running = True
            self._tg.start_soon(self._run)
        elif at < self._next:
            self._changed.set()  # sooner than the reader means to wake: tell it

    async def _run(self) -> None:
        try:
            while self._heap:
                at, _, reading = self._heap[0]
                if reading.done or at != reading.due:
                    heapq.heappop(self._heap)  # superseded by a sooner read
                    continue
                now = time.monotonic()
                if at > now:
                    self._next = at
                    with anyio.move_on_after(at - now):
                        await self._changed.wait()
                    self._changed = anyio.Event()
                    self._next = math.inf
                    continue
                await self._pass(now)
        finally:
            self._running = False
            self._next = math.inf

    async def _pass(self, now: float) -> None:
        """Every read due now, each once; the loop serves others every PASS_STEP_S."""
        self.passes += 1
        step_end = time.monotonic() + PASS_STEP_S
        while self._heap and self._heap[0][0] <= now:
            if time.monotonic() > step_end:
                await anyio.lowlevel.checkpoint()
                step_end = time.monotonic() + PASS_STEP_S
            at, _, reading = heapq.heappop(self._heap)
            if reading.done or at != reading.due:
                continue
            reading.due = math.inf
            reading.last_read = time.monotonic()
            self.reads += 1
            if reading.read():
                reading.done = True
                self.following -= 1
                continue
            # No change noticed: look again after a long rest (the watcher wakes it sooner), on
            # a boundary shared by every quiet log (one wake-up a poll for the whole fleet).
            poll_at = reading.last_read + reading.gap_s() + reading.poll_s
            self.schedule(reading, _tick_after(poll_at, reading.poll_s))
