"""`waiting-input` from the real Codex and Gemini CLI's own hooks, in an interactive session
under their scripted model servers: herd gives each run a home of its own under `.herd/`
(supervisor/session/agenthomes.py) holding its hooks; a finished answer waits for a person,
`herd send` makes the agent work again, answer, and wait again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import Herd, wait_until
from model_servers import SPAWNED, GeminiServer, OpenAIResponsesServer, namespaced, text, tool
from realagents import AGENT_WAIT_S, MAIN, interactive_session, repo_with_identity

from agentherd.tui.screenmodel import screen_of

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(6 * AGENT_WAIT_S)]


def screen_log(herd: Herd) -> str:
    """What the run's terminal showed so far, and its screen now, without escapes or spaces."""
    path = herd.root / ".herd" / "runs" / MAIN / "1" / "output.log"
    data = path.read_bytes() if path.exists() else b""
    now = "".join(screen_of(data, 24, 80).display)
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


CODEX_WORKS = ("TerminalState working", "UserPromptSubmit")
"""What says a prompt made Codex work: its terminal's report or its hook, whichever reaches the
signals file first (the report usually: it needs no process started)."""


def answer_twice(
    herd: Herd, ready: str, words: tuple[str, str], waits: str, works: tuple[str, ...]
) -> None:
    """The interface comes up; each sent prompt is worked on, answered, and then waited at."""
    assert herd.cli("start", MAIN).returncode == 0
    try:
        wait_until(lambda: ready in screen_log(herd), AGENT_WAIT_S, "the interface's prompt")
    except AssertionError:
        print(screen_log(herd)[-4000:], herd.events(MAIN))
        raise
    reply = send(herd, "say pong")
    assert reply["outcome"] == "typed"
    assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
    wait_until(lambda: words[0] in screen_log(herd), AGENT_WAIT_S, "the first answer")
    assert signals_of(herd, "waiting-input") == [waits]
    assert herd.status(MAIN)["task_state"] == "input_required"
    reply = send(herd, "again")
    assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
    wait_until(lambda: words[1] in screen_log(herd), AGENT_WAIT_S, "the second answer")
    assert signals_of(herd, "waiting-input") == [waits, waits]
    assert signals_of(herd, "working")[:1][0] in works


ON_REQUEST = ("--ask-for-approval", "on-request", "--sandbox", "read-only")
"""Codex asks before a command outside its read-only sandbox."""


def start_codex(
    herd: Herd, codex: str, repo: Path, url: str, tmp_path: Path, *flags: str, config: str = ""
) -> dict[str, str]:
    """The daemon, with Codex's interface on `repo` as an interactive session, started; the
    user's config (copied into the run's own CODEX_HOME) trusts the folder, plus `config`."""
    toml, env = interactive_session(
        "codex", codex, repo, url, tmp_path / "home", *flags, config=config
    )
    herd.write(toml)
    herd.start()
    return env


def test_codex_waits_for_input_after_each_answer(codex: str, herd: Herd, tmp_path: Path) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    with OpenAIResponsesServer([text("PONG-ONE"), text("PONG-TWO")]) as server:
        env = start_codex(herd, codex, repo, server.url, tmp_path)
        answer_twice(
            herd,
            "AskCodextodoanything",
            ("PONG-ONE", "PONG-TWO"),
            "Stop",
            CODEX_WORKS,
        )
        home = herd.root / ".herd" / "runs" / MAIN / "1" / "agent" / "codex-home"
        assert (home / "hooks.json").exists()
        # Its conversation is in the user's home, where the spend readers look.
        assert list((Path(env["CODEX_HOME"]) / "sessions").rglob("rollout-*.jsonl"))


def start_gemini(herd: Herd, gemini: str, repo: Path, url: str, tmp_path: Path) -> dict[str, str]:
    """The daemon, with Gemini CLI's interface as an interactive session (not yet started),
    the folder trusted and `CI` unset (else it asks to trust the folder, or runs
    non-interactive); returns the session's environment."""
    toml, env = interactive_session("gemini", gemini, repo, url, tmp_path / "home")
    herd.write(toml)
    herd.start()
    return env


