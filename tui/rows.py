"""What the dashboard shows for a session, as plain cells: no widgets, so it is cheap to test."""

from __future__ import annotations

import functools
import json
import re
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

_ESCAPE_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
"""CSI (colours, cursor moves) and OSC (titles, links) sequences: dropped for display."""

_TEXT_FIELD = re.compile(r'"(?:text|result|content)":"((?:[^"\\]|\\.)*)')
"""The first text-like string in a JSON line, even when the line was cut before its end."""


def cut(text: str, width: int) -> str:
    """Text cut to `width` characters, with an ellipsis when something was dropped."""
    if len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + ELLIPSIS


def _first_line(text: str) -> str:
    """The first non-blank line's text, stripped."""
    return text.strip().splitlines()[0] if text.strip() else ""


def _tool_call(block: dict[str, Any]) -> str:
    """`Write src/feature_1.py` for a tool_use block."""
    given = block.get("input")
    arguments: dict[str, Any] = given if isinstance(given, dict) else {}
    target = next(
        (str(arguments[k]) for k in ("file_path", "command", "path", "pattern") if k in arguments),
        "",
    )
    return f"{block.get('name', 'tool')} {_first_line(target)}".strip()


def _blocks_text(content: Any) -> str:
    """Readable text for a message's content blocks: text first, else tool calls or results."""
    if isinstance(content, str):
        return _first_line(content)
    if not isinstance(content, list):
        return ""
    blocks = [b for b in content if isinstance(b, dict)]
    for block in blocks:
        if block.get("type") == "text" and str(block.get("text", "")).strip():
            return _first_line(str(block["text"]))
    calls = [_tool_call(b) for b in blocks if b.get("type") == "tool_use"]
    if calls:
        return "; ".join(calls)
    results = [b.get("content") for b in blocks if b.get("type") == "tool_result"]
    texts = [_first_line(r) for r in results if isinstance(r, str)]
    return "→ " + "; ".join(texts) if texts else ""


def _summary(event: dict[str, Any]) -> str:
    """One line for a structured output event (Claude-style stream JSON and similar)."""
    kind = str(event.get("type", ""))
    if kind == "system":
        model = f" (model {event['model']})" if event.get("model") else ""
        return f"{event.get('subtype', 'system')}: agent session started{model}"
    if kind == "result":
        word = "error" if event.get("is_error") else "result"
        return f"{word}: {_first_line(str(event.get('result', '')))}"
    message = event.get("message")
    if isinstance(message, dict):
        return _blocks_text(message.get("content"))
    return ""


def _as_terminal_shows(line: str) -> str:
    """Plain text without escape sequences, and only what follows the last carriage return."""
    text = _ESCAPE_SEQUENCE.sub("", line).rstrip("\r")
    return text.rsplit("\r", 1)[-1]


def activity(line: str) -> str:
    """A person's view of one output line: JSON events summarised, anything else as it is."""
    stripped = line.strip()
    if not stripped.startswith("{"):
        return inert(_as_terminal_shows(line))
    try:
        event = json.loads(stripped)
    except ValueError:
        event = None
    if isinstance(event, dict):
        summary = _summary(event)
        return inert(summary) if summary else inert(line)
    found = _TEXT_FIELD.search(stripped)  # a line cut before its end is not valid JSON
    if found:
        arrow = "→ " if '"tool_result"' in stripped[: found.start()] else ""
        try:
            return inert(arrow + _first_line(json.loads(f'"{found.group(1)}"')))
        except ValueError:
            return inert(arrow + found.group(1))
    return inert(line)


_cached_activity = functools.lru_cache(maxsize=1024)(activity)
"""Rows are redrawn a few times a second with mostly the same last lines."""


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
        "last": (cut(_cached_activity(str(status.get("last_line") or "")), last_width), "dim"),
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
