"""Each pinned agent CLI's full-screen interface starts offline against its scripted model
server, with every first-run dialog answered ahead (tests/realagents.py `interactive_env`):
a prompt typed into it gets the scripted answer on the screen, and the agent's own signal that
it waits for a person is there (docs/agents-interactive.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from model_servers import AnthropicServer, GeminiServer, OpenAIResponsesServer, text, tool
from realagents import AGENT_WAIT_S, interactive_env, repo_with_identity
from tmuxscreen import Screen

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(4 * AGENT_WAIT_S)]

READY = {
    "claude": "? for shortcuts",
    "codex": "Ask Codex to do anything",
    "gemini": "Type your message",
}
"""What each interface shows once it takes a prompt."""


def signals(path: Path) -> list[dict[str, Any]]:
    """The JSON objects the agent's hooks (or Codex's notify) appended so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def signalled(path: Path, what: str, **fields: str) -> dict[str, Any]:
    """Wait for a signal whose fields match `fields`."""
    return wait_until(  # type: ignore[no-any-return]
        lambda: next(
            (s for s in signals(path) if all(s.get(k) == v for k, v in fields.items())), None
        ),
        AGENT_WAIT_S,
        what,
    )


def started(
    cli: str, binary: str, tmp_path: Path, url: str, flags: list[str] | None = None
) -> tuple[Screen, Path]:
    """The interface of `cli` (with `flags`) on a fresh repo, ready for a prompt; and its
    signals file."""
    repo = repo_with_identity(tmp_path / "repo")
    log = tmp_path / "signals.jsonl"
    argv, env = interactive_env(cli, tmp_path / "home", repo, url, binary, log)
    screen = Screen([*argv, *(flags or [])], env, repo)
    try:
        screen.shows(READY[cli], AGENT_WAIT_S)
    except BaseException:
        print(screen.text())
        screen.close()
        raise
    return screen, log


def test_claude_interface_answers_and_says_when_it_waits(claude: str, tmp_path: Path) -> None:
    script = [text("PONG-FROM-SCRIPT"), tool("Bash", command="echo hi > x.txt"), text("WROTE-X")]
    with AnthropicServer(script) as server:
        screen, log = started("claude", claude, tmp_path, server.url)
        try:
            screen.ask("say pong", "PONG-FROM-SCRIPT", AGENT_WAIT_S)
            stop = signalled(log, "the Stop hook", hook_event_name="Stop")
            assert stop["last_assistant_message"] == "PONG-FROM-SCRIPT"
            screen.ask("write x", "Do you want to proceed?", AGENT_WAIT_S)
            asked = signalled(
                log, "the PermissionRequest hook", hook_event_name="PermissionRequest"
            )
            assert asked["tool_name"] == "Bash"
            signalled(log, "the permission notification", notification_type="permission_prompt")
        finally:
            screen.close()


def test_codex_interface_answers_and_says_when_it_waits(codex: str, tmp_path: Path) -> None:
    escalated = {"sandbox_permissions": "require_escalated", "justification": "write x"}
    script = [text("PONG-FROM-CODEX"), tool("exec_command", cmd="echo hi > x.txt", **escalated)]
    with OpenAIResponsesServer([*script, text("WROTE-X")]) as server:
        # Asked for approval of anything outside a read-only sandbox: the prompt comes.
        flags = ["--ask-for-approval", "on-request", "--sandbox", "read-only"]
        screen, log = started("codex", codex, tmp_path, server.url, flags)
        try:
            screen.ask("say pong", "PONG-FROM-CODEX", AGENT_WAIT_S)
            stop = signalled(log, "the Stop hook", hook_event_name="Stop")
            assert stop["last_assistant_message"] == "PONG-FROM-CODEX"
            screen.ask("write x", "Would you like to run the following command?", AGENT_WAIT_S)
            asked = signalled(
                log, "the PermissionRequest hook", hook_event_name="PermissionRequest"
            )
            assert asked["tool_input"]["command"] == "echo hi > x.txt"
        finally:
            screen.close()


def test_gemini_interface_answers_and_says_when_it_waits(gemini: str, tmp_path: Path) -> None:
    script = [
        text("PONG-FROM-GEMINI"),
        tool("run_shell_command", command="echo hi > x.txt", description="write x"),
        text("WROTE-X"),
    ]
    with GeminiServer(script) as server:
        screen, log = started("gemini", gemini, tmp_path, server.url)
        try:
            screen.ask("say pong", "PONG-FROM-GEMINI", AGENT_WAIT_S)
            done = signalled(log, "the AfterAgent hook", hook_event_name="AfterAgent")
            assert done["prompt_response"] == "PONG-FROM-GEMINI"
            screen.ask("write x", "Allow execution", AGENT_WAIT_S)
            asked = signalled(log, "the Notification hook", notification_type="ToolPermission")
            assert asked["details"]["command"] == "echo hi > x.txt"
        finally:
            screen.close()