def test_gemini_waits_for_input_after_each_answer(gemini: str, herd: Herd, tmp_path: Path) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    with GeminiServer([text("PONG-ONE"), text("PONG-TWO")]) as server:
        env = start_gemini(herd, gemini, repo, server.url, tmp_path)
        answer_twice(
            herd, "Typeyourmessage", ("PONG-ONE", "PONG-TWO"), "AfterAgent", ("BeforeAgent",)
        )
        assert list((Path(env["HOME"]) / ".gemini" / "tmp").rglob("*.json*"))


def interface_ready(herd: Herd, ready: str) -> None:
    """The session started, its interface showing `ready` (its prompt)."""
    assert herd.cli("start", MAIN).returncode == 0
    wait_until(lambda: ready in screen_log(herd), AGENT_WAIT_S, "the interface's prompt")


def asks_then_answers(herd: Herd, asked: str, answer: str, repo: Path) -> None:
    """A prompt whose tool needs a person's yes: it waits at the dialog; the yes makes it
    work again, run the tool, answer, and wait at its prompt."""
    reply = send(herd, "write x")
    assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
    wait_until(lambda: asked in screen_log(herd), AGENT_WAIT_S, "the permission dialog")
    assert not (repo / "x.txt").exists()
    reply = send(herd, answer)
    assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
    wait_until(lambda: "WROTE-X" in screen_log(herd), AGENT_WAIT_S, "the last answer")
    assert (repo / "x.txt").read_text() == "hi\n"


COLOURS = [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]
"""The choices of the scripted question; the person picks the first."""


def asks_and_is_answered(herd: Herd, signal: str) -> None:
    """A prompt whose answer is the model's question: it waits for a person, said as a
    question (by `signal`); the first choice makes it answer and wait at its prompt."""
    reply = send(herd, "ask me")
    assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
    wait_until(lambda: "Whichcolour?" in screen_log(herd), AGENT_WAIT_S, "the question")
    [asked] = herd.events(MAIN, "waiting-input")
    assert asked["data"]["signal"] == signal
    assert asked["message"].startswith("a question waits for an answer")
    assert herd.status(MAIN)["task_state"] == "input_required"
    reply = send(herd, "1")
    assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
    wait_until(lambda: "GOT-THE-ANSWER" in screen_log(herd), AGENT_WAIT_S, "the answer")


def test_codex_waits_at_its_question_and_at_a_permission_prompt(
    codex: str, herd: Herd, tmp_path: Path
) -> None:
    """No hook of Codex fires at its question (`request_user_input`): its terminal's own state
    report (OSC 7501 `state=blocked:...:kind=question`), which the run's terminal holder writes
    to the signals file, says it waits; the answer makes it work again. Then a command that
    needs a person's yes. One interface for both (each start costs seconds of CPU)."""
    repo = repo_with_identity(tmp_path / "repo")
    question = {"id": "colour", "header": "Colour", "question": "Which colour?", "options": COLOURS}
    escalated = {"sandbox_permissions": "require_escalated", "justification": "write x"}
    script = [
        tool("request_user_input", questions=[question]),
        text("GOT-THE-ANSWER"),
        tool("exec_command", cmd="echo hi > x.txt", **escalated),
        text("WROTE-X"),
    ]
    with OpenAIResponsesServer(script) as server:
        # The question tool outside plan mode is one of Codex's features, off by default.
        features = "[features]\ndefault_mode_request_user_input = true\n"
        start_codex(herd, codex, repo, server.url, tmp_path, *ON_REQUEST, config=features)
        interface_ready(herd, "AskCodextodoanything")
        asks_and_is_answered(herd, "TerminalState blocked")
        answered = json.dumps(server.requests[-1]["input"][-1])
        assert "function_call_output" in answered and "Red" in answered, answered
        assert signals_of(herd, "working")[:1] == ["TerminalState working"]
        assert signals_of(herd, "waiting-input") == ["TerminalState blocked", "Stop"]

        asks_then_answers(herd, "Wouldyouliketorunthefollowingcommand?", "y", repo)
        # Its terminal's report or its hook: whichever reaches the signals file first.
        waits = signals_of(herd, "waiting-input")
        assert waits[2] in ("PermissionRequest", "TerminalState blocked") and waits[3:] == ["Stop"]


