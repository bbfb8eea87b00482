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
    for placeholder in ("{session_id}", "{rescue_ref}", "{checkpoint}"):
        assert placeholder in resume, (agent, placeholder)


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
