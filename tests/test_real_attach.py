"""`herd attach` to the real Claude Code, Codex and Gemini CLI's interfaces under their scripted
model servers, through a real outer terminal (tmux): attached, typed into, detached, the daemon
killed -9 and re-adopted, attached again to the same screen, typed into again, and `herd send`
typed into it; `waiting-input` after each answer, across the re-adoption; the spend read from
the agent's own files while the interface runs; and an interface killed opens again on its
conversation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import HERD, pid_gone, wait_until
from model_servers import AnthropicServer, GeminiServer, OpenAIResponsesServer, text
from realagents import (
    AGENT_WAIT_S,
    MAIN,
    agent_binary,
    interactive_session,
    repo_with_identity,
    served_as_read,
)
from tmuxscreen import BOTTOM_LINES, Tmux

pytestmark = [pytest.mark.realagents, pytest.mark.pidns, pytest.mark.timeout(8 * AGENT_WAIT_S)]

SERVERS = {"claude": AnthropicServer, "codex": OpenAIResponsesServer, "gemini": GeminiServer}
READY = {
    "claude": "? for shortcuts",
    "codex": "Ask Codex to do anything",
    "gemini": "Type your message",
}
"""What each interface shows once it takes a prompt."""
CACHED_IN_INPUT = {"claude": False, "codex": True, "gemini": True}


def spent(root: Path) -> tuple[int, int, int, int]:
    """(input, output, cache read, cache write) of the session's current task, as status says."""
    usage = status(root)["usage"]
    return tuple(usage[f"{k}_tokens"] for k in ("input", "output", "cache_read", "cache_write"))  # type: ignore[return-value]


def spends(root: Path, cli: str, server: Any, what: str) -> None:
    """Wait until the session's spend is what the server billed for the script's answers."""
    want = served_as_read(server.bill(scripted_only=True), CACHED_IN_INPUT[cli])
    try:
        wait_until(lambda: spent(root) == want, AGENT_WAIT_S, what, poll_s=0.25)  # a CLI a poll
    except AssertionError as missing:
        raise AssertionError(f"{missing}: {spent(root)} != {want}") from None


def herd(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HERD, *args], cwd=root, capture_output=True, text=True, timeout=2 * AGENT_WAIT_S,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def status(root: Path) -> dict[str, Any]:
    return json.loads(herd(root, "status", MAIN, "--json").stdout)  # type: ignore[no-any-return]


def events(root: Path, kind: str) -> list[dict[str, Any]]:
    listed = herd(root, "events", "--session", MAIN, "--json").stdout.splitlines()
    return [event for line in listed if (event := json.loads(line))["kind"] == kind]


def waiting(root: Path, count: int) -> dict[str, Any]:
    """The session in `waiting-input` with `count` such events: the agent's own signal."""
    try:
        return wait_until(  # type: ignore[no-any-return]
            lambda: (
                (s := status(root))["state"] == "waiting-input"
                and len(events(root, "waiting-input")) >= count
                and s
            ),
            AGENT_WAIT_S,
            f"waiting-input number {count}",
        )
    except AssertionError as missing:
        listed = herd(root, "events", "--session", MAIN).stdout
        raise AssertionError(f"{missing}: {status(root)}\n{listed}") from None


