"""One line a person can read for each line of agent output: JSON events summarised."""

from __future__ import annotations

import json
import re
from typing import Any

from agentherd.sessions.sanitize import display_line

SUMMARY_SCAN_BYTES = 256 * 1024
"""A JSON line longer than this is summarised from its start (it is cut, not parsed whole)."""

_TYPE_FIELD = re.compile(r'"type"\s*:\s*"([A-Za-z_.-]{1,40})"')
"""The event type of a JSON line that was cut before its end."""

_TEXT_FIELD = re.compile(r'"(?:text|result|content)"\s*:\s*"((?:[^"\\]|\\.)*)')
"""The first text-like string in a JSON line, even when the line was cut before its end."""


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


def summarize(data: bytes, max_chars: int) -> str:
    """A person's view of one output line, cut to `max_chars`: JSON events summarised."""
    stripped_bytes = data.strip()
    if not stripped_bytes.startswith(b"{"):
        return display_line(data, max_chars)
    return display_line(_json_summary(stripped_bytes[:SUMMARY_SCAN_BYTES]).encode(), max_chars)


def _json_summary(raw: bytes) -> str:
    """One line for a JSON output line (Claude-style stream JSON and similar)."""
    stripped = raw.decode("utf-8", errors="replace")
    try:
        event = json.loads(stripped)
    except ValueError:
        event = None
    if isinstance(event, dict):
        return _summary(event) or stripped
    found = _TEXT_FIELD.search(stripped)  # a line cut before its end is not valid JSON
    if found:
        arrow = "→ " if '"tool_result"' in stripped[: found.start()] else ""
        try:
            return arrow + _first_line(json.loads(f'"{found.group(1)}"'))
        except ValueError:
            return arrow + found.group(1)
    kind = _TYPE_FIELD.search(stripped)
    return f"(a cut-off {kind.group(1)} line)" if kind else "(a cut-off JSON line)"
