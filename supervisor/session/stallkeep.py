"""A session's stall clock: silence warned of once, and kept across daemons on its record."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from agentherd.sessions.drift import StallClock
from agentherd.sessions.durations import format_duration
from agentherd.sessions.open_warnings import WarningBook, WarningRecord
from agentherd.sessions.records import SessionRecord
from agentherd.sessions.states import State
from agentherd.sessions.times import iso, parse_iso
from agentherd.supervisor.session.pen import Pen

STALL_HELD_STATES = frozenset({State.PAUSED, State.WAITING_APPROVAL, State.WAITING_INPUT})
"""A run held by a person (or the approval gate), or whose agent waits for one: its stall
clock is stopped."""

STALL_KEPT_STATES = frozenset({State.RUNNING}) | STALL_HELD_STATES
"""A live run whose stall clock a new daemon takes over (a new run starts a new clock)."""


class StallWatch:
    """A session's stall clock: activity starts it again, a hold stops it, silence warns once."""

    def __init__(
        self,
        pen: Pen,
        warnings: WarningBook,
        close_warning: Callable[[str, str, str], None],
        last_write: Callable[[], float | None],
    ) -> None:
        self.record = pen.record
        self.pen = pen
        self.warnings = warnings
        self.close_warning = close_warning
        """Close an open warning whose cause is gone: (kind, why, by)."""
        self.last_write = last_write
        """When the run's agent last wrote output not read yet (wall time; None: all read)."""
        self.clock = restored_stall_clock(self.record, warnings.get("stalled"))

    def restart(self) -> None:
        """A new run starts a new clock (the last one may have stopped at a pause or a gate)."""
        self.clock = StallClock(time.monotonic())

    def keep(self) -> None:
        """Put the clock on the record, which every commit writes."""
        keep_stall_clock(self.clock, self.record)

    def pause(self) -> None:
        """The run is held: its time stops counting."""
        self.clock.pause(time.monotonic())

    def resume(self) -> None:
        """The run goes on: its time counts again."""
        self.clock.resume(time.monotonic())

    def written(self, written_s: float, what: str, by: str) -> None:
        """Output (or a progress entry) written at `written_s` (monotonic) was read."""
        self.clock.output_written(written_s, time.monotonic(), self.pen.config().budget.stall)
        if self.warnings.is_open("stalled") and not self.clock.warned:
            self.close_warning("stalled", f"the agent wrote {what}", by)

    def activity(self) -> None:
        """The agent showed progress (a progress entry or a commit): the clock starts again."""
        self.clock.activity(time.monotonic())
        self.close_warning("stalled", "the agent wrote a progress entry or a commit", "progress")

    def check(self) -> None:
        """Warn once when a running session shows no output, progress or commit for `stall`."""
        if self.record.state != State.RUNNING:
            return
        stall_s = self.pen.config().budget.stall
        now_s = time.monotonic()
        if stall_s is not None and not self.clock.warned and self.clock.idle_s(now_s) >= stall_s:
            self._count_unread_output(now_s, stall_s)
        if self.clock.newly_stalled(now_s, stall_s):
            idle_s = self.clock.idle_s(now_s)
            self.pen.commit(
                self.pen.event(
                    "stalled",
                    f"no output, progress entry or commit for {format_duration(idle_s)} "
                    f"(stall = {format_duration(stall_s or 0)})",
                    self.record.run,
                    idle_s=round(idle_s, 1),
                )
            )

    def _count_unread_output(self, now_s: float, stall_s: float) -> None:
        """Output on disk not read yet counts from when it was written: silence is judged by
        the file, not by the reading (on a loaded machine the follower's read came after the
        check, and a writing agent was warned of as stalled)."""
        written_at = self.last_write()
        if written_at is not None:
            written_s = now_s - max(0.0, time.time() - written_at)
            self.clock.output_written(written_s, now_s, stall_s)


def restored_stall_clock(record: SessionRecord, stalled: WarningRecord | None) -> StallClock:
    """The stall clock as the previous daemon left it, so a stalled agent's silence does
    not start over when a new daemon adopts it (nor does paused time start to count).

    Output, progress and commits read afterwards count from when they were written.
    """
    now_s = time.monotonic()
    since = parse_iso(record.stall_since_at)
    if since is None or record.state not in STALL_KEPT_STATES:
        return StallClock(now_s)
    clock = StallClock(_monotonic_at(since, now_s))
    if record.state in STALL_HELD_STATES:
        paused = parse_iso(record.stall_paused_at)
        clock.paused_since_s = _monotonic_at(paused, now_s) if paused else now_s
    if stalled is not None:  # raised already: not again, and a later write closes it
        clock.warned = True
        warned_at = parse_iso(stalled.last_at)
        clock.warned_at_s = _monotonic_at(warned_at, now_s) if warned_at else now_s
    return clock


def keep_stall_clock(clock: StallClock, record: SessionRecord) -> None:
    """Put the stall clock on the session record (as wall times), which every commit writes."""
    now_s, now_wall_s = time.monotonic(), time.time()
    record.stall_since_at = _iso_at(clock.last_activity_s, now_s, now_wall_s)
    paused = clock.paused_since_s
    record.stall_paused_at = None if paused is None else _iso_at(paused, now_s, now_wall_s)


def _monotonic_at(moment: datetime, now_s: float) -> float:
    """The monotonic time of a wall-clock moment (one in the future counts as now)."""
    return now_s - max(0.0, time.time() - moment.timestamp())


def _iso_at(monotonic_s: float, now_s: float, now_wall_s: float) -> str | None:
    """A monotonic time as the ISO wall time the record keeps."""
    return iso(datetime.fromtimestamp(now_wall_s - (now_s - monotonic_s), UTC))
