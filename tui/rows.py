"""What the dashboard shows for a session, as plain cells: no widgets, so it is cheap to test."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentherd.sessions.sanitize import ELLIPSIS, inert
from agentherd.tui.render import plan_text, state_text, uptime

COLUMNS: tuple[tuple[str, str], ...] = (
    ("session", "SESSION"),
    ("state", "STATE"),
    ("pid", "PID"),
    ("restarts", "RST"),
    ("uptime", "UP"),
    ("plan", "PLAN"),
    ("checkpoint", "CHECKPOINT"),
    ("cost", "COST"),
    ("last", "LAST OUTPUT"),
)
"""Column key and label, left to right; the last output takes whatever width is left."""

LAST_MIN_CHARS = 12
"""Below this the last output says nothing; the table scrolls sideways instead."""

STATE_STYLES = {
    "running": "green",
    "starting": "cyan",
    "paused": "yellow",
    "waiting-approval": "bold yellow",
    "verifying": "cyan",
    "backoff": "yellow",
    "stopping": "cyan",
    "stopped": "dim",
    "completed": "bold green",
    "failed": "bold red",
    "idle": "dim",
}
"""How each state reads at a glance; failures shout, ends at rest are dim."""

SUMMARY_ORDER = (
    "running",
    "starting",
    "verifying",
    "backoff",
    "paused",
    "waiting-approval",
    "stopping",
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


def checkpoint_cell(checkpoint: dict[str, Any] | None) -> Cell:
    """`a1b2c3d ✓`: the last checkpoint and whether herd's own verification passed."""
    if not checkpoint:
        return ("-", "dim")
    mark, style = VERIFIED_MARKS[checkpoint.get("verified")]
    return (f"{str(checkpoint.get('sha', ''))[:7]} {mark}", style)


def cost_text(usage: dict[str, Any] | None) -> str:
    """`$0.42`, or `-` when the agent reports no cost (never an invented $0)."""
    cost = (usage or {}).get("cost_usd")
    return "-" if cost is None else f"${cost:.2f}"


def progress_gist(entry: str) -> str:
    """An entry's heading and its last bullet: `Session 4 (coding): Status: 3/7 passing`."""
    lines = [line.strip() for line in entry.splitlines() if line.strip()]
    if not lines:
        return ""
    head = lines[0].lstrip("#").strip()
    bullets = [line.lstrip("-*").strip() for line in lines[1:] if line[:1] in "-*"]
    return f"{head}: {bullets[-1]}" if bullets else head


def detail_lines(status: dict[str, Any] | None) -> list[str]:
    """A few lines on where the selected session stands: plan, checkpoint, progress, warnings."""
    if status is None:
        return []
    name = str(status.get("session", "?"))
    plan = status.get("plan")
    lines = []
    if plan:
        changed = plan.get("changed_items") or []
        drift = f"; {len(changed)} change(s) against the baseline" if changed else ""
        error = f"; {plan['error']}" if plan.get("error") else ""
        lines.append(f"{name}  plan {plan['passing']}/{plan['total']} passing{drift}{error}")
    else:
        lines.append(f"{name}  no plan file")
    checkpoint = status.get("checkpoint")
    if checkpoint:
        verdict = {True: "verified", False: "FAILS verification", None: "not verified"}[
            checkpoint.get("verified")
        ]
        lines.append(
            f"  checkpoint {str(checkpoint['sha'])[:10]} {verdict}: {checkpoint.get('subject', '')}"
        )
        check = checkpoint.get("verification") or {}
        if check and not check.get("passed"):
            tail = (check.get("output_tail") or "").splitlines()[-1:] or [""]
            lines.append(
                f"  verify: {check.get('error') or 'exit ' + str(check.get('exit_code'))}"
                f": {tail[0]}"
            )
    elif status.get("git_note"):
        lines.append(f"  {status['git_note']}")
    progress = status.get("progress") or {}
    latest = progress.get("latest") or []
    if latest:
        lines.append(f"  progress: {progress_gist(latest[-1])}")
    lines.extend(f"  ⚠ {w['kind']}: {w['message']}" for w in (status.get("warnings") or [])[-2:])
    return [inert(line) for line in lines]


def row_cells(status: dict[str, Any], last_width: int) -> dict[str, Cell]:
    """Every cell of one session's row, the last output cut to `last_width` characters."""
    state = str(status.get("state", "idle"))
    style = STATE_STYLES.get(state, "")
    warnings = status.get("warnings") or []
    state_cell = state_text(status) + (f" ⚠{len(warnings)}" if warnings else "")
    return {
        "session": (str(status.get("session", "?")), "bold"),
        "state": (state_cell, style),
        "pid": (str(status["pid"]) if status.get("pid") else "-", ""),
        "restarts": (str(status.get("restarts") or 0), "yellow" if status.get("restarts") else ""),
        "uptime": (uptime(status), ""),
        "plan": (
            plan_text(status),
            "yellow" if (status.get("plan") or {}).get("changed_items") else "",
        ),
        "checkpoint": checkpoint_cell(status.get("checkpoint")),
        "cost": (cost_text(status.get("usage")), ""),
        "last": (cut(inert(str(status.get("last_line") or "")), last_width), "dim"),
    }


def fleet_summary(statuses: list[dict[str, Any]]) -> str:
    """`6 sessions: 4 running, 1 failed, 1 stopped  ·  plan 12/48 passing`."""
    if not statuses:
        return "no sessions in herd.toml"
    counts = Counter(str(s.get("state")) for s in statuses)
    parts = [f"{counts[state]} {state}" for state in SUMMARY_ORDER if counts.get(state)]
    parts += [f"{n} {state}" for state, n in counts.items() if state not in SUMMARY_ORDER]
    noun = "session" if len(statuses) == 1 else "sessions"
    text = f"{len(statuses)} {noun}: " + ", ".join(parts)
    plans = [s["plan"] for s in statuses if s.get("plan")]
    if plans:
        passing = sum(int(p.get("passing", 0)) for p in plans)
        total = sum(int(p.get("total", 0)) for p in plans)
        text += f"  ·  plan {passing}/{total} passing"
    return text
