"""The real OpenCode CLI (`opencode run --format json`) under the real daemon.

It runs against a scripted OpenAI-compatible chat-completions server, with the preset
`herd init --agent opencode` writes: the agent edits, commits, and its tokens are exact.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Herd
from model_servers import OpenAIChatServer, text, tool
from realagents import (
    assert_hello_committed,
    completed,
    ended,
    opencode_env,
    repo_with_identity,
    served_as_read,
    session_toml,
    start_main,
)

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(240)]

AGENT_WAIT_S = 150.0
"""OpenCode 1.18 took 35-40 s for three answers on a loaded 2-core machine."""


def test_a_run_edits_commits_and_counts_exact_tokens(
    herd: Herd, tmp_path: Path, opencode: str
) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    steps = [
        tool("write", filePath=str(repo / "hello.txt"), content="hi\n"),
        tool(
            "bash",
            command="git add -A && git commit -q -m 'agent: add hello.txt'",
            description="commit",
        ),
        text("Done: hello.txt committed."),
    ]
    with OpenAIChatServer(steps) as server:
        env = opencode_env(tmp_path / "home", server.url, opencode)
        start_main(herd, session_toml("main", "opencode", repo, env))
        status = completed(herd, AGENT_WAIT_S)
        assert server.answered == 3
        assert_hello_committed(repo)
        assert str(status["agent_session_id"]).startswith("ses_")
        usage = status["usage"]
        # Three answers of 100 prompt tokens (20 cached) and 30 output, as OpenCode's steps
        # print them. Its title request (one more answer the server billed) prints no step.
        assert server.served == 4
        assert (
            usage["input_tokens"],
            usage["output_tokens"],
            usage["cache_read_tokens"],
            usage["cache_write_tokens"],
        ) == served_as_read(server.bill(scripted_only=True), True)
        # A custom model has no price in OpenCode (`cost: 0`) nor in herd: no cost, not 0.
        assert usage["cost_usd"] is None


def test_a_tool_the_config_denies_fails_the_run_permission_denied(
    herd: Herd, tmp_path: Path, opencode: str
) -> None:
    # OpenCode's documented narrowing: `"permission": {"bash": "deny"}` takes bash away, and
    # 1.18 turns the model's call into an `invalid` tool call; the commit never happens.
    repo = repo_with_identity(tmp_path / "repo")
    steps = [
        tool("write", filePath=str(repo / "hello.txt"), content="hi\n"),
        tool("bash", command="git add -A && git commit -q -m 'agent: hello'", description="c"),
        text("Done: hello.txt committed."),
    ]
    with OpenAIChatServer(steps) as server:
        env = opencode_env(tmp_path / "home", server.url, opencode, permission={"bash": "deny"})
        start_main(herd, session_toml("main", "opencode", repo, env))
        status = ended(herd, AGENT_WAIT_S)
        assert (status["state"], status["reason"]) == ("failed", "permission-denied"), (
            status,
            herd.events("main"),
        )
        assert server.answered == 3
    (failed,) = herd.events("main", "failed")
    assert "bash" in failed["message"], failed
    assert len(herd.events("main", "run-started")) == 1
