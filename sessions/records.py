"""What the store remembers: a session's lasting state, each run, each task, each event."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentherd.sessions.states import State

WARNING_KINDS = frozenset(
    {
        # drift, verification and budgets: what a person should look at
        "plan-invalid",
        "plan-tampered",
        "claims-done-but-fails",
        "stalled",
        "repeated-failure",
        "out-of-scope",
        "burn-without-progress",
        "early-exit",
        "budget-warning",
        "rate-limited",
        "verify-failed",
        # herd could not do all it meant to
        "notify-failed",
        "resume-refused",
        "not-a-git-repo",
        "log-capped",
        "progress-invalid",
        "git-unavailable",
        "rescue-failed",
    }
)
"""Event kinds that are warnings: shown in a session's status and its report."""


class Event(BaseModel):
    """One line of the append-only event log; `seq` is the cursor clients follow."""

    seq: int = 0
    at: str
    session: str | None = None
    run: int | None = None
    kind: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `herd events --json` object."""
        return self.model_dump(include={"seq", "at", "session", "run", "kind", "message", "data"})


class RunRecord(BaseModel):
    """One launch of `command` or `resume`: its identity (for a new daemon to find it) and end."""

    session: str
    run: int
    handle: str
    argv: list[str]
    mode: str = "command"
    cwd: str | None = None
    """Where the run was launched: its crash is rescued there, whatever herd.toml says now."""
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None
    tag: str = ""
    cgroup: str | None = None
    """The run's own cgroup folder, where the machine allows one (a new daemon stops it too)."""
    started_at: str | None = None
    ended_at: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    outcome: str | None = None
    agent_session_id: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    last_line: str = ""
    """The run's last line of output a person can read, kept for the status after it ended."""
    stop_requested: bool = False
    stop_reason: str | None = None
    """Why the stop was asked (user, down, ...), so a daemon killed mid-stop ends it the same."""


class TaskRecord(BaseModel):
    """What one `start` began: its first run plus every automatic restart; ends once."""

    handle: str
    session: str
    first_run: int
    state: State = State.STARTING
    reason: str | None = None
    started_at: str
    ended_at: str | None = None


class SessionRecord(BaseModel):
    """A session's lasting state: survives the daemon and drives `herd status`."""

    name: str
    state: State = State.IDLE
    reason: str | None = None
    handle: str | None = None
    run: int = 0
    restarts: int = 0
    backoff_step: int = 0
    backoff_until: str | None = None
    crash_times: list[float] = Field(default_factory=list)
    agent_session_id: str | None = None
    task_started_at: str | None = None
    plan_baseline: str | None = None
    """The first plan seen (Plan.to_json()), against which every later change is judged."""
    plan_baseline_raw: str | None = None
    """That plan file's text, for `herd reject` to write back."""
    passing_at_run_start: int | None = None
    idle_runs: int = 0
    """until-done: consecutive clean runs that made no new plan item pass."""
