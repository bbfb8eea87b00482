"""What the dashboard shows for a session, as plain cells: no widgets, so it is cheap to test."""

from __future__ import annotations

from collections import Counter

from agentherd.sessions.durations import format_duration
from agentherd.sessions.sanitize import ELLIPSIS, inert
from agentherd.sessions.status import CheckpointStatus, SessionStatus, UsageStatus
from agentherd.sessions.times import parse_iso, utc_now
from agentherd.tui.render import plan_text, run_seconds, state_text
from agentherd.tui.spend import budget_cell, fleet_text, usage_money

COLUMNS: tuple[tuple[str, str], ...] = (
    ("session", "SESSION"),
    ("host", "HOST"),
    ("state", "STATE"),
    ("pid", "PID"),
    ("restarts", "RST"),
    ("uptime", "UP"),
    ("plan", "PLAN"),
    ("checkpoint", "CHECKPOINT"),
    ("cost", "COST"),
    ("budget", "BUDGET"),
    ("last", "LAST OUTPUT"),
)
"""Column key and label, left to right; the last output takes whatever width is left.
HOST shows only across hosts (`[cluster]`)."""

STATE_MAX_CHARS = 24
STATE_WIDE_CHARS = 40
"""STATE_MAX_CHARS on a terminal of WIDE_COLUMNS or more: room for most reasons whole."""
WIDE_COLUMNS = 160
"""The STATE cell's widest for a reason: a longer one is cut with an ellipsis or left out
(the details under the table say it whole), so one held session does not push the last
output off the screen. When a parked session resumes, and its warnings, are never cut."""

STATE_STYLES = {
    "running": "green",
    "starting": "cyan",
    "paused": "yellow",
    "waiting-approval": "bold yellow",
    "waiting-input": "bold yellow",
    "verifying": "cyan",
    "backoff": "yellow",
    "stopping": "cyan",
    "stopped": "dim",
    "completed": "bold green",
    "failed": "bold red",
    "idle": "dim",
    "queued": "magenta",
}
"""How each state reads at a glance; failures shout, ends at rest are dim."""

SUMMARY_ORDER = (
    "running",
    "starting",
    "verifying",
    "backoff",
    "paused",
    "waiting-approval",
    "waiting-input",
    "stopping",
    "queued",
    "failed",
    "completed",
    "stopped",
    "idle",
)
"""The order states are counted in the header: what needs attention comes before what rests."""

Cell = tuple[str, str]
"""A cell's text and its Rich style ("" for none)."""


def cut(text: str, width: int) -> str:
    """Text cut to `width` characters, with an ellipsis when something was dropped."""
    if len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + ELLIPSIS


VERIFIED_MARKS = {True: ("✓", "green"), False: ("✗", "bold red"), None: ("…", "dim")}
"""A checkpoint's verification at a glance: passed, fails, not verified (yet)."""


def checkpoint_cell(checkpoint: CheckpointStatus | None) -> Cell:
    """`a1b2c3d ✓`: the last checkpoint and whether herd's own verification passed."""
    if not checkpoint:
        return ("-", "dim")
    mark, style = VERIFIED_MARKS[checkpoint.verified]
    return (f"{checkpoint.sha[:7]} {mark}", style)


def cost_text(usage: UsageStatus | None) -> str:
    """`$0.42` (`~$0.42` estimated), or `-` when the agent reports no cost (never $0);
    `unpriced` (`$0.42+` for part) when a model herd has no price for left tokens out."""
    return usage_money(usage)


def unpriced(usage: UsageStatus | None) -> bool:
    """True when the cost leaves out the tokens of a model herd has no price for."""
    return usage is not None and usage.cost_unpriced_model is not None


def progress_gist(entry: str) -> str:
    """An entry's heading and its last bullet: `Session 4 (coding): Status: 3/7 passing`."""
    lines = [line.strip() for line in entry.splitlines() if line.strip()]
    if not lines:
        return ""
    head = lines[0].lstrip("#").strip()
    bullets = [line.lstrip("-*").strip() for line in lines[1:] if line[:1] in "-*"]
    return f"{head}: {bullets[-1]}" if bullets else head


def detail_lines(status: SessionStatus | None) -> list[str]:
    """A few lines on where the selected session stands: plan, checkpoint, progress, warnings."""
    if status is None:
        return []
    # The reason leads: at 80 columns the table shows the bare state.
    # The state whole (with when a parked session resumes): the table's STATE cuts it.
    state = state_text(status) + resumes_in(status) + limit_note(status)
    name = f"{status.session}  {state}  ·" if state != str(status.state) else status.session
    plan = status.plan
    lines = []
    if plan:
        changed = plan.changed_items
        drift = f"; {len(changed)} change(s) against the baseline" if changed else ""
        error = f"; {plan.error}" if plan.error else ""
        lines.append(f"{name}  plan {plan.passing}/{plan.total} passing{drift}{error}")
    else:
        lines.append(f"{name}  no plan file")
    checkpoint = status.checkpoint
    if checkpoint:
        verdict = {True: "verified", False: "FAILS verification", None: "not verified"}[
            checkpoint.verified
        ]
        lines.append(f"  checkpoint {checkpoint.sha[:10]} {verdict}: {checkpoint.subject}")
        check = checkpoint.verification
        if check and not check.passed:
            tail = (check.output_tail or "").splitlines()[-1:] or [""]
            lines.append(f"  verify: {check.error or 'exit ' + str(check.exit_code)}: {tail[0]}")
    elif status.git_note:
        lines.append(f"  {status.git_note}")
    latest = status.progress.latest if status.progress else []
    if latest:
        lines.append(f"  progress: {progress_gist(latest[-1])}")
    lines.extend(f"  ⚠ {w.kind}: {w.message}" for w in status.warnings[-2:])
    return [inert(line) for line in lines]


