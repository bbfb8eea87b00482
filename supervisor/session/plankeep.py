"""Keeping the session's plan on its baseline through a restart's reset (sessions/planreset.py).

Runs in the worker thread that resets the worktree, around `git reset`: read the plan before,
decide after, write it back at once, so a person's settled answer survives the crash.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentherd.sessions.config import SessionConfig
from agentherd.sessions.planreset import plan_after_reset
from agentherd.sessions.records import Event
from agentherd.supervisor.checks.watchedfile import read_plan, write_atomically

if TYPE_CHECKING:
    from agentherd.supervisor.checks.port import SessionPort

log = logging.getLogger("herd.recovery")


@dataclass(frozen=True)
class PlanKeep:
    """The plan file of a run being reset and the baseline it is judged against."""

    path: Path
    name: str
    """The plan as herd.toml names it (for the event's message)."""
    baseline_raw: str

    @classmethod
    def of(cls, config: SessionConfig, baseline_raw: str | None) -> PlanKeep | None:
        """None without a plan or before its baseline was first seen: nothing to keep."""
        if not config.plan or baseline_raw is None:
            return None
        return cls(config.cwd / config.plan, config.plan, baseline_raw)

    def read(self) -> bytes | None:
        """The plan file's bytes, or None when it is absent or unreadable."""
        try:
            return read_plan(self.path)
        except (OSError, ValueError):
            return None

    def keep(self, before: bytes | None) -> bool:
        """Write the baseline back when the reset took a matching plan off it; True if written."""
        data = plan_after_reset(self.baseline_raw, before, self.read())
        if data is None:
            return False
        try:
            write_atomically(self.path, data)
        except OSError as exc:  # the observer then reports the reset's copy as it finds it
            log.warning("could not write %s back after the reset: %s", self.path, exc)
            return False
        return True

    def event(self, session: SessionPort, run: int, target_sha: str | None) -> Event:
        """`plan-kept`: what herd wrote, so the event log explains the plan file's content."""
        at = target_sha[:12] if target_sha else "the checkpoint"
        return session.make_event(
            "plan-kept",
            f"{self.name} written back to its baseline after the reset to {at}: that "
            "checkpoint's copy predates the plan as approved or restored",
            run,
        )
