"""Notifications with the evidence: which event is about what, what a message says, and when it
goes (deduplicated, a cooldown per session, quiet hours held for one digest).

Pure, with the clock passed in: the daemon's alert keeper (supervisor/session/alertkeeper.py)
feeds it events and statuses and sends what it returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

from agentherd.sessions.notifyconfig import CAUSES, PRIORITIES, NotificationsConfig
from agentherd.sessions.records import Event
from agentherd.sessions.status import SessionStatus

RESET_KINDS = frozenset({"task-started", "plan-approved", "plan-rejected"})
"""After these a session's causes may notify again (a new task, a gate answered)."""

RESETS_ONE: dict[str, str] = {"working": "waiting-input"}
"""After these one cause may notify again (the agent took its answer and works again)."""

DIGEST_LINES = 20
"""A digest lists at most this many messages; the rest are counted."""


@dataclass(frozen=True)
class Alert:
    """One message: its title, its lines, how urgent, the page it links, and what it is about."""

    session: str
    cause: str
    title: str
    body: str
    priority: str
    link: str | None = None
    """The page the message links (its last line, added when it is sent)."""
    gate_seq: int | None = None
    """An approval gate's `waiting-approval` seq: sent while that gate is open, the message
    links a signed approval link made then (one held through quiet hours is not stale)."""

    def text(self) -> str:
        """The message as sent: its lines, then its link."""
        return f"{self.body}\n{self.link}" if self.link else self.body


def cause_of(event: Event) -> str | None:
    """The cause an event is, or None (most events are about nothing a person must do)."""
    return event.kind if event.kind in CAUSES else None


def compose(status: SessionStatus, cause: str, event: Event, config: NotificationsConfig) -> Alert:
    """The message: the session, why, plan x/y, spend, the last progress line, a link."""
    why = event.message or CAUSES[cause]
    lines = [f"why: {why}"]
    if cause == "completed":
        lines.append(f"verify: {_verified(status)}")
    if status.plan is not None:
        lines.append(f"plan: {status.plan.passing}/{status.plan.total} passing")
        lines += [
            f"plan change: item {c.index + 1} {c.change}: {c.description}"
            for c in status.plan.changed_items[:5]
        ]
    check = status.checkpoint.verification if status.checkpoint else None
    if check is not None and not check.passed:
        lines.append(
            f"failing check: {check.error or f'exit {check.exit_code}'} at {check.sha[:7]}"
        )
    lines.append(f"spend: {_spend(status)}")
    latest = "\n".join(status.progress.latest) if status.progress else ""
    progress = next((line.strip() for line in reversed(latest.splitlines()) if line.strip()), "")
    if progress:
        lines.append(f"progress: {progress}")
    return Alert(
        session=status.session,
        cause=cause,
        title=f"herd: {status.session} {cause}",
        body="\n".join(lines),
        priority=config.priority_of(cause),
        link=session_url(config.public_url, status.session),
        gate_seq=event.seq if cause == "waiting-approval" else None,
    )


def session_url(public_url: str | None, name: str) -> str | None:
    """`public_url/session/NAME`, or None without a public_url."""
    return f"{public_url}/session/{quote(name, safe='')}" if public_url else None


def _spend(status: SessionStatus) -> str:
    usage = status.usage
    if usage is None:
        return "nothing yet"
    cost = f"${usage.cost_usd:.2f}" if usage.cost_usd is not None else "cost unknown"
    limit = (status.budget or {}).get("cost_usd", {})
    of = f" of ${limit['limit']:.2f}" if isinstance(limit, dict) and limit.get("limit") else ""
    return f"{cost}{of}, {usage.total_tokens:,} tokens"


def _verified(status: SessionStatus) -> str:
    check = status.checkpoint
    if check is None or check.verification is None:
        return "not verified (no checkpoint verified)"
    if check.verification.passed:
        return f"passed at {check.sha[:7]}"
    return f"FAILED at {check.sha[:7]}"


def local_minute(now: float) -> int:
    """The minute of the local day at `now`."""
    clock = time.localtime(now)
    return clock.tm_hour * 60 + clock.tm_min


@dataclass
class Gate:
    """When messages go: one per session and cause until it changes, at most one per session a
    cooldown (the rest wait for a digest), none in quiet hours (held for one digest after)."""

    cooldown_s: float
    quiet: tuple[int, int] | None = None
    minute_of: Callable[[float], int] = local_minute
    sent: dict[str, set[str]] = field(default_factory=dict)
    """Per session, the causes already notified since it last changed."""
    last_at: dict[str, float] = field(default_factory=dict)
    held: list[Alert] = field(default_factory=list)

    def reset(self, session: str, cause: str | None = None) -> None:
        """The session changed (a new task, a gate answered): its causes (or `cause`) may
        notify again."""
        if cause is None:
            self.sent.pop(session, None)
        else:
            self.sent.get(session, set()).discard(cause)

    def offer(self, alert: Alert, now: float) -> list[Alert]:
        """What to send now for a new alert (nothing when a duplicate, held, or quiet)."""
        causes = self.sent.setdefault(alert.session, set())
        if alert.cause in causes:
            return []
        causes.add(alert.cause)
        if self.is_quiet(now) or now < self.last_at.get(alert.session, -1e18) + self.cooldown_s:
            self.held.append(alert)
            return []
        self.last_at[alert.session] = now
        return [alert]

    def is_quiet(self, now: float) -> bool:
        """True inside quiet hours."""
        if self.quiet is None:
            return False
        start, end = self.quiet
        minute = self.minute_of(now)
        return start <= minute < end if start < end else minute >= start or minute < end

    def next_due_s(self, now: float) -> float | None:
        """Seconds until held messages may go (None: nothing held)."""
        if not self.held:
            return None
        if self.is_quiet(now):
            assert self.quiet is not None
            return max(1.0, ((self.quiet[1] - self.minute_of(now)) % 1440) * 60.0 - now % 60)
        ready = min(self.last_at.get(a.session, -1e18) + self.cooldown_s for a in self.held)
        return max(0.0, ready - now)

    def due(self, now: float, public_url: str | None) -> list[Alert]:
        """Held messages whose time came, as one digest when more than one."""
        if not self.held or self.is_quiet(now):
            return []
        ready = [
            a for a in self.held if now >= self.last_at.get(a.session, -1e18) + self.cooldown_s
        ]
        if not ready:
            return []
        self.held = [a for a in self.held if a not in ready]
        for alert in ready:
            self.last_at[alert.session] = now
        return [ready[0]] if len(ready) == 1 else [digest(ready, public_url)]


def digest(alerts: list[Alert], public_url: str | None) -> Alert:
    """Several held messages as one: a line each, the most urgent priority."""
    lines = [f"{a.session}: {a.cause}: {a.body.splitlines()[0]}" for a in alerts[:DIGEST_LINES]]
    if len(alerts) > DIGEST_LINES:
        lines.append(f"... and {len(alerts) - DIGEST_LINES} more")
    top = max((a.priority for a in alerts), key=PRIORITIES.index)
    return Alert(
        session="",
        cause="digest",
        title=f"herd: {len(alerts)} notifications held",
        body="\n".join(lines),
        priority=top,
        link=f"{public_url}/" if public_url else None,
    )
