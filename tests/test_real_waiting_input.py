"""`waiting-input` from the real Claude Code's own hooks, in an interactive session under its
scripted model server: a finished answer waits for a person; `herd send` makes it work again,
answer, and wait again; a permission prompt waits for a person, and its answer makes the
agent work again. Bounds are generous: each move
is taken within AGENT_WAIT_S of what causes it (milliseconds once the hook ran)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import Herd, wait_until
from model_servers import AnthropicServer, text, tool
from realagents import AGENT_WAIT_S, MAIN, interactive_session, repo_with_identity

from agentherd.tui.screenmodel import screen_of

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(6 * AGENT_WAIT_S)]

READY = "?forshortcuts"
"""What Claude Code's interface shows once it takes a prompt."""


def screen_log(herd: Herd) -> str:
    """The text the run's terminal showed so far (escape sequences and spacing taken out), and
    its screen now as a terminal draws it (a word redrawn in pieces reads whole there)."""
    path = herd.root / ".herd" / "runs" / MAIN / "1" / "output.log"
    data = path.read_bytes() if path.exists() else b""
    now = "".join(screen_of(data, 24, 80).display)  # the holder's size while none attaches
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\s", "", data.decode(errors="replace") + now)


def signals_of(herd: Herd, kind: str) -> list[str]:
    return [e["data"]["signal"] for e in herd.events(MAIN, kind)]


def send(herd: Herd, words: str) -> dict[str, object]:
    done = herd.cli(
        "send", MAIN, words, "--wait", "--timeout", str(AGENT_WAIT_S), "--json",
        timeout_s=2 * AGENT_WAIT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def start_interface(herd: Herd, claude: str, repo: Path, url: str, tmp_path: Path) -> None:
    """Claude Code's interface in an interactive session, started and showing its prompt (the
    recipe of docs/agents-interactive.md; herd passes its own hooks by --settings)."""
    herd.write(interactive_session("claude", claude, repo, url, tmp_path / "home")[0])
    herd.start()
    assert herd.cli("start", MAIN).returncode == 0
    try:
        wait_until(lambda: READY in screen_log(herd), AGENT_WAIT_S, "the interface's prompt")
    except AssertionError:
        print(screen_log(herd)[-4000:], herd.events(MAIN))
        raise


def test_claude_code_waits_for_input_after_an_answer_and_at_a_permission_prompt(
    claude: str, herd: Herd, tmp_path: Path
) -> None:
    script = [text("PONG-FROM-SCRIPT"), tool("Bash", command="echo hi > x.txt"), text("WROTE-X")]
    repo = repo_with_identity(tmp_path / "repo")
    with AnthropicServer(script) as server:
        start_interface(herd, claude, repo, server.url, tmp_path)
        assert herd.status(MAIN)["state"] == "running"  # no turn yet: nothing waits

        began = time.monotonic()
        reply = send(herd, "say pong")
        assert reply["outcome"] == "typed"
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        assert time.monotonic() - began < AGENT_WAIT_S
        # The Stop hook can come before the answer is drawn (fresh-clone CI, once): wait for it.
        wait_until(lambda: "PONG-FROM-SCRIPT" in screen_log(herd), AGENT_WAIT_S, "the answer")
        assert signals_of(herd, "waiting-input") == ["Stop"]
        assert herd.status(MAIN)["task_state"] == "input_required"

        reply = send(herd, "write x")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "Doyouwanttoproceed?" in screen_log(herd), AGENT_WAIT_S, "prompt")
        # The typed prompt made it work again; the permission dialog made it wait.
        assert signals_of(herd, "working")[:1] == ["UserPromptSubmit"]
        assert signals_of(herd, "waiting-input") == ["Stop", "PermissionRequest"]
        assert not (repo / "x.txt").exists()

        # The person says yes (the dialog's first choice): the tool runs, it works again,
        # answers, and waits at its prompt.
        reply = send(herd, "1")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        assert (repo / "x.txt").read_text() == "hi\n"
        wait_until(lambda: "WROTE-X" in screen_log(herd), AGENT_WAIT_S, "the last answer")
        assert signals_of(herd, "waiting-input") == ["Stop", "PermissionRequest", "Stop"]
        assert signals_of(herd, "working")[-1:] == ["PostToolUse"]


QUESTION = {
    "question": "Which colour should the button be?",
    "header": "Colour",
    "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Blue", "description": "cool"},
    ],
    "multiSelect": False,
}


def test_claude_code_waits_for_input_at_its_question_and_its_subagents_permission_prompt(
    claude: str, herd: Herd, tmp_path: Path
) -> None:
    """One interface for both cases (each start of it costs seconds of CPU)."""
    script = [
        tool("AskUserQuestion", questions=[QUESTION]),
        text("GOT-THE-ANSWER"),
        tool("Agent", description="write s", prompt="write s", subagent_type="general-purpose"),
        text("MAIN-DONE"),
    ]
    subagent = [tool("Bash", command="echo sub > s.txt"), text("SUB-DONE")]
    repo = repo_with_identity(tmp_path / "repo")
    with AnthropicServer(script, subagent_steps=subagent) as server:
        start_interface(herd, claude, repo, server.url, tmp_path)
        began = time.monotonic()
        reply = send(herd, "ask me")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        assert time.monotonic() - began < AGENT_WAIT_S
        wait_until(
            lambda: "Whichcolourshouldthebuttonbe?" in screen_log(herd), AGENT_WAIT_S, "question"
        )
        [asked] = herd.events(MAIN, "waiting-input")
        assert asked["data"]["signal"] == "PermissionRequest"
        assert asked["message"].startswith("a question waits for an answer")
        assert herd.status(MAIN)["task_state"] == "input_required"

        # The person picks the first choice: the answer reaches the model, which answers and
        # waits at its prompt.
        reply = send(herd, "1")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "GOT-THE-ANSWER" in screen_log(herd), AGENT_WAIT_S, "the answer")
        answered = json.dumps(server.requests[-1]["messages"][-1])
        assert "tool_result" in answered and "Red" in answered, answered[-2000:]
        assert signals_of(herd, "waiting-input") == ["PermissionRequest", "Stop"]
        assert signals_of(herd, "working")[-1:] == ["PostToolUse"]

        # A subagent asks to run a command: it waits for a person, said as the subagent's.
        reply = send(herd, "delegate")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "fromthegeneral-purposeagent" in screen_log(herd), AGENT_WAIT_S, "ask")
        assert signals_of(herd, "waiting-input") == [
            "PermissionRequest",
            "Stop",
            "PermissionRequest",
        ]
        assert herd.status(MAIN)["task_state"] == "input_required"
        assert not (repo / "s.txt").exists()
        assert herd.events(MAIN, "waiting-input")[-1]["message"].startswith(
            "a permission prompt of its general-purpose subagent waits for an answer"
        )

        # The person says yes: the subagent's tool runs, the subagent ends, the main thread
        # answers and waits at its prompt.
        reply = send(herd, "1")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "MAIN-DONE" in screen_log(herd), AGENT_WAIT_S, "the main answer")
        assert (repo / "s.txt").read_text() == "sub\n"
        assert signals_of(herd, "waiting-input")[-1:] == ["Stop"]
        assert server.subagent_steps == []  # the subagent asked and answered from its script
