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
