"""The report's input and its typed result; `Report.model_dump()` is the `herd report --json`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.plan import Plan
from agentherd.sessions.records import Event, RunRecord


class ReportInput(BaseModel):
    """Everything the report needs, gathered by the daemon; nothing here reads disk or git."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    session: str
    state: str
    reason: str | None = None
    handle: str | None = None
    generated_at: str
    task_started_at: str | None = None
    runs: list[RunRecord] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    verifications: dict[str, dict[str, Any]] = Field(default_factory=dict)
    plan_baseline: Plan | None = None
    plan_current: Plan | None = None
    plan_error: str | None = None
    progress_latest: list[str] = Field(default_factory=list)
    progress_updated_at: str | None = None
    diffstat: tuple[int, int, int] | None = None
    files_touched: list[str] = Field(default_factory=list)
    agent: str = "plain"
    cwd: str = "."
    usage_total: dict[str, Any] | None = None
    """The session's whole life (the status JSON's `usage_total`)."""
    budget: dict[str, Any] | None = None
    """The status JSON's `budget`: each limit, what it covers, the projection."""


class _Part(BaseModel):
    """A frozen part of the report; values from the store are kept as they were."""

    model_config = ConfigDict(frozen=True)


class TimeFacts(_Part):
    """When the task started, how long it has lasted, and how long its runs ran."""

    started_at: str | None
    wall_s: float | None
    runs: int
    last_run: int | None
    run_s: float


class VerificationFacts(_Part):
    """One checkpoint's verification result, its output tail cut to the end."""

    passed: Any = None
    exit_code: Any = None
    timed_out: Any = None
    duration_s: Any = None
    started_at: Any = None
    error: Any = None
    output_tail: str | None = None


class CheckpointFacts(_Part):
    """A checkpoint and how its verification came out (`verified` None: pending)."""

    sha: str
    at: str
    subject: str
    verified: bool | None
    files: list[str]
    insertions: int | None = None
    """Lines the commit added (None: recorded before herd counted them); likewise deletions."""
    deletions: int | None = None
    verification: VerificationFacts | None


class Diffstat(_Part):
    """Files, insertions and deletions from the task's first checkpoint to its last."""

    files: int
    insertions: int
    deletions: int


class Changed(_Part):
    """Checkpoints (oldest first), the diffstat and the files touched."""

    checkpoints: list[CheckpointFacts]
    diffstat: Diffstat | None
    files_touched: list[str]
    current_sha: str | None = None
    """The commit the worktree stands on: after a restart from an earlier checkpoint (a
    worktree reset) that checkpoint, not the newest one recorded."""

    def current(self) -> CheckpointFacts | None:
        """The checkpoint the worktree stands on; None when it stands on none of them."""
        if self.current_sha is None:
            return self.checkpoints[-1] if self.checkpoints else None
        for checkpoint in reversed(self.checkpoints):
            if checkpoint.sha == self.current_sha:
                return checkpoint
        return None


class VerificationCounts(_Part):
    """How the checkpoints' verifications came out."""

    passed: int
    failed: int
    pending: int


class Passed(_Part):
    """Plan items passing now, and the checkpoints' verification counts."""

    plan_passing: int | None
    plan_total: int | None
    items_passing: list[str]
    verifications: VerificationCounts


class OpenWarning(_Part):
    """The latest warning of one kind still open, with how often it came."""

    kind: str
    message: str
    at: str
    count: int


class Remains(_Part):
    """Failing plan items in plan order, open warnings, plan changes and a plan error."""

    items_failing: list[str]
    open_warnings: list[OpenWarning]
    plan_changes: list[dict[str, Any]]
    plan_error: str | None


class Crash(_Part):
    """A run that ended badly without being asked to stop."""

    run: int | None
    exit: Any
    signal: Any
    outcome: Any
    at: str


class Rescue(_Part):
    """Uncommitted work saved on a ref before a reset."""

    ref: Any
    sha: Any
    run: int | None


class Reset(_Part):
    """A worktree reset to a checkpoint."""

    sha: Any
    run: int | None
    at: str


class Incidents(_Part):
    """Crashes, restarts, rescues and resets of the task."""

    crashes: list[Crash]
    restarts: int
    rescued: list[Rescue]
    resets: list[Reset]


class UsageTotals(_Part):
    """The CONTRACT.md `usage` object summed over the task's runs."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    total_tokens: int
    cost_usd: float | None
    cost_estimated: bool
    cost_unpriced_model: str | None = None
    """A model the agent named that herd has no price for: the cost leaves its tokens out."""
    turns: int
    uncounted_requests: int = 0
    """Requests a kill cut off mid-answer: billed in part or whole, counted in no figure."""


class ProgressFacts(_Part):
    """The agent's latest progress notes and when the file last changed."""

    updated_at: str | None
    latest: list[str]


class Report(_Part):
    """The whole report; its field order is the JSON's key order."""

    session: str
    state: str
    reason: str | None
    handle: str | None
    generated_at: str
    agent: str
    cwd: str
    time: TimeFacts
    changed: Changed
    passed: Passed
    remains: Remains
    incidents: Incidents
    usage: UsageTotals
    progress: ProgressFacts
    next_steps: list[str] = Field(default_factory=list)
    usage_total: UsageTotals | None = None
    """Every run the session ever had (`usage` is the task's)."""
    budget: dict[str, Any] | None = None
    """Spend against the limits when the report was made, as `herd status` shows it."""