def resumes_in(status: SessionStatus) -> str:
    """` resumes in 42m` for a session parked on a rate limit, else nothing."""
    if status.state != "backoff" or status.reason != "rate-limit" or not status.next_restart_at:
        return ""
    when = parse_iso(status.next_restart_at)
    if when is None:
        return ""
    return f" resumes in {format_duration(max(0.0, (when - utc_now()).total_seconds()))}"


def limit_note(status: SessionStatus) -> str:
    """` waiting on rate limit (attempt 2)` while the agent retries a limit by itself; ` (guess)`
    after `resumes in` when herd's wait is its own guess (the agent gave no reset time)."""
    limit = status.limit or {}
    if limit.get("waiting") == "agent" and status.state == "running":
        attempt = limit.get("attempt")
        return " waiting on rate limit" + (f" (attempt {attempt})" if attempt else "")
    if limit.get("waiting") == "herd" and limit.get("delay_source") == "guess":
        return " (guess)"
    return ""


def limits_text(statuses: list[SessionStatus]) -> str:
    """`  ·  limit claude:login: 3 parked until 21:05:10` per account parked on its limit."""
    fleet = next((s.fleet for s in statuses if s.fleet and s.fleet.get("limits")), None)
    parts = []
    for account, park in ((fleet or {}).get("limits") or {}).items():
        until = parse_iso(park.get("until"))
        when = until.astimezone().strftime("%H:%M:%S") if until else "?"
        parts.append(f"limit {account}: {len(park.get('parked') or [])} parked until {when}")
    return "".join(f"  ·  {part}" for part in parts)


UPTIME_STEP_S = 10
"""In its first minute a run's uptime moves in steps of this many seconds: a fleet that
restarts often has most of its rows there, and each step redraws a cell."""


def uptime_cell(status: SessionStatus) -> str:
    """`40s`, `12m`, `3h05m`: seconds (in steps of ten) only in the first minute, so a cell
    changes at most once a minute after it (a fleet's uptimes ticking every second kept the
    whole table redrawing)."""
    seconds = run_seconds(status)
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{int(seconds) // UPTIME_STEP_S * UPTIME_STEP_S}s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def short_reason(reason: str | None, room: int) -> str:
    """` (plan-tampered)` in `room` characters: cut with an ellipsis, `(…)` when only that
    fits, nothing when not even that does (the details under the table say it whole)."""
    if not reason:
        return ""
    room -= 3  # " (" and ")"
    if room >= len(reason):
        return f" ({reason})"
    if room >= 4:
        return f" ({cut(reason, room)})"
    return " (…)" if room >= 1 else ""


def row_cells(
    status: SessionStatus, last_width: int, state_chars: int = STATE_MAX_CHARS
) -> dict[str, Cell]:
    """Every cell of one session's row, the last output cut to `last_width` characters and
    the state's reason to fit `state_chars` (0, a narrow terminal: the bare state); the
    details under the table say the reason whole."""
    state = str(status.state)
    style = STATE_STYLES.get(state, "")
    warnings = status.warnings
    tail = resumes_in(status) + limit_note(status) + (f" ⚠{len(warnings)}" if warnings else "")
    reason = (
        short_reason(status.reason, state_chars - len(state) - len(tail)) if state_chars else ""
    )
    state_cell = state + reason + tail
    return {
        "session": (status.session, "bold"),
        "host": (status.host or "-", "cyan"),
        "state": (state_cell, style),
        "pid": (str(status.pid) if status.pid else "-", ""),
        "restarts": (str(status.restarts), "yellow" if status.restarts else ""),
        "uptime": (uptime_cell(status), ""),
        "plan": (plan_text(status), "yellow" if status.plan and status.plan.changed_items else ""),
        "checkpoint": checkpoint_cell(status.checkpoint),
        "cost": (cost_text(status.usage), "yellow" if unpriced(status.usage) else ""),
        "budget": budget_cell(status),
        "last": (cut(inert(status.last_line), last_width), "dim"),
    }


def fleet_summary(statuses: list[SessionStatus]) -> str:
    """`6 sessions: 4 running, 1 failed, 1 stopped  ·  plan 12/48 passing`."""
    if not statuses:
        return "no sessions in herd.toml"
    counts = Counter(str(s.state) for s in statuses)
    parts = [f"{counts[state]} {state}" for state in SUMMARY_ORDER if counts.get(state)]
    parts += [f"{n} {state}" for state, n in counts.items() if state not in SUMMARY_ORDER]
    noun = "session" if len(statuses) == 1 else "sessions"
    text = f"{len(statuses)} {noun}: " + ", ".join(parts)
    plans = [s.plan for s in statuses if s.plan]
    if plans:
        passing = sum(p.passing for p in plans)
        total = sum(p.total for p in plans)
        text += f"  ·  plan {passing}/{total} passing"
    return text + fleet_text(statuses) + limits_text(statuses)
