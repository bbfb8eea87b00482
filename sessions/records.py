"""What the store remembers: a session's lasting state, each run, each task, each event."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentherd.sessions.drift import DRIFT_WARNINGS
from agentherd.sessions.states import State

WARNING_KINDS = frozenset(
    {
        # drift (sessions/drift.py), verification and budgets: what a person should look at
        *DRIFT_WARNINGS,
        "plan-invalid",
        "budget-warning",
        "usage-backwards",
        "cost-unpriced",
        "rate-limited",
        "verify-failed",
        # herd could not do all it meant to
        "notify-failed",
        "resume-refused",
        "resume-mismatch",
        "not-a-git-repo",
        "log-capped",
        "progress-invalid",
        "git-unavailable",
        "rescue-failed",
    }
)
"""Event kinds that are warnings: shown in a session's status and its report."""

EVENT_KINDS: dict[str, str] = {
    # the daemon (no session)
    "daemon-started": "the daemon is up and has re-adopted or settled every session",
    "daemon-stopping": "`herd down` stopped the sessions; the daemon exits next",
    "config-reloaded": "herd.toml was read again: sessions added, changed or removed",
    "disk-full": "the state disk was full; the changes held in memory meanwhile are now written",
    "verify-leftovers-removed": "scratch worktrees and processes of a killed daemon's "
    "verifications were removed",
    "mcp-call": "a tool of `herd mcp` was called; data: tool, arguments, origin (`person` or "
    "`inside session 'NAME'`, as the daemon read the caller), via (`mcp`)",
    "notification-failed": "a [notifications] message was not sent (a service refused it or "
    "could not be reached, or a `urls_env` variable is unset); data: title, session",
    # a task and its runs
    "task-started": "a task began (`start`, `restart`, `up` or autostart); data: handle",
    "queued": "a task was asked for but waits for a session of its `after` (or for its "
    "worktree); it starts with `task-started`; data: handle, waits_for",
    "run-started": "a run was launched; data: pid, argv, mode (command or resume)",
    "run-exited": "a run ended; data: exit_code, signal, outcome",
    "message-queued": "`herd send` gave the session a text for its next run; "
    "data: message_id, origin, chars",
    "message-delivered": "a run took the sent text as its {message}; data: message_id, origin",
    "message-dropped": "a sent text no run will take (the task was stopped, or no "
    "conversation to resume); data: message_id, origin",
    "adopted": "a new daemon took over a run that was still alive; data: pid",
    "stopping": "herd is stopping the run (stop signal, grace, then SIGKILL); data: kill",
    "paused": "the whole run was stopped with SIGSTOP",
    "terminal-writer": "an attach took an interactive run's terminal's input (its one "
    "writer until it detaches); data: by (`a person`, or `an agent inside session 'x'`), pid, tty",
    "resumed": "the whole run was continued with SIGCONT",
    "resume-checked": "a resumed run's agent named the conversation herd stored: it went on "
    "with it; data: agent_session_id, file (the agent's own record it appends to, or null)",
    "resume-mismatch": "a resumed run's agent named another conversation than the one herd "
    "stored: the earlier work is not in its context; data: expected, agent_session_id, file",
    "restart-scheduled": "the session waits in backoff before its next run; "
    "data: delay_s, crashed, step",
    "restart-cancelled": "a stop came while a restart was saving or resetting the worktree; "
    "no run starts; data: step",
    "rescue-saved": "uncommitted work of a crashed run was saved on a git ref; "
    "data: ref, sha, earlier",
    "worktree-reset": "the worktree was reset to a checkpoint before the restart; "
    "data: sha, kept_ref, kept_sha",
    "no-verified-checkpoint": "restart_from = verified found no verified checkpoint; "
    "the last one is used",
    "completed": "the task ended completed; data: reason, handle",
    "failed": "the task ended failed; data: reason, handle",
    "stopped": "the task ended stopped; data: reason, handle",
    # what the session's own files say
    "checkpoint": "a new commit in the session's worktree; data: sha, subject, files",
    "verify-passed": "`verify` passed on a checkpoint; data: sha, duration_s",
    "verify-failed": "`verify` failed on a checkpoint; data: sha, exit_code, timed_out, "
    "output_tail",
    "plan-baseline": "the first plan seen, against which every later change is judged; "
    "data: passing, total",
    "plan-approved": "a person adopted the changed plan as the new baseline; data: passing, "
    "total, by, origin (who answered from where: `herd web` and its client's address)",
    "plan-rejected": "a person had the baseline plan written back; data: by, origin",
    "plan-kept": "a restart's worktree reset brought back a plan copy older than the baseline "
    "(approved or restored since): herd wrote the baseline back, with the checkpoint's passes",
    "plan-invalid": "the plan file cannot be read; the last good plan is kept",
    **{kind.name: kind.meaning for kind in DRIFT_WARNINGS.values()},
    "claim-unchecked": "git could not show the plan at a failing checkpoint, so its claims were "
    "not checked; data: sha, error",
    "warning-closed": "an open warning's cause is gone; data: kind, by",
    "warning-acked": "a person acknowledged an open warning (`herd ack`): it leaves the badge; "
    "data: kind",
    "waiting-approval": "on_drift = pause: the run is stopped (SIGSTOP) until `herd approve` or "
    "`herd reject`; data: kind",
    "waiting-input": "an interactive run's agent waits for a person (a permission prompt, a "
    "question, a finished answer at its prompt), as its own hook said; data: signal",
    "working": "an interactive run's agent works again after waiting-input (a prompt was "
    "given, a tool runs); data: signal",
    "message-typed": "`herd send` typed a text and Enter into an interactive run's terminal; "
    "data: message_id, origin, chars",
    "approved": "a person answered waiting-approval with approve: the run continues",
    "rejected": "a person answered waiting-approval with reject: the run continues on the "
    "baseline plan, or stops when there was no plan change",
    "verifying": "the run ended cleanly; completion waits for its final checkpoint's "
    "verification; data: sha",
    "notify-failed": "the notify command failed, timed out or could not be run; data: argv0, "
    "exit_code, timed_out",
    "progress-invalid": "the progress file cannot be read; the last entries are kept",
    # herd could not do all it meant to
    "not-a-git-repo": "the session's folder is not a git repository: no checkpoints, "
    "verification, rescue or reset",
    "git-unavailable": "git could not be read in the session's folder, or it has no commit yet",
    "rescue-failed": "saving or resetting the worktree before a restart failed; "
    "the restart goes on; data: step",
    "resume-refused": "the agent's session id looked unsafe for argv, or the agent could not "
    "resume it; `command` runs instead of `resume`",
    "log-capped": "output was dropped to keep the logs within log_max_bytes: an old run's log "
    "deleted, or the running log's middle cut (data: dropped_bytes, final)",
    "budget-warning": "a budget dimension reached its warn_at fraction (once per dimension); "
    "data: scope (session or fleet), covers, dimension, spent, limit, fraction",
    "budget-stop": "a budget dimension is spent; the task is stopped with reason "
    "budget:<dimension>; data as budget-warning",
    "usage-backwards": "the agent reported lower totals than before; they are ignored, the "
    "higher ones kept (a figure never goes down)",
    "cost-unpriced": "the agent used a model herd has no price for: its tokens are left out "
    "of the cost (shown unpriced), never priced as another model; add [prices.MODEL] to "
    "herd.toml; data: model (once per model per task)",
    "rate-limited": "the agent hit a rate limit; the session waits in backoff until it "
    "resets; data: delay_s, resets_at, resumes_at, delay_source (agent: the agent's reset "
    "time; guess: herd's wait), account",
    # named by the contract; nothing emits them yet
}
"""Every event kind herd writes, with its meaning in one line (docs/reference.md lists them)."""

