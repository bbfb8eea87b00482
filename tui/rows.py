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
        "plan": (plan_text(status), ""),
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
