"""The typed contract: the status JSON, events and every control API reply, as pydantic models.

The daemon builds these and sends `model_dump(mode="json")`; the CLI and the dashboard parse
replies back into them (`parse_reply`) and read attributes. Field names and order are those
of CONTRACT.md, so the JSON on the wire and from `--json` keeps its shape.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
)

from agentherd.sessions.diffreply import DiffReply
from agentherd.sessions.records import Event
from agentherd.sessions.states import State

__all__ = [
    "CheckpointStatus",
    "DaemonInfo",
    "DownReply",
    "Event",
    "LeftRunning",
    "LogInfoReply",
    "LogsStatus",
    "PlanChange",
    "PlanStatus",
    "ProgressStatus",
    "ReloadReply",
    "ReportReply",
    "SessionStatus",
    "ShutdownReply",
    "Snapshot",
    "SpendReply",
    "StartReply",
    "TaskStatus",
    "UpStarted",
    "UsageStatus",
    "VerificationStatus",
    "WaitReply",
    "WarningStatus",
    "parse_reply",
    "parse_status",
]

VERIFY_TAIL_LINES = 5
"""`herd status` shows this many last lines of a verification's output (the report, more)."""


def _absent(value: object) -> bool:
    """A field left out of the JSON when None (it was never sent as null)."""
    return value is None


class Wire(BaseModel):
    """A reply object: unknown fields from a newer daemon are ignored; a field declared with
    `exclude_if=_absent` is left out when None (per field: a serializer on every model made
    each nested object a Python call, a third of `herd ls`'s time in the daemon)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON object sent on the wire and printed by `--json`."""
        dumped: dict[str, Any] = self.model_dump(mode="json")
        return dumped

    def to_json_text(self, indent: int | None = None) -> str:
        """`to_json` as JSON text, made by pydantic's own serializer: a third of `to_json`
        and `json.dumps` (a `herd ls` of 1,000 sessions sends 2 MB of it). `indent`ed, it is
        what `json.dumps(..., indent=indent)` prints (ASCII, "\\u" escapes) but for how a
        float is spelled."""
        if indent is None:
            return self.model_dump_json()
        return self.model_dump_json(indent=indent, ensure_ascii=True)


# ----- `herd status --json` ------------------------------------------------------------------


class PlanChange(Wire):
    """A change to the plan its rules forbid: removed, reworded, reordered, added."""

    index: int
    change: str
    description: str


class PlanStatus(Wire):
    """The `plan` object: items passing, and the forbidden changes against the baseline."""

    passing: int
    total: int
    changed_items: list[PlanChange] = Field(default_factory=list)
    error: str | None = Field(default=None, exclude_if=_absent)
    """Why the plan file cannot be read now (the last good plan still counts)."""


class ProgressStatus(Wire):
    """The `progress` object: the latest entries of the progress file and when it changed."""

    updated_at: str | None = None
    latest: list[str] = Field(default_factory=list)
    error: str | None = Field(default=None, exclude_if=_absent)


class VerificationStatus(Wire):
    """How herd's own verification of the checkpoint came out."""

    sha: str
    passed: bool
    duration_s: float
    exit_code: int | None = None
    timed_out: bool = False
    error: str | None = None
    output_tail: str = ""
    """Its last VERIFY_TAIL_LINES lines."""

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> VerificationStatus:
        """The status form of a stored verification result (VerifyResult.to_json)."""
        tail = str(result.get("output_tail") or "").splitlines()[-VERIFY_TAIL_LINES:]
        return cls(
            sha=str(result["sha"]),
            passed=bool(result["passed"]),
            duration_s=round(float(result.get("duration_s") or 0.0), 2),
            exit_code=result.get("exit_code"),
            timed_out=bool(result.get("timed_out")),
            error=result.get("error"),
            output_tail="\n".join(tail),
        )


class CheckpointStatus(Wire):
    """The `checkpoint` object: the newest commit and its verdict (null while unverified)."""

    sha: str
    at: str
    subject: str
    verified: bool | None = None
    verification: VerificationStatus | None = Field(default=None, exclude_if=_absent)


