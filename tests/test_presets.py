"""What `herd init --agent NAME` writes asks each agent for the whole job, and after a crash
tells it where its uncommitted work went.

The opencode preset once asked only to "Implement the next failing feature" (no tests, no
commit, no progress notes: a real model need not commit, and then nothing is checkpointed)
and resumed with a bare "Continue." that hid the rescue ref.
"""

from __future__ import annotations

import tomllib

import pytest

from agentherd.tui.cli.templates import init_text

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
