"""Readable words for the JSON events of Codex, Gemini CLI and OpenCode, as for Claude Code's.

Without them a person saw `{"type":"turn.completed","usage":...}` as a Codex run's last
output. A turn or step starting or ending reads as such in `herd logs`, but is passed over for
a run's last line (`is_quiet`), so that line is what the agent last did or said.
"""

from __future__ import annotations

from typing import Any

_MARKER_WORDS = {
    "turn.started": "turn started",
    "turn.completed": "turn completed",
    "step_start": "step started",
    "step_finish": "step finished",
}
QUIET_KINDS = frozenset(_MARKER_WORDS)
"""Events that only mark a turn or step (Codex, OpenCode): never a run's last line."""

_TARGET_KEYS = ("file_path", "filePath", "command", "cmd", "path", "pattern")
"""Which argument names what a tool call works on, in the order looked for."""


def first_line(text: object) -> str:
    """The first non-blank line of a string, stripped ("" for anything else)."""
    if not isinstance(text, str) or not text.strip():
        return ""
    return text.strip().splitlines()[0]


def _error_text(error: object) -> str:
    """An error's message, from a string, `{message}` or OpenCode's `{name, data: {message}}`."""
    if isinstance(error, dict):
        data = error.get("data")
        nested = data.get("message") if isinstance(data, dict) else None
        return first_line(error.get("message") or nested or error.get("name"))
    return first_line(error)


def _call(name: object, arguments: object) -> str:
    """`write_file src/a.py` for a tool and its arguments."""
    given = arguments if isinstance(arguments, dict) else {}
    target = next((given[key] for key in _TARGET_KEYS if key in given), "")
    return f"{name if isinstance(name, str) else 'tool'} {first_line(str(target))}".strip()


def _codex_item(kind: str, item: dict[str, Any]) -> str:
    """A Codex item: a command (with its exit code once done), a message, an error."""
    item_type = item.get("type")
    if item_type == "command_execution":
        code = item.get("exit_code")
        done = kind == "item.completed" and isinstance(code, int)
        return f"$ {first_line(item.get('command'))}" + (f" → exit {code}" if done else "")
    if item_type in ("agent_message", "reasoning"):
        return first_line(item.get("text"))
    if item_type == "error":
        return f"error: {first_line(item.get('message'))}"
    if item_type == "file_change":
        changes = item.get("changes")
        listed = changes if isinstance(changes, list) else []
        paths = [str(c.get("path")) for c in listed if isinstance(c, dict)]
        return f"edit {', '.join(paths)}".strip()
    return str(item_type) if isinstance(item_type, str) and kind == "item.completed" else ""


def _tool_use(event: dict[str, Any]) -> str:
    """A tool call: Gemini CLI's (`tool_name`, `parameters`), OpenCode's (`part`)."""
    if "tool_name" in event:
        return _call(event.get("tool_name"), event.get("parameters"))
    part = event.get("part")
    if not isinstance(part, dict):
        return ""
    state = part.get("state")
    return _call(part.get("tool"), state.get("input") if isinstance(state, dict) else None)


def _marker(kind: str, event: dict[str, Any]) -> str:
    """A turn or step marker in words: `turn completed (400 input, 120 output tokens)`."""
    words = _MARKER_WORDS[kind]
    usage = event.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("input_tokens"), int):
        return (
            f"{words} ({usage['input_tokens']} input, {usage.get('output_tokens')} output tokens)"
        )
    part = event.get("part")
    reason = part.get("reason") if isinstance(part, dict) else None
    return f"{words} ({reason})" if isinstance(reason, str) else words


def is_quiet(value: object) -> bool:
    """True for an event that only marks a turn or step: not the last line a person needs."""
    return isinstance(value, dict) and value.get("type") in QUIET_KINDS


def other_summary(kind: str, event: dict[str, Any]) -> str | None:
    """Words for a Codex, Gemini CLI or OpenCode event ("" shows nothing); None: not theirs."""
    if kind in QUIET_KINDS:
        return _marker(kind, event)
    if kind in ("item.started", "item.completed"):
        item = event.get("item")
        return _codex_item(kind, item) if isinstance(item, dict) else ""
    if kind == "thread.started":
        return "thread started"
    if kind in ("turn.failed", "error"):
        return f"error: {_error_text(event.get('error') or event.get('message'))}"
    if kind == "init":  # Gemini CLI
        model = f" (model {event['model']})" if isinstance(event.get("model"), str) else ""
        return f"init: agent session started{model}"
    if kind == "message" and "role" in event:  # Gemini CLI: its answer, or the prompt echoed
        said = first_line(event.get("content"))
        return said if event.get("role") == "assistant" else f"> {said}"
    if kind == "tool_use":
        return _tool_use(event)
    if kind == "tool_result" and "tool_id" in event:  # Gemini CLI
        said = first_line(event.get("output")) or _error_text(event.get("error"))
        return f"→ {said or event.get('status', '')}".rstrip()
    if kind == "text" and isinstance(event.get("part"), dict):  # OpenCode
        return first_line(event["part"].get("text"))
    return None
