"""Session states a person reads, and how they map onto task-handle states (MCP, A2A)."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    """Where a session stands; stored and shown as these exact strings."""

    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_APPROVAL = "waiting-approval"
    VERIFYING = "verifying"
    """The run ended; its final checkpoint waits for its verdict before the task goes on."""
    BACKOFF = "backoff"
    STOPPING = "stopping"
    STOPPED = "stopped"
    COMPLETED = "completed"
    FAILED = "failed"


TERMINAL_STATES = frozenset({State.STOPPED, State.COMPLETED, State.FAILED})
"""A task in one of these has ended; a new `start` begins a new task."""

ACTIVE_STATES = frozenset(
    {
        State.STARTING,
        State.RUNNING,
        State.PAUSED,
        State.WAITING_APPROVAL,
        State.VERIFYING,
        State.BACKOFF,
        State.STOPPING,
    }
)

_TASK_STATE = {
    State.IDLE: "working",
    State.STARTING: "working",
    State.RUNNING: "working",
    State.PAUSED: "working",
    State.VERIFYING: "working",
    State.BACKOFF: "working",
    State.STOPPING: "working",
    State.WAITING_APPROVAL: "input_required",
    State.COMPLETED: "completed",
    State.FAILED: "failed",
    State.STOPPED: "cancelled",
}


def task_state(state: State) -> str:
    """The MCP/A2A-style task state for a herd state."""
    return _TASK_STATE[state]


WAIT_EXIT_CODES = {State.COMPLETED: 0, State.FAILED: 1, State.STOPPED: 3}
"""`herd wait` exit codes by how the task ended; 124 means the wait timed out."""
WAIT_TIMEOUT_EXIT = 124

REASONS: dict[str, str] = {
    "user": "a person stopped, killed, restarted or paused it",
    "down": "`herd down` stopped it; the next `herd up` starts it again",
    "host-lost": "across hosts: the host it ran on stopped renewing its lease; this is that "
    "host's last word until the engine moves the task (after the lease expired)",
    "fenced": "stopped (SIGKILL): its host could not renew its cluster lease, so the session "
    "may run elsewhere",
    "crashed": "backoff: the run failed; the next run starts after the delay",
    "exited": "backoff: the run exited cleanly and the restart policy runs it again",
    "disk-full": "backoff: the run ended while the disk was full; the restart waits for "
    "space and is not counted as a crash",
    "crash-loop": "failed: max_crashes crashes within crash_window",
    "no-progress": "failed: until-done ran 3 clean runs in a row that passed no new plan item",
    "spawn-failed": "failed: the command could not be started",
    "run-folder-busy": "failed: processes of a run no state remembers still hold the run's folder",
    "unkillable": "failed: processes of the run survived SIGKILL",
    "lost": "failed: the daemon stopped after recording a run, before it started",
    "agent-error": "failed (restart = never): the agent reported an error as its result",
    "rate-limit": "backoff: the agent hit a rate limit; it waits until the limit resets "
    "(failed when restart = never)",
    "permission-denied": "failed: the agent was refused the tools it needs (widen its flags)",
    "resume-refused": "backoff: the agent could not resume its session; the next run uses command",
    "no-result": "failed (restart = never): a claude or amp run exited 0 without its result line",
    "exit unknown": "failed (restart = never): the run ended unwatched and left no exit status",
    "unverified": "failed: the run ended cleanly but its final checkpoint did not pass `verify`",
    "plan-incomplete": "failed: the run ended cleanly while plan items still fail",
    "plan-tampered": "failed: a baseline plan item was removed or reworded without approval "
    "(also the reason of waiting-approval after such a change)",
}
"""Every fixed `reason` a state can carry, with its meaning in one line."""

REASON_PATTERNS: dict[str, str] = {
    "budget:<dimension>": "stopped: that budget dimension is spent (wall_time, tokens, "
    "cost_usd, turns or restarts)",
    "exit <code>": "failed (restart = never): the run exited with this code",
    "signal <name>": "failed (restart = never): this signal ended the run",
    "drift:<kind>": "on_drift said stop (stopped) or restart (backoff) for this drift kind; "
    "waiting-approval carries the kind itself",
}
"""Reasons with a variable part: the text before `<` is fixed."""
