"""What the dashboard's session keys do with a session: a command, a question first, or a word.

The app routes each key here with the selected session's status; the decisions (ask before a
restart, refuse to kill what is not running, ...) live here, the doing in the three callables
the app hands over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import SessionStatus

SESSION_ACTIONS = frozenset(
    {
        "start_stop",
        "restart",
        "kill",
        "pause_resume",
        "approve",
        "reject",
        "logs",
        "editor",
        "shell",
        "hide_output",
        "help",
        "stop_all",
    }
)
"""Actions that act on the selection, so they wait while a dialog is open."""

READ_ONLY_NOTE = "read-only: no daemon runs here; `herd up` starts one (and may start agents)"


@dataclass
class SessionKeys:
    """The session keys' decisions, acting through what the app hands over."""

    notify: Callable[[str], None]
    """Say something in a few words."""
    confirm: Callable[[str, str, Callable[[], None]], None]
    """Ask (question, what yes does) and run the callable on an explicit yes."""
    command: Callable[..., None]
    """Send (name, op, **args) to the daemon in the background."""

    def start_stop(self, status: SessionStatus | None) -> None:
        """Start the session when it is not active, stop it otherwise."""
        if status is None:
            return
        name, state = status.session, status.state
        if state == "stopping":
            self.notify(f"{name} is already stopping")
        elif state in ACTIVE_STATES:
            self.command(name, "stop")
        else:
            self.command(name, "start")

    def restart(self, status: SessionStatus | None) -> None:
        """Stop the session (gracefully) and start a new task, after a confirmation: in any
        state a restart runs (and pays) the agent again, and on an active session it also
        ends the run under way."""
        if status is not None:
            name = status.session
            question, consequence = restart_question(name, status.state)
            self.confirm(question, consequence, lambda: self.command(name, "restart"))

    def restart_from(self, name: str, sha: str) -> None:
        """Restart `name` from checkpoint `sha`, after a confirmation that says what happens."""
        args: dict[str, Any] = {"from": sha}
        self.confirm(
            f"Restart {name} from {sha[:10]}?",
            "Uncommitted work is saved on a rescue ref, the worktree is reset to that "
            "checkpoint, and a new task begins.",
            lambda: self.command(name, "restart", **args),
        )

    def kill(self, status: SessionStatus | None) -> None:
        """SIGKILL the session's run, after a confirmation that names it."""
        if status is None:
            return
        name = status.session
        if status.state not in ACTIVE_STATES:
            self.notify(f"{name} is not running")
            return
        self.confirm(
            f"Kill {name}?",
            f"Every process of {name}'s run gets SIGKILL now, with no grace period; "
            "uncommitted work stays in the worktree.",
            lambda: self.command(name, "stop", kill=True),
        )

    def pause_resume(self, status: SessionStatus | None) -> None:
        """Pause the session's run, or resume it when paused."""
        if status is None:
            return
        if status.state == "paused":
            self.command(status.session, "resume")
        elif status.state in ACTIVE_STATES:
            self.command(status.session, "pause")
        else:
            self.notify(f"{status.session} is not running")

    def _plan_changed(self, status: SessionStatus) -> bool:
        """True when there is a plan change to judge; otherwise say so."""
        if status.state == "waiting-approval" or (status.plan and status.plan.changed_items):
            return True
        self.notify(f"{status.session}: the plan has not changed since its baseline")
        return False

    def approve(self, status: SessionStatus | None) -> None:
        """Adopt the changed plan as the baseline, after a confirmation."""
        if status is not None and self._plan_changed(status):
            name = status.session
            self.confirm(
                f"Approve {name}'s changed plan?",
                "The plan as it is now becomes the baseline later changes are judged against.",
                lambda: self.command(name, "approve"),
            )

    def reject(self, status: SessionStatus | None) -> None:
        """Write the baseline plan back, after a confirmation."""
        if status is not None and self._plan_changed(status):
            name = status.session
            self.confirm(
                f"Reject {name}'s plan changes?",
                "herd writes the baseline plan back into the worktree; items passing now "
                "stay passing.",
                lambda: self.command(name, "reject"),
            )

    def ack(self, status: SessionStatus | None) -> None:
        """Acknowledge every open warning of the session (`herd ack NAME`)."""
        if status is not None and not status.warnings:  # seen in tmux: the notice said "running"
            self.notify(f"{status.session} has no open warnings to acknowledge")
        elif status is not None:
            self.command(status.session, "ack")


def restart_question(name: str, state: str) -> tuple[str, str]:
    """The confirmation of a restart: the question naming the session, and what yes does."""
    if state == "backoff":
        return (
            f"Restart {name}?",
            f"{name}'s wait before its next try is called off and a new task begins now: "
            "the agent runs again and spends again.",
        )
    if state in ACTIVE_STATES:
        return (
            f"Restart {name}?",
            f"{name}'s run is stopped gracefully (its stop grace period), then a new task "
            "begins: the agent runs again and spends again.",
        )
    return (
        f"Restart {name} ({state})?",
        f"A new task begins: {name}'s agent runs again and spends again.",
    )