RESERVED_EVENT_KINDS: frozenset[str] = frozenset()
"""Kinds in EVENT_KINDS that the contract names but no code emits yet."""


class Event(BaseModel):
    """One line of the append-only event log; `seq` is the cursor clients follow."""

    seq: int = 0
    at: str
    session: str | None = None
    run: int | None = None
    kind: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)
    host: str | None = None
    """The host whose daemon logged it (across hosts only, `[cluster]`)."""

    def to_json(self) -> dict[str, Any]:
        """The `herd events --json` object (`host` only across hosts)."""
        keys = {"seq", "at", "session", "run", "kind", "message", "data"}
        return self.model_dump(include=keys | ({"host"} if self.host else set()))


class RunRecord(BaseModel):
    """One launch of `command` or `resume`: its identity (for a new daemon to find it) and end."""

    session: str
    run: int
    handle: str
    argv: list[str]
    mode: str = "command"
    cwd: str | None = None
    """Where the run was launched: its crash is rescued there, whatever herd.toml says now."""
    git_dir: str | None = None
    """The git folder of `cwd` when the run's task began ("" outside git; None: not recorded).
    A rescue or reset goes into no other: an agent can point `.git` anywhere."""
    git_dir_id: str | None = None
    """`device:inode` of that folder: the same path made anew is another repository."""
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
    message_id: str | None = None
    """The `herd send` message this run was resumed with (its `{message}`), if any."""


class PendingMessage(BaseModel):
    """A `herd send` text waiting for the session's next run, kept with the session's record
    so a daemon restart keeps it; the run that takes it names its `id`."""

    id: str
    text: str
    at: str
    origin: str
    """Who sent it: `person`, or `inside session 'NAME'` for an agent's request."""


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
    drift_spent_at_flip: dict[str, float] | None = None
    """burn-without-progress: the task's spend when a plan item last flipped to passing."""
    drift_passing_seen: int | None = None
    """Plan items passing at that flip, so a new daemon measures burn from the same point."""
    drift_streaks: dict[str, tuple[str, int]] = Field(default_factory=dict)
    """repeated-failure: per source ("verify", "crash"), the digest of the failure seen last
    and how many times in a row, so a new daemon counts on from the same streak."""
    stall_since_at: str | None = None
    """stalled: when the silence the stall clock measures began (paused time added back)."""
    stall_paused_at: str | None = None
    """stalled: when the clock stopped for a pause or the approval gate, while it is stopped."""
    budget_warned: list[str] = Field(default_factory=list)
    """Budget dimensions that gave their `budget-warning` (once each per task, or per life)."""
    budget_warned_for: str | None = None
    """The task handle (or "life") that `budget_warned` is about."""
    budget_stop_limit: float | None = None
    """The limit that stopped the session by budget, so `herd up` can tell it was raised."""
    budget_stop_scope: str | None = None
    """Whose budget that was: "session" or "fleet"."""
    pending_message: PendingMessage | None = None
    """A `herd send` text the next run takes (the resume's `{message}`), used once."""
    limit: dict[str, str | None] | None = None
    """The rate limit it last parked on: `account`, `delay_source` (agent | guess), `resets_at`."""
