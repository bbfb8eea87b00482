"""The drift kinds (one declaration) and their pure evaluators: stall time, repeated failures,
burn rate.

`DRIFT_KINDS` is the registry: herd.toml's `on_drift` keys, the warning event kinds, their
meanings and what closes them are derived from it. A new kind is declared here, raised where
the supervisor sees it, and tested.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DriftKind:
    """One kind of drift: what it means, whether it opens a warning, and what settles it."""

    name: str
    meaning: str
    """One line, as `herd events` and docs/reference.md describe its event."""
    warning: bool = True
    """It is a warning event (crash-loop is not: it ends the task, so only `notify` applies)."""
    closed_by: frozenset[str] = frozenset()
    """Event kinds whose arrival means its cause is gone."""
    closed_by_progress: bool = False
    """Its cause is gone once a plan item flips to passing."""


DRIFT_KINDS: tuple[DriftKind, ...] = (
    DriftKind(
        "plan-tampered",
        "the plan changed in a way its rules forbid; data: changed_items",
        closed_by=frozenset({"plan-approved", "plan-rejected"}),
    ),
    DriftKind(
        "claims-done-but-fails",
        "a checkpoint marks plan items passing but fails `verify`; data: sha, items",
        closed_by=frozenset({"verify-passed"}),
    ),
    DriftKind(
        "stalled",
        "no output, progress entry or commit for `budget.stall`; data: idle_s",
        closed_by=frozenset({"checkpoint", "run-started", "stopped"}),
    ),
    DriftKind(
        "crash-loop",
        "max_crashes crashes within crash_window: the task ends failed",
        warning=False,
    ),
    DriftKind(
        "repeated-failure",
        "the same failure N times in a row (`drift.repeated_failure`): the same failing tests "
        "or last lines at checkpoints, or the same crash; data: streak, source",
        closed_by=frozenset({"verify-passed"}),
    ),
    DriftKind(
        "out-of-scope",
        "a checkpoint changes files outside `scope`; data: sha, files",
    ),
    DriftKind(
        "burn-without-progress",
        "a share of a budget dimension (`drift.burn_without_progress`) was spent since a plan "
        "item last flipped to passing; data: dimension, share",
        closed_by_progress=True,
    ),
    DriftKind(
        "early-exit",
        "a run exited cleanly while plan items still fail (until-done: and no new item passes)",
        closed_by_progress=True,
    ),
)
"""Every kind `on_drift` can name, in the order herd.toml's messages list them."""

DRIFT_KIND_NAMES: tuple[str, ...] = tuple(kind.name for kind in DRIFT_KINDS)

DRIFT_WARNINGS: dict[str, DriftKind] = {kind.name: kind for kind in DRIFT_KINDS if kind.warning}
"""The drift kinds that are warning events, by name."""


@dataclass
class StallClock:
    """Seconds since the last output, progress entry or commit, not counting paused time."""

    last_activity_s: float
    paused_since_s: float | None = None
    warned: bool = False
    warned_at_s: float | None = None

    def activity(self, now_s: float) -> None:
        """The agent did something visible: the stall clock starts again."""
        self.last_activity_s = now_s
        self.warned = False

    def output_written(self, at_s: float, now_s: float, threshold_s: float | None) -> bool:
        """Output written at `at_s` was read at `now_s`: True when it ends a stall warned about.

        Output is read in batches, after the fact. Written after the warning, it ends the stall
        (the clock then counts from `now_s`, so a late read cannot reopen it at once); written
        before it and read late, it ends it only if the agent has not been silent for
        `threshold_s` since."""
        self.last_activity_s = max(self.last_activity_s, min(at_s, now_s))
        if not self.warned:
            return False
        if self.warned_at_s is not None and at_s > self.warned_at_s:
            self.last_activity_s = now_s
        elif threshold_s is not None and self.idle_s(now_s) >= threshold_s:
            return False
        self.warned = False
        return True

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
        self.warned_at_s = now_s
        return True


# ----- repeated-failure: the same failure again and again ---------------------------------

FAILURE_TAIL_LINES = 3
"""Without test ids, a failure is known by this many last non-empty lines of its output."""

_FAILED_TEST = re.compile(r"^(?:FAILED|ERROR)\s+(\S+)", re.MULTILINE)
"""pytest's summary lines (`FAILED tests/test_x.py::test_y - ...`): the failing tests."""

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def failure_signature(output_tail: str) -> str:
    """What makes two failures the same: the failing tests, else the last lines, numbers aside.

    Durations, pids and counts change from run to run; the failure does not.
    """
    tests = sorted(set(_FAILED_TEST.findall(output_tail)))
    if tests:
        return "tests: " + " ".join(tests)
    lines = [line.strip() for line in output_tail.splitlines() if line.strip()]
    return "\n".join(_NUMBER.sub("N", line) for line in lines[-FAILURE_TAIL_LINES:])


@dataclass
class FailureStreak:
    """How many failures in a row looked the same (a pass or another failure starts over)."""

    signature: str | None = None
    length: int = 0

    def failed(self, signature: str) -> int:
        """One more failure; returns the length of the streak it belongs to."""
        if signature == self.signature:
            self.length += 1
        else:
            self.signature, self.length = signature, 1
        return self.length

    def passed(self) -> None:
        """A pass ends the streak."""
        self.signature, self.length = None, 0


# ----- burn-without-progress: spend that buys no plan item ---------------------------------


def burn_without_progress(
    spent_now: Mapping[str, float],
    spent_at_flip: Mapping[str, float],
    limits: Mapping[str, float | None],
    share: float,
) -> tuple[str, float] | None:
    """The budget dimension (and its share) spent past `share` since the last item flipped.

    `spent_*` hold what the task had spent per dimension; a dimension without a limit is never
    judged. The first dimension past the threshold, in the order of `limits`, is named.
    """
    for dimension, limit in limits.items():
        if not limit:
            continue
        burnt = (spent_now.get(dimension, 0.0) - spent_at_flip.get(dimension, 0.0)) / limit
        if burnt >= share:
            return dimension, burnt
    return None
