"""One line a person can read for each line of agent output: JSON events summarised.

The adapters decode each line once (`load_json`) and summarise it from that value; the
dashboard, which has no adapter, summarises lines itself with `summarize`.
"""

from __future__ import annotations

import json
import re
from json.scanner import make_scanner
from typing import Any, cast

from agentherd.sessions.adapters.eventwords import other_summary
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
        # Gemini CLI's result has a `status` ("success", "error") and no text of its own.
        failed = event.get("is_error") or event.get("status") == "error"
        said = event.get("result") if "result" in event else event.get("status", "")
        return f"{'error' if failed else 'result'}: {_first_line(str(said))}"
    message = event.get("message")
    if isinstance(message, dict):
        return _blocks_text(message.get("content"))
    others = other_summary(kind, event)
    return "" if others is None else others


def _reject_constant(name: str) -> float:
    """Refuse NaN and Infinity, which are not JSON."""
    raise ValueError(f"not JSON: {name}")


_SCAN = make_scanner(cast(Any, json.JSONDecoder(parse_constant=_reject_constant)))
"""One decoder's scanner for every line: `json.loads(s, parse_constant=...)` built a decoder per
call, and its `decode` checks for whitespace a stripped line cannot have at either end."""


def load_json(line: bytes) -> object | None:
    """Parse one line as a JSON object or array; None when it is anything else."""
    stripped = line.strip()
    if not stripped or stripped[:1] not in (b"{", b"["):
        return None
    text = stripped.decode("utf-8", errors="replace")
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    # A value followed by more than JSON whitespace is not one JSON value (json.loads: "Extra
    # data"); the line was stripped of ASCII whitespace, so anything after it is extra.
    return value if end == len(text) else None


def summarize(data: bytes, max_chars: int) -> str:
    """A person's view of one output line, cut to `max_chars`: JSON events summarised."""
    stripped = data.strip()
    if not stripped.startswith(b"{") or len(stripped) > SUMMARY_SCAN_BYTES:
        return summarize_decoded(data, None, max_chars)
    return summarize_decoded(data, load_json(stripped), max_chars)


def summarize_decoded(data: bytes, value: object | None, max_chars: int) -> str:
    """`summarize` for a line an adapter already decoded to `value` (None: not JSON)."""
    stripped = data.strip()
    if not stripped.startswith(b"{"):
        return display_line(data, max_chars)
    # A line longer than the scan limit is summarised from its start, as if it had been cut there.
    whole = len(stripped) <= SUMMARY_SCAN_BYTES
    event = value if whole and isinstance(value, dict) else None
    return display_line(_json_summary(stripped[:SUMMARY_SCAN_BYTES], event).encode(), max_chars)


def _json_summary(raw: bytes, event: dict[str, Any] | None) -> str:
    """One line for a JSON output line (`event`), or for one that did not decode (a cut one)."""
    if event is not None:
        return _summary(event) or raw.decode("utf-8", errors="replace")
    stripped = raw.decode("utf-8", errors="replace")
    found = _TEXT_FIELD.search(stripped)  # a line cut before its end is not valid JSON
    if found:
        arrow = "→ " if '"tool_result"' in stripped[: found.start()] else ""
        try:
            return arrow + _first_line(json.loads(f'"{found.group(1)}"'))
        except ValueError:
            return arrow + found.group(1)
    kind = _TYPE_FIELD.search(stripped)
    return f"(a cut-off {kind.group(1)} line)" if kind else "(a cut-off JSON line)"
