"""What an agent's own hooks say about a person: it waits for one, or it works again.

Each hook herd gives an interactive agent appends the JSON object the agent handed it on stdin
as one line of the run's signals file (supervisor/session/inputwait.py writes the hooks). The
event names are the agents' own: Claude Code's and Codex's (`Stop`, `PermissionRequest`,
`UserPromptSubmit`, ...) and Gemini CLI's (`AfterAgent`, `Notification`, `BeforeAgent`, ...).
Any custom command may append the same lines to `$HERD_SIGNALS`.

Each hook writes its JSON and then its newline, two writes: two hooks that run at once (a
subagent's beside its main thread's) may leave two objects on one line, both read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

WAITS = "waits"
WORKS = "works"

TERMINAL = "terminal"
"""The `agent` of a signal from the agent's terminal (its own state report): the whole
interface's, not one thread's."""

TURN_ENDS = frozenset({"Stop", "AfterAgent", "Notification idle_prompt"})
"""Signals that say the main thread's turn ended and its prompt waits (its dialogs ended with
it)."""

PROMPTS = frozenset({"UserPromptSubmit", "BeforeAgent"})
"""Events that say the main thread was given a prompt."""

_DECODER = json.JSONDecoder()

_WAITS = {
    "Stop": "its answer is finished and its prompt waits",
    "AfterAgent": "its answer is finished and its prompt waits",
}
"""Events that mean the agent now waits for a person, and what to say."""

_QUESTION_TOOLS = {"AskUserQuestion", "ask_user"}
"""Tools whose permission prompt is the agent's question to a person (Claude Code's, Gemini
CLI's)."""

_WAITING_NOTIFICATIONS = {
    "permission_prompt": "a permission prompt waits for an answer",
    "idle_prompt": "its prompt waits",
    "elicitation_dialog": "a question waits for an answer",
    "ToolPermission": "a permission prompt waits for an answer",
}
"""`Notification` types that mean the agent waits (Claude Code's, Gemini CLI's)."""

_WORKS = {
    "UserPromptSubmit": "it was given a prompt",
    "BeforeAgent": "it was given a prompt",
    "PreToolUse": "it runs a tool",
    "PostToolUse": "a tool ran",
    "BeforeTool": "it runs a tool",
    "AfterTool": "a tool ran",
}
"""Events that mean the agent works (again)."""


@dataclass(frozen=True)
class Signal:
    """One line of the signals file, read: the agent waits or works, and why."""

    verdict: str
    """WAITS or WORKS."""
    event: str
    """The agent's own name of the hook event."""
    why: str
    agent: str | None = None
    """Whose it is: a subagent's `agent_id` (Claude Code and Codex name it in a subagent's
    hooks), TERMINAL for the terminal's report, None for the main thread (or not said)."""
    session_id: str | None = None
    """The main thread's conversation id, as every hook of the three CLIs names it (what a
    resume and the readers of the agent's own files need); None when not said."""


def read_signal(line: str) -> Signal | None:
    """The signal one line gives, or None (not JSON, or an event that says neither)."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return _signal_of(data)


def _signal_of(data: object) -> Signal | None:
    """The signal one hook's JSON gives, or None."""
    if not isinstance(data, dict):
        return None
    event = data.get("hook_event_name")
    if not isinstance(event, str):
        return None
    if event == "TerminalState":
        return _terminal_state(data)
    found = _hook_signal(event, data)
    if found is None:
        return None
    agent = data.get("agent_id")
    if isinstance(agent, str) and agent:
        return replace(found, agent=agent)
    session = data.get("session_id")
    return replace(found, session_id=session) if isinstance(session, str) and session else found


def _hook_signal(event: str, data: dict[str, object]) -> Signal | None:
    """The signal of one hook's `event` (its JSON `data`), said as the main thread's."""
    if event == "PermissionRequest":
        asks = "a question" if data.get("tool_name") in _QUESTION_TOOLS else "a permission prompt"
        subagent = data.get("agent_type")  # set when a subagent asks (Claude Code, Codex)
        of = f" of its {subagent} subagent" if isinstance(subagent, str) and subagent else ""
        return Signal(WAITS, event, f"{asks}{of} waits for an answer")
    if event in _WAITS:
        return Signal(WAITS, event, _WAITS[event])
    if event in _WORKS:
        return Signal(WORKS, event, _WORKS[event])
    if event == "Notification":
        kind = data.get("notification_type")
        if isinstance(kind, str) and kind in _WAITING_NOTIFICATIONS:
            details = data.get("details")
            tool = details.get("type") if isinstance(details, dict) else None
            why = _WAITING_NOTIFICATIONS[kind]
            if kind == "ToolPermission" and tool in _QUESTION_TOOLS:  # Gemini CLI's question
                why = "a question waits for an answer"
            return Signal(WAITS, f"Notification {kind}", why)
    return None


def _terminal_state(data: dict[str, object]) -> Signal | None:
    """What the agent's terminal said of its state (the holder's line of a Codex report)."""
    state, kind = data.get("state"), data.get("kind")
    if state == "working":
        return Signal(WORKS, "TerminalState working", "its terminal says it works", TERMINAL)
    if state != "blocked":
        return None  # idle and done: its Stop hook says so, with the answer's end
    if kind == "question":
        why = "a question waits for an answer"
    elif isinstance(kind, str) and ("approv" in kind or "permission" in kind):
        why = "a permission prompt waits for an answer"
    else:
        why = "its terminal says it waits for a person"
    return Signal(WAITS, "TerminalState blocked", why, TERMINAL)


def read_signals(text: str) -> list[Signal]:
    """The signals among the whole lines of `text`, oldest first (several on a line, when
    hooks appended at once)."""
    found = []
    for line in text.splitlines():
        for data in _json_values(line):
            signal = _signal_of(data)
            if signal is not None:
                found.append(signal)
    return found


def _json_values(line: str) -> list[object]:
    """The JSON values one after another on `line`, up to the first that is no JSON."""
    values: list[object] = []
    at, line = 0, line.strip()
    while at < len(line):
        try:
            value, at = _DECODER.raw_decode(line, at)
        except ValueError:
            break
        values.append(value)
        while at < len(line) and line[at].isspace():
            at += 1
    return values
