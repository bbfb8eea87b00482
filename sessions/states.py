"""Session states a person reads, and how they map onto task-handle states (MCP, A2A)."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    """Where a session stands; stored and shown as these exact strings."""

    IDLE = "idle"
    QUEUED = "queued"
    """A task was asked for but waits its turn: for its `after` sessions to complete."""
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_APPROVAL = "waiting-approval"
    WAITING_INPUT = "waiting-input"
    """The run lives and its agent waits for a person: a permission prompt, a question, or a
    finished answer at its prompt (the agent's own hooks said so)."""
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
        State.QUEUED,
        State.STARTING,
        State.RUNNING,
        State.PAUSED,
        State.WAITING_APPROVAL,
        State.WAITING_INPUT,
        State.VERIFYING,
        State.BACKOFF,
        State.STOPPING,
    }
)

LIVE_STATES = frozenset({State.RUNNING, State.PAUSED, State.WAITING_INPUT})
"""A run lives and no gate holds it: working, paused by a person, or waiting for input."""

RUN_STATES = ACTIVE_STATES - {State.QUEUED}
"""A task whose agent is at work or about to be (a queued one has no run yet)."""

_TASK_STATE = {
    State.IDLE: "working",
    State.QUEUED: "working",
    State.STARTING: "working",
    State.RUNNING: "working",
    State.PAUSED: "working",
    State.VERIFYING: "working",
    State.BACKOFF: "working",
    State.STOPPING: "working",
    State.WAITING_APPROVAL: "input_required",
    State.WAITING_INPUT: "input_required",
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
WAIT_UNREACHABLE_EXIT = 4
"""`herd wait --until`: the session settled in another state (idle, stopped, completed,
failed) that only a person's start leaves, so the states asked for cannot come."""

REASONS: dict[str, str] = {
    "user": "a person stopped, killed, restarted or paused it",
    "down": "`herd down` stopped it; the next `herd up` starts it again",
    "host-lost": "across hosts: the host it ran on stopped renewing its lease, or was shut "
    "down by SIGTERM (its run stopped within stop_grace); this is that "
    "host's last word until the engine moves the task (after lease and grace); on that host, "
    "once back: the task it no longer owns, ended there",
    "fenced": "stopped (SIGKILL): its host could not renew its cluster lease, or the session "
    "was given to another host, so the session may run elsewhere",
    "fleet-limit": "queued, across hosts: the task waits for a slot of the whole fleet "
    "(`[cluster] max_sessions`)",
    "host-limit": "queued, across hosts: the task's host has no free slot "
    "(`max_sessions_per_host`); it starts there when one frees",
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
    "after:<name>": "queued: the task starts once session <name> (of its `after`) has "
    "completed; the first one not completed yet is named",
    "after-failed:<name>": "stopped: session <name> of its `after` ended failed or stopped, so "
    "this link of the chain can never run",
    "worktree:<name>": "queued: its `after` sessions completed, but session <name> runs in "
    "the same worktree; it starts when that task ends",
    "drift:<kind>": "on_drift said stop (stopped) or restart (backoff) for this drift kind; "
    "waiting-approval carries the kind itself",
}
"""Reasons with a variable part: the text before `<` is fixed."""
