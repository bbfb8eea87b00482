"""`herd send` to a headless real Claude Code session: the text is the next run's prompt.

The preset's resume gives `{message}` as its `-p` prompt; the scripted server's ledger shows
the sent text arrived as the newest user turn of the same conversation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Herd, make_repo
from model_servers import AnthropicServer, text
from realagents import MAIN, claude_env, completed, session_toml, start_main

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

STEER = "STEER-7f3a: also add a README, please."


def test_send_reaches_the_next_runs_prompt_in_the_same_conversation(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    with AnthropicServer([text("FIRST-ANSWER"), text("README noted.")]) as server:
        env = claude_env(tmp_path / "home", server.url, claude)
        start_main(herd, session_toml(MAIN, "claude", repo, env))
        first = completed(herd)
        sent = herd.cli("send", MAIN, STEER, "--wait", timeout_s=120)
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout == (
            f"{MAIN}: started run 2 ({MAIN}/2) with the message; "
            f"run 2 ended (success), {MAIN} is completed\n"
        )
        assert server.answered == 2
        asked = json.dumps(server.requests[-1]["messages"])
        assert STEER in asked and "FIRST-ANSWER" in asked  # the same conversation, resumed
        assert STEER not in json.dumps(server.requests[0]["messages"])
        assert herd.status(MAIN)["agent_session_id"] == first["agent_session_id"]
