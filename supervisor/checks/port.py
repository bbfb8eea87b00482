"""What the observer, recovery and reporting may see of a session, and how they post to it.

They read through these properties and post facts through these methods; only the session's
supervisor writes its record and the store (an import-linter contract keeps them from
importing the supervisor itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import anyio

from agentherd.sessions.adapters import Usage
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.plan import Plan
from agentherd.sessions.records import Event, SessionRecord
from agentherd.supervisor.files.store import Store, Verification


class Shared(Protocol):
    """What the daemon shares with a session's helpers (the session wing's `Context`)."""

    @property
    def store(self) -> Store:
        """The state store, for reads."""
        ...

    @property
    def state_dir(self) -> Path:
        """The `.herd` folder."""
        ...

    @property
    def config_path(self) -> Path:
        """herd.toml, which a rescue never commits."""
        ...

    @property
    def git_reads(self) -> anyio.CapacityLimiter:
        """The fleet's git reads run in at most this many worker threads at once."""
        ...

    def spend_changed(self, session: Any) -> None:
        """What a session's spend samples show changed: its budget is looked at."""
        ...

    def runs_changed(self) -> None:
        """What the fleet watcher should watch changed."""
        ...


class FilesView(Protocol):
    """What a session's files say, as its report and recovery read it (the observer)."""

    @property
    def plan_baseline(self) -> Plan | None:
        """The approved plan every later change is judged against."""
        ...

    @property
    def plan_current(self) -> Plan | None: ...

    @property
    def plan_error(self) -> str | None: ...

    @property
    def progress_latest(self) -> tuple[str, ...]: ...

    @property
    def progress_updated_at(self) -> str | None: ...

    @property
    def git_error(self) -> str | None: ...

    def plan_reads(self) -> anyio.Lock:
        """Held while the plan is read, so a reset does not change it underneath."""
        ...


class SessionPort(Protocol):
    """A session as its helpers see it: read-only state, and a way to post facts."""

    @property
    def config(self) -> SessionConfig:
        """The session's config as it is now."""
        ...

    @property
    def record(self) -> SessionRecord:
        """The session's lasting state: read it, never write it."""
        ...

    @property
    def ctx(self) -> Shared:
        """The daemon's store (for reads), limiters and folders."""
        ...

    @property
    def observer(self) -> FilesView:
        """What the session's files say."""
        ...

    @property
    def git_warned(self) -> bool:
        """True once the session said its cwd is not a git repository."""
        ...

    def spend_json(self) -> dict[str, Any]:
        """`usage_total` and `budget` as the status JSON has them."""
        ...

    def running_usage(self) -> tuple[int, Usage] | None:
        """The watched run's number and usage so far while its end is not yet recorded."""
        ...

    def make_event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        """An event of this session (of its current run unless `run` says another)."""
        ...

    def commit_events(self, *events: Event) -> None:
        """Post events: the supervisor writes them with its record, then announces them."""
        ...

    def touch(self) -> None:
        """Something visible changed that needs no event."""
        ...

    def note_progress(self) -> None:
        """The agent showed progress (a progress entry or a commit)."""
        ...

    def progress_written(self, at_wall_s: float) -> None:
        """The progress file was written at `at_wall_s` (its mtime): the agent showed progress."""
        ...

    def note_plan_progress(self) -> None:
        """The plan was read: a newly passing item closes burn and early-exit at once."""
        ...

    def record_checkpoint(self, commit: Checkpoint, *events: Event) -> bool:
        """Post a new commit with its events; False when it was known already."""
        ...

    def record_verification(self, verdict: Verification, *events: Event) -> None:
        """Post a checkpoint's verdict with its events."""
        ...

    def adopt_plan_baseline(self, plan_json: str, raw: str, *events: Event) -> None:
        """Post the plan that becomes the baseline, with its events."""
        ...

    def mark_git_warned(self, *events: Event) -> None:
        """Post the one not-a-git-repo warning."""
        ...

    def forget_agent_session_id(self, *events: Event) -> None:
        """Post that the agent's session id is unusable (resume refused)."""
        ...

    def close_warning(self, kind: str, why: str, by: str) -> None:
        """Post that an open warning's cause is gone (its `warning-closed`)."""
        ...

    def verdict_events(self, sha: str, passed: bool, output_tail: str) -> list[Event]:
        """The drift events a checkpoint's verdict adds (repeated-failure)."""
        ...