def ask(tmux: Tmux, window: str, words: str, answer: str) -> None:
    """Type `words` into the attached interface, End and Enter once they show, and wait for
    `answer`, with Enter once more if the words still sit in the input box (as tmuxscreen's
    Screen.type_line and Screen.ask do, and why)."""
    tmux.keys(window, words, literal=True)
    tmux.wait_for(window, words, AGENT_WAIT_S)
    tmux.keys(window, "End", "Enter")
    try:
        tmux.wait_for(window, answer, AGENT_WAIT_S / 3)
        return
    except AssertionError:
        bottom = tmux.screen(window).rstrip().splitlines()[-BOTTOM_LINES:]
        if any(words in line for line in bottom):
            tmux.keys(window, "Enter")
    tmux.wait_for(window, answer, AGENT_WAIT_S * 2 / 3)


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_an_attached_interface_outlives_the_daemon_and_opens_again_on_its_conversation(
    cli: str, tmp_path: Path, tmux: Tmux
) -> None:
    binary = agent_binary(cli)
    repo = repo_with_identity(tmp_path / "repo")
    root = tmp_path  # the tmux server's folder: `herd attach` finds herd.toml there
    answers = [text("PONG-ONE"), text("PONG-TWO"), text("PONG-THREE"), text("PONG-FOUR")]
    with SERVERS[cli](answers) as server:
        home = tmp_path / "home"
        toml, _ = interactive_session(cli, binary, repo, server.url, home, restart="on-failure")
        (root / "herd.toml").write_text(toml)
        assert herd(root, "up", "--no-tui").returncode == 0
        try:
            assert herd(root, "start", MAIN).returncode == 0
            agent = psutil.Process(wait_until(lambda: status(root).get("pid"), AGENT_WAIT_S))

            tmux.attach("one", session=MAIN, cols=120, rows=40)
            tmux.wait_for("one", READY[cli], AGENT_WAIT_S)
            ask(tmux, "one", "remember the word heron", "PONG-ONE")
            assert waiting(root, 1)["task_state"] == "input_required"
            assert events(root, "terminal-writer")[0]["data"]["by"] == "a person"
            # Read from the agent's own files while its interface runs (its terminal has none).
            spends(root, cli, server, "the first answer's spend")
            conversation = status(root)["agent_session_id"]
            assert conversation
            tmux.detach("one")
            assert status(root)["state"] == "waiting-input"

            daemon = int((root / ".herd" / "daemon.lock").read_text())
            os.kill(daemon, signal.SIGKILL)
            wait_until(lambda: pid_gone(daemon))
            assert agent.is_running()
            assert herd(root, "up", "--no-tui").returncode == 0
            wait_until(lambda: events(root, "adopted"), AGENT_WAIT_S, "the re-adoption")
            readopted = status(root)
            assert readopted["pid"] == agent.pid
            assert readopted["state"] == "waiting-input", "a re-adopted run still waits"
            spends(root, cli, server, "the first answer's spend, read again by the new daemon")

            # The same screen first, though the interface has no reason to redraw.
            tmux.attach("two", session=MAIN, cols=120, rows=40)
            tmux.wait_for("two", "PONG-ONE", AGENT_WAIT_S)
            ask(tmux, "two", "again", "PONG-TWO")
            waiting(root, 2)
            tmux.detach("two")

            sent = herd(root, "send", MAIN, "once more", "--wait", "--json")
            assert sent.returncode == 0, sent.stderr
            reply = json.loads(sent.stdout)
            assert reply["outcome"] == "typed" and reply["state"] == "waiting-input", reply
            tmux.attach("three", session=MAIN, cols=120, rows=40)
            tmux.wait_for("three", "PONG-THREE", AGENT_WAIT_S)
            spends(root, cli, server, "three answers' spend")

            # The agent killed -9 (its run crashed): herd restarts it with the agent's own
            # resume arguments on its command, on the same conversation.
            agent.kill()
            tmux.wait_for("three", "ATTACH-EXIT=0", AGENT_WAIT_S)  # its run's terminal ended
            wait_until(
                lambda: (s := status(root))["run"] == 2 and s["state"] == "running",
                AGENT_WAIT_S,
                "the second run",
            )
            started = events(root, "run-started")[-1]["data"]
            assert started["mode"] == "resume" and conversation in started["argv"], started
            tmux.attach("four", session=MAIN, cols=120, rows=40)
            # Codex and Gemini CLI show the earlier answers; Claude Code only its turn's end.
            tmux.wait_for("four", READY[cli] if cli == "claude" else "PONG-THREE", AGENT_WAIT_S)
            tmux.detach("four")
            sent = herd(root, "send", MAIN, "which word?", "--wait", "--json")
            assert json.loads(sent.stdout)["state"] == "waiting-input", sent.stdout
            assert "heron" in json.dumps(server.requests[-1]), "the model got the conversation"
            assert status(root)["agent_session_id"] == conversation
            checked = wait_until(lambda: events(root, "resume-checked"), AGENT_WAIT_S)
            assert checked[-1]["run"] == 2
            assert herd(root, "stop", MAIN).returncode == 0
        finally:
            herd(root, "down")