class UsageStatus(Wire):
    """The `usage` object; `cost_usd` is null when the agent reports no cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    cost_estimated: bool = False
    cost_unpriced_model: str | None = None
    """A model the agent named that herd has no price for: the cost leaves its tokens out."""
    turns: int = 0
    uncounted_requests: int = 0
    """Requests a kill cut off mid-answer: billed in part or whole, counted in no figure."""


class LogsStatus(Wire):
    """The `logs` object: bytes of output kept, and the session's cap."""

    bytes: int
    cap_bytes: int


class WarningStatus(Wire):
    """One open warning: its latest event (`seq`, `at`, `message`), since when, how often."""

    seq: int
    kind: str
    message: str
    at: str
    count: int = 1
    opened_seq: int | None = None
    opened_at: str | None = None


class SessionStatus(Wire):
    """The `herd status --json` object of one session (`ls` is a list of them)."""

    session: str
    handle: str | None = None
    run: int | None = None
    state: State = State.IDLE
    task_state: str = "working"
    reason: str | None = None
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    restarts: int = 0
    started_at: str | None = None
    ended_at: str | None = None
    agent_session_id: str | None = None
    plan: PlanStatus | None = None
    progress: ProgressStatus | None = None
    checkpoint: CheckpointStatus | None = None
    git_note: str | None = None
    """Why git gives no checkpoint (not a repository, no commit yet, unreadable)."""
    usage: UsageStatus | None = None
    budget: dict[str, Any] | None = None
    logs: LogsStatus | None = None
    usage_total: UsageStatus | None = None
    """The session's whole life: every run it ever had (`usage` is the current task's)."""
    fleet: dict[str, Any] | None = None
    """Every session summed: `usage` (current tasks), `usage_total` (whole lives), `budget`."""

    warnings: list[WarningStatus] = Field(default_factory=list)
    last_line: str = ""
    """The last line of output a person can read, already summarised."""
    agent: str = "plain"
    next_restart_at: str | None = None
    message_waiting: dict[str, Any] | None = None
    """A `herd send` text the next run takes: `id`, `at`, `origin`, `chars`; else null."""
    limit: dict[str, Any] | None = None
    """Waiting on a rate limit: `waiting` (agent: it retries by itself while it runs; herd:
    parked in backoff), `account`, `since`, `until`, `delay_source`, `attempt`; else null."""
    host: str | None = None
    """The host it runs (or last ran) on, across hosts (`[cluster]`); null on one machine."""
    archived: bool = False
    """herd.toml has it `archived` (`herd archive`): out of `herd ls` and the fleet view."""


class TaskStatus(Wire):
    """`herd status NAME/N` of a task that is not the session's current one."""

    session: str
    handle: str
    run: int
    state: State
    task_state: str
    reason: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    host: str | None = None
    """The host that ran it, across hosts (`[cluster]`)."""


# ----- other replies ---------------------------------------------------------------------------


class StartReply(Wire):
    """`start` and `restart`: the task's handle."""

    handle: str
    session: str
    state: State
    reason: str | None = None
    """Why it is in that state: `after:NAME` for a task queued behind a session of its `after`."""


class UpStarted(Wire):
    """One session `up` started (or found running, or queued behind its `after`)."""

    session: str
    handle: str
    state: State | None = Field(default=None, exclude_if=_absent)
    reason: str | None = Field(default=None, exclude_if=_absent)


class WaitReply(Wire):
    """`wait`: how the task ended (or that the wait timed out), and the exit code to use."""

    handle: str
    state: State
    reason: str | None = None
    exit: int


class SendReply(Wire):
    """`send`: what became of a `herd send` text, and with `wait`, how its run ended."""

    session: str
    message_id: str
    outcome: str
    """`queued` (a run is under way: the next one takes it), `started` (a run began with it) or
    `typed` (into an interactive run's terminal, with Enter)."""
    handle: str | None = None
    run: int | None = None
    """The run that took the message, once one has."""
    state: State | None = None
    """With `wait`: the session's state once that run ended."""
    run_outcome: str | None = None
    """With `wait`: how that run ended (success, crashed, ...); `dropped`: no run took it;
    typed: `turn-ended` (the agent waits for input again) or `timeout`."""


