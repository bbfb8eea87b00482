"""Pure drift evaluators: how long a session has shown no sign of work, paused time excluded."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StallClock:
    """Seconds since the last output, progress entry or commit, not counting paused time."""

    last_activity_s: float
    paused_since_s: float | None = None
    warned: bool = False

    def activity(self, now_s: float) -> None:
        """The agent did something visible: the stall clock starts again."""
        self.last_activity_s = now_s
        self.warned = False

    def pause(self, now_s: float) -> None:
        """A person paused the run: time stops counting."""
        if self.paused_since_s is None:
            self.paused_since_s = now_s

    def resume(self, now_s: float) -> None:
        """The run continues: the paused stretch is not a stall."""
        if self.paused_since_s is not None:
            self.last_activity_s += now_s - self.paused_since_s
            self.paused_since_s = None

    def idle_s(self, now_s: float) -> float:
        """How long without activity, as of `now_s` (frozen while paused)."""
        end_s = self.paused_since_s if self.paused_since_s is not None else now_s
        return max(0.0, end_s - self.last_activity_s)

    def newly_stalled(self, now_s: float, threshold_s: float | None) -> bool:
        """True once per stall: the first check past `threshold_s` without activity."""
        if threshold_s is None or self.warned or self.idle_s(now_s) < threshold_s:
            return False
        self.warned = True
        return True