def test_gemini_waits_at_its_question_and_at_a_permission_prompt(
    gemini: str, herd: Herd, tmp_path: Path
) -> None:
    """Gemini CLI's question (`ask_user`) asks for confirmation like a tool: its `Notification`
    hook says so (`details.type` names the tool), and the answer reaches the model. Then a
    command that needs a person's yes, in the same interface."""
    repo = repo_with_identity(tmp_path / "repo")
    question = {"header": "Colour", "question": "Which colour?", "type": "choice"}
    asks = tool("ask_user", questions=[{**question, "options": COLOURS}])
    shell = tool("run_shell_command", command="echo hi > x.txt", description="write x")
    with GeminiServer([asks, text("GOT-THE-ANSWER"), shell, text("WROTE-X")]) as server:
        start_gemini(herd, gemini, repo, server.url, tmp_path)
        interface_ready(herd, "Typeyourmessage")
        asks_and_is_answered(herd, "Notification ToolPermission")
        assert "Red" in json.dumps(server.requests[-1]["contents"][-1])
        asks_then_answers(herd, "Allowexecution", "1", repo)
        asked = "Notification ToolPermission"
        assert signals_of(herd, "waiting-input") == [asked, "AfterAgent", asked, "AfterAgent"]
        assert signals_of(herd, "working") == ["AfterTool", "BeforeAgent", "AfterTool"]


MULTI_AGENT = "multi_agent_v1"
"""The tool namespace of Codex's subagent tools (`spawn_agent`, `wait_agent`, ...): its
`multi_agent` feature, on by default in codex-cli 0.171.0."""


def signal_lines(herd: Herd) -> list[dict[str, Any]]:
    """What the run's hooks (and its terminal holder) wrote to its signals file: one JSON
    object a line, or two on one line when two hooks appended at once (each writes its JSON,
    then its newline; a subagent's hook and its main thread's do run at once)."""
    path = herd.root / ".herd" / "runs" / MAIN / "1" / "agent" / "signals"
    found, text, at = [], path.read_text(), 0
    while text[at:].strip():
        value, at = DECODER.raw_decode(text, len(text) - len(text[at:].lstrip()))
        found.append(value)
    return found


DECODER = json.JSONDecoder()


def test_codex_waits_for_input_at_its_subagents_permission_prompt(
    codex: str, herd: Herd, tmp_path: Path
) -> None:
    """The model spawns a subagent and waits for it; the subagent asks to run a command. Its
    approval prompt shows in the main view, named for the subagent's thread, and Codex's
    `PermissionRequest` hook fires with the subagent's `agent_id` and `agent_type`: herd waits
    for a person; the yes makes the subagent run it and end, the main thread answers, and herd
    waits at its prompt. (A subagent cannot ask a question: Codex answers its
    `request_user_input` with "can only be used by the root thread".)"""
    repo = repo_with_identity(tmp_path / "repo")
    escalated = {"sandbox_permissions": "require_escalated", "justification": "write s"}
    script = [
        namespaced(MULTI_AGENT, "spawn_agent", message="write s"),
        namespaced(MULTI_AGENT, "wait_agent", targets=[SPAWNED], timeout_ms=3_600_000),
        text("MAIN-DONE"),
    ]
    subagent = [tool("exec_command", cmd="echo sub > s.txt", **escalated), text("SUB-DONE")]
    with OpenAIResponsesServer(script, subagent_steps=subagent) as server:
        start_codex(herd, codex, repo, server.url, tmp_path, *ON_REQUEST)
        interface_ready(herd, "AskCodextodoanything")
        reply = send(herd, "delegate")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "Thread:Agent(" in screen_log(herd), AGENT_WAIT_S, "the prompt")
        assert "Wouldyouliketorunthefollowingcommand?" in screen_log(herd)
        assert herd.status(MAIN)["task_state"] == "input_required"
        assert not (repo / "s.txt").exists()
        # Its hook or its terminal's report, whichever reaches the signals file first.
        [asked] = herd.events(MAIN, "waiting-input")
        assert asked["data"]["signal"] in ("PermissionRequest", "TerminalState blocked")
        assert asked["message"].startswith("a permission prompt")
        # The hook says whose prompt it is: the subagent's, by the id spawn_agent returned.
        [spawned] = {
            json.loads(item["output"])["agent_id"]
            for request in server.requests
            for item in request["input"]
            if item.get("type") == "function_call_output" and "agent_id" in item["output"]
        }
        [request] = [s for s in signal_lines(herd) if s["hook_event_name"] == "PermissionRequest"]
        assert request["agent_id"] == spawned and request["agent_type"] == "default"
        assert request["tool_input"] == {"command": "echo sub > s.txt", "description": "write s"}

        # The person says yes: the subagent's command runs, the subagent ends, the main
        # thread's wait returns, it answers and waits at its prompt.
        reply = send(herd, "y")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "MAIN-DONE" in screen_log(herd), AGENT_WAIT_S, "the main answer")
        assert (repo / "s.txt").read_text() == "sub\n"
        # One wait at the prompt, one move on at the yes: the main thread's hook that runs as
        # its subagent starts (its PreToolUse of wait_agent) ended nothing, whenever written.
        assert signals_of(herd, "waiting-input")[1:] == ["Stop"]
        [works] = signals_of(herd, "working")
        assert works in ("TerminalState working", "PostToolUse")
        assert server.subagent_steps == [] and server.steps == []
        assert set(server.subagent_headers) == {"collab_spawn"}
        # The subagent's turn fired no Stop of its own (that would have said "waits" while
        # the main thread still waited for it): the one Stop is the main thread's.
        stops = [s for s in signal_lines(herd) if s["hook_event_name"] == "Stop"]
        assert [s.get("agent_id") for s in stops] == [None]


