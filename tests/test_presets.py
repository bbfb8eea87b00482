"""What `herd init --agent NAME` writes asks each agent for the whole job, and after a crash
tells it where its uncommitted work went.

The opencode preset once asked only to "Implement the next failing feature" (no tests, no
commit, no progress notes: a real model need not commit, and then nothing is checkpointed)
and resumed with a bare "Continue." that hid the rescue ref.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from agentherd.sessions import launchspec
from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.config import parse_config
from agentherd.tui.cli.templates import init_text, session_block

RESUMING_PRESETS = ["claude", "codex", "gemini", "opencode"]
"""The presets tried by hand against a scripted model server: edit, test, commit, resume."""


@pytest.mark.parametrize("agent", RESUMING_PRESETS)
def test_a_preset_asks_for_tests_a_commit_and_progress_notes_and_names_the_rescue(
    agent: str,
) -> None:
    (session,) = tomllib.loads(init_text(agent))["session"]
    prompt = " ".join(session["command"])
    for asked in ("run the tests", "commit", session["progress"], session["plan"]):
        assert asked in prompt, (agent, asked)
    resume = " ".join(session["resume"])
    for placeholder in ("{session_id}", "{message}"):  # `herd send` fills {message}
        assert placeholder in resume, (agent, placeholder)
    # Without a sent text, {message} is herd's continue prompt: it names the rescue.
    config = parse_config(init_text(agent), Path("/tmp/herd.toml")).sessions[0]
    rescued = {"HERD_RESCUE_REF": "refs/herd/rescue/1", "HERD_CHECKPOINT": "abc1234"}
    argv, mode = launchspec.run_argv(config, "resume", 2, "sid-1", rescued)
    filled = " ".join(argv)
    assert mode == "resume" and "sid-1" in filled, (agent, argv)
    assert "refs/herd/rescue/1" in filled and "abc1234" in filled, (agent, argv)
    sent, _ = launchspec.run_argv(config, "resume", 2, "sid-1", rescued, "Fix the {plan} typo.")
    assert "Fix the {plan} typo." in sent  # a message's words are never taken for placeholders


@pytest.mark.parametrize("agent", list(AGENTS))
def test_every_registered_agent_has_a_preset_herd_check_accepts(agent: str, tmp_path: Path) -> None:
    preset = AGENTS[agent].preset
    (session,) = parse_config(init_text(agent), tmp_path / "herd.toml").sessions
    assert (session.agent, session.command, session.env) == (
        agent,
        list(preset.command),
        dict(preset.env),
    )
    assert session.resume == (list(preset.resume) if preset.resume else None)
    assert session_block(agent) in init_text(agent)


def test_an_unknown_preset_names_the_registered_ones_in_order() -> None:
    with pytest.raises(KeyError, match="choose one of " + ", ".join(AGENTS)):
        session_block("nope")


def test_a_preset_names_its_session_after_the_folder_not_main() -> None:
    (session,) = tomllib.loads(init_text("claude", folder=Path("/home/me/Billing API")))["session"]
    assert session["name"] == "Billing-API"
    (fallback,) = tomllib.loads(init_text("claude", folder=Path("/")))["session"]
    assert fallback["name"] == "agent"


@pytest.mark.parametrize("agent", ["codex", "gemini", "opencode"])
def test_only_claude_keeps_a_claude_named_progress_file(agent: str) -> None:
    (session,) = tomllib.loads(init_text(agent))["session"]
    assert "claude" not in session["progress"], session["progress"]
    assert "claude" not in " ".join(session["command"]), session["command"]
    (claude,) = tomllib.loads(init_text("claude"))["session"]
    assert claude["progress"] == "claude-progress.txt"


def test_the_template_s_on_drift_and_notify_examples_pass_herd_check(tmp_path: Path) -> None:
    text = init_text("claude")
    uncommented = "\n".join(
        line[2:] if line.startswith(("# notify", "# on_drift")) else line
        for line in text.splitlines()
    )
    assert uncommented != text and "on_drift" in uncommented and "notify" in uncommented
    config = parse_config(uncommented, tmp_path / "herd.toml")
    assert config.notify and config.sessions[0].on_drift
