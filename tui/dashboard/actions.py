"""What the dashboard's session keys do with a session: a command, a question first, or a word.

The app routes each key here with the selected session's status; the decisions (ask before a
restart, refuse to kill what is not running, ...) live here, the doing in the three callables
the app hands over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentherd.sessions.plan import change_text
from agentherd.sessions.sanitize import inert
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import SessionStatus
from agentherd.tui.render import state_text
from agentherd.tui.spend import budget_cell, usage_money

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
        "send",
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
                "The plan as it is now becomes the baseline later changes are judged against."
                + judged(status),
                lambda: self.command(name, "approve"),
            )

    def reject(self, status: SessionStatus | None) -> None:
        """Write the baseline plan back, after a confirmation."""
        if status is not None and self._plan_changed(status):
            name = status.session
            self.confirm(
                f"Reject {name}'s plan changes?",
                "herd writes the baseline plan back into the worktree; items passing now "
                "stay passing." + judged(status),
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


DONE_VERBS = {
    "start": "started",
    "restart": "restarted",
    "stop": "stopping",
    "pause": "paused",
    "resume": "resumed",
    "approve": "approved the plan of",
    "reject": "restored the baseline plan of",
}
"""What a key without a confirmation did, as the first words of its notice."""


def done_text(op: str, name: str, result: Any, before: SessionStatus | None) -> str:
    """What a command did to whom: `paused beta (now paused)`; for an ack, which warnings
    (`before`: the session's status when the key was pressed)."""
    if op == "ack":
        kinds = [w.kind for w in before.warnings] if before is not None else []
        left = len(result.warnings) if isinstance(result, SessionStatus) else 0
        what = ", ".join(kinds) or "every open warning"
        return f"acknowledged {what} of {name}; {left} warning(s) left on its badge"
    verb = DONE_VERBS.get(op, op)
    if op == "stop" and isinstance(result, SessionStatus) and result.state == "stopped":
        verb = "stopped"
    if isinstance(result, SessionStatus):
        now = state_text(result)
        # `paused api`, not `paused api (now paused (user))`: the state only when it says more.
        return f"{verb} {name}" if now.startswith(verb) else f"{verb} {name} (now {now})"
    return f"{verb} {name}: {result.handle}"


CHANGING_ACTIONS = frozenset(
    {"start_stop", "restart", "kill", "pause_resume", "approve", "reject", "ack", "stop_all"}
)
"""Actions that change a session or the fleet: none works read-only."""

SELECTED_ACTIONS = CHANGING_ACTIONS - {"stop_all"}
"""Actions on the selected session, shown first in the footer when they apply to it."""


def applying_keys(status: SessionStatus | None, read_only: bool) -> dict[str, str]:
    """The footer's session keys for the selected session's state: action -> its word there
    (`Stop` for a running session's start/stop key). Keys that would only say "not running"
    or "nothing to approve" are left out, so the ones that matter fit at 120 columns."""
    if read_only or status is None:
        return {}
    state = status.state
    keys: dict[str, str] = {}
    if state == "waiting-approval":
        keys = {"approve": "Approve", "reject": "Reject", "start_stop": "Stop"}
    elif state == "paused":
        keys = {"pause_resume": "Resume", "start_stop": "Stop", "kill": "Kill"}
    elif state in ACTIVE_STATES:
        keys = {"start_stop": "Stop", "restart": "Restart", "kill": "Kill"}
        if state in ("running", "starting"):
            keys["pause_resume"] = "Pause"
    else:
        keys = {"start_stop": "Start", "restart": "Restart"}
    if state != "waiting-approval" and status.plan and status.plan.changed_items:
        keys |= {"approve": "Approve", "reject": "Reject"}
    if status.warnings:
        keys["ack"] = "Ack"
    return keys


CHANGES_SHOWN = 6
"""The approve and reject dialogs list at most this many plan changes (then a count)."""
DIALOG_ITEM_CHARS = 160
"""A plan item's text in those dialogs (a reworded one shows old → new): the dialog wraps."""


def judged(status: SessionStatus) -> str:
    """What an approval or a rejection is about, as lines under the dialog's sentence: the
    plan's changes, a failing verification of the checkpoint, and the spend so far."""
    lines = ["", ""]  # a blank line under the dialog's sentence
    changes = status.plan.changed_items if status.plan else []
    if changes:
        lines.append(f"The plan's changes against its baseline ({len(changes)}):")
        lines += [
            "  " + change_text(c.index, c.change, inert(c.description), DIALOG_ITEM_CHARS)
            for c in changes[:CHANGES_SHOWN]
        ]
        if len(changes) > CHANGES_SHOWN:
            lines.append(f"  and {len(changes) - CHANGES_SHOWN} more (the Plan tab lists all)")
    else:
        lines.append(f"Held for: {status.reason or 'a plan change'}")
    checkpoint = status.checkpoint
    check = checkpoint.verification if checkpoint else None
    if checkpoint and check and not check.passed:
        tail = (check.output_tail or "").splitlines()[-1:] or [""]
        why = check.error or f"exit {check.exit_code}"
        lines.append(
            f"Checkpoint {checkpoint.sha[:10]} fails verification: {why}: {inert(tail[0])}"
        )
    money = usage_money(status.usage)
    budget, _ = budget_cell(status)
    spend = f"Spent so far: {money}" if money != "-" else "Spent so far: not reported"
    lines.append(spend + (f" (budget {budget})" if budget != "-" else ""))
    return "\n".join(lines)