def test_gemini_waits_for_input_at_its_subagents_question_and_permission_prompt(
    gemini: str, herd: Herd, tmp_path: Path
) -> None:
    """The model invokes Gemini CLI's built-in `generalist` subagent (`invoke_agent`), which
    asks the person a question (`ask_user`), then again to run a command: a subagent's tool
    call goes through the same confirmation as the main thread's, and the `Notification` hook
    fires (`ToolPermission`; it does not say whose): herd waits for a person each time; the
    answer makes the subagent go on and end (`complete_task`), the main thread answers, and
    herd waits at its prompt. One interface for both (each start costs seconds of CPU)."""
    repo = repo_with_identity(tmp_path / "repo")
    question = {"header": "Colour", "question": "Which colour?", "type": "choice"}
    script = [
        tool("invoke_agent", agent_name="generalist", prompt="ask me"),
        text("GOT-THE-ANSWER"),
        tool("invoke_agent", agent_name="generalist", prompt="write s"),
        text("MAIN-DONE"),
    ]
    subagent = [
        tool("ask_user", questions=[{**question, "options": COLOURS}]),
        tool("complete_task", result={"response": "SUB-ASKED"}),
        tool("run_shell_command", command="echo sub > s.txt", description="write s"),
        tool("complete_task", result={"response": "SUB-DONE"}),
    ]
    with GeminiServer(script, subagent_steps=subagent) as server:
        start_gemini(herd, gemini, repo, server.url, tmp_path)
        interface_ready(herd, "Typeyourmessage")
        asks_and_is_answered(herd, "Notification ToolPermission")
        # The answer reached the subagent (its next request), not the main thread.
        [answered] = [r for r in server.requests if "ask_user" in json.dumps(r["contents"][-1])]
        assert "Red" in json.dumps(answered["contents"][-1])
        assert "complete_task" in json.dumps(answered["tools"])

        reply = send(herd, "delegate")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "Allowexecutionof[Shell]?" in screen_log(herd), AGENT_WAIT_S, "ask")
        assert "generalist·Shellechosub>s.txt" in screen_log(herd)
        assert herd.status(MAIN)["task_state"] == "input_required"
        assert herd.events(MAIN, "waiting-input")[-1]["message"].startswith(
            "a permission prompt waits for an answer"
        )
        assert not (repo / "s.txt").exists()

        reply = send(herd, "1")
        assert reply["run_outcome"] == "turn-ended" and reply["state"] == "waiting-input"
        wait_until(lambda: "MAIN-DONE" in screen_log(herd), AGENT_WAIT_S, "the main answer")
        assert (repo / "s.txt").read_text() == "sub\n"
        asked = "Notification ToolPermission"
        assert signals_of(herd, "waiting-input") == [asked, "AfterAgent", asked, "AfterAgent"]
        assert signals_of(herd, "working") == ["AfterTool", "BeforeAgent", "AfterTool"]
        assert server.subagent_steps == [] and server.steps == []
        assert [s.kind for s in server.ledger].count("subagent") == 4