class LogInfoReply(Wire):
    """`log_info`: where a run's output and the progress file are, for the client to read."""

    run: int | None = None
    path: str | None = None
    current_run: int
    live: bool
    progress: str | None = None
    state: State


class LeftRunning(Wire):
    """A session whose run still has processes after `down` stopped it."""

    session: str
    state: State
    pids: list[int]


class DownReply(Wire):
    """`down`: every session's status after the stop, and what could not be stopped."""

    stopped: list[SessionStatus]
    left: list[LeftRunning] = Field(default_factory=list)
    waited_s: float | None = None


class ShutdownReply(Wire):
    """`shutdown`: the daemon's pid (it exits, leaving agents running)."""

    pid: int


class RecordedReply(Wire):
    """`mcp_call`: the call is in the event log."""

    recorded: bool


class ReloadReply(Wire):
    """`reload`: which sessions herd.toml added, changed or removed."""

    added: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    still_running: list[str] = Field(default_factory=list)


class DaemonInfo(Wire):
    """`info`: which daemon answers, for what herd.toml."""

    version: str
    pid: int
    config: str
    state_dir: str
    started_at: str | None = None
    reconcile_passes: int = 0
    sessions: list[str] = Field(default_factory=list)


class ReportReply(Wire):
    """`report`: the report's JSON form and its markdown."""

    report: dict[str, Any]
    markdown: str


class SpendReply(Wire):
    """`spend`: a session's spend over time, oldest first, for the session view's chart.

    Each sample is `[unix time, total tokens, cost or null, turns, plan items passing or
    null]` of what its budget counts, at least `spend_sample_s` apart, the last hour at most.
    """

    session: str
    samples: list[list[Any]] = Field(default_factory=list)


class LinkReply(Wire):
    """`link_ok`: whether a notification's approval link is good now, else why not."""

    ok: bool
    why: str | None = None


class Snapshot(Wire):
    """One item of the `subscribe` stream: every session's status."""

    sessions: list[SessionStatus]
    at: str | None = None


REPLIES: dict[str, Any] = {
    "ls": list[SessionStatus],
    "start": StartReply,
    "restart": StartReply,
    "up": list[UpStarted],
    "stop": SessionStatus,
    "pause": SessionStatus,
    "resume": SessionStatus,
    "approve": SessionStatus,
    "reject": SessionStatus,
    "ack": SessionStatus,
    "wait": WaitReply,
    "send": SendReply,
    "events": list[Event],
    "subscribe": Snapshot,
    "log_info": LogInfoReply,
    "report": ReportReply,
    "spend": SpendReply,
    "diff": DiffReply,
    "down": DownReply,
    "shutdown": ShutdownReply,
    "reload": ReloadReply,
    "info": DaemonInfo,
    "terminal_writer": SessionStatus,
    "mcp_call": RecordedReply,
    "link_ok": LinkReply,
}
"""The type of each operation's reply (of each streamed item for `subscribe`); `status` has
`parse_status`, and an `events -f` item is one `Event`."""


@functools.cache
def _adapter(op: str) -> TypeAdapter[Any]:
    """Built on first use: a CLI command pays only for the reply it reads."""
    return TypeAdapter(REPLIES[op])


def parse_reply(op: str, value: Any) -> Any:
    """A reply (or a streamed `subscribe` item) of `op` as its model."""
    return _adapter(op).validate_python(value)


def parse_status(value: Any) -> list[SessionStatus] | SessionStatus | TaskStatus:
    """A `status` reply: every session, one session, or a past task (which has no `agent`)."""
    if isinstance(value, list):
        return [SessionStatus.model_validate(item) for item in value]
    if isinstance(value, dict) and "agent" not in value:
        return TaskStatus.model_validate(value)
    return SessionStatus.model_validate(value)
