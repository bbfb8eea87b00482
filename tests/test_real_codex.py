"""The real Codex CLI (`codex exec --json`) under the real daemon, against a scripted Responses API.

The preset `herd init --agent codex` writes is what runs: it must let Codex edit, run commands
and commit in its worktree (`--sandbox workspace-write` could not commit), with stdin /dev/null.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import pytest
from conftest import FAST, Herd, git, make_repo, wait_until
from model_servers import OpenAIResponsesServer, Tokens, fail, hang, text, tool
from realagents import agent_binary, codex_env, session_toml

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

AGENT_WAIT_S = 90.0

SHELL = "exec_command"
"""The shell tool codex-cli 0.171.0 offers the model."""


@pytest.fixture
def codex() -> str:
    return agent_binary("codex")


def test_a_run_edits_commits_and_completes(herd: Herd, tmp_path: Path, codex: str) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [
        tool(SHELL, cmd="printf 'hi\\n' > hello.txt"),
        tool(SHELL, cmd="git add -A && git commit -q -m 'agent: add hello.txt'"),
        text("Done: hello.txt committed."),
    ]
    with OpenAIResponsesServer(steps, Tokens(100, 30, 20, 0)) as server:
        herd.write(
            session_toml("main", "codex", repo, codex_env(tmp_path / "home", server.url, codex))
        )
        herd.start()
        herd.client.call("start", name="main")
        status = herd.wait_state("main", "completed", "failed", timeout_s=AGENT_WAIT_S)
        assert status["state"] == "completed", (status, herd.events("main"))
        assert server.answered == 3
        assert (repo / "hello.txt").read_text() == "hi\n"
        assert git(repo, "log", "-1", "--format=%s").strip() == "agent: add hello.txt"
        usage = status["usage"]
        # TODO(i10-adapters): the codex adapter reads cached_input_tokens (60 of the 300 input)
        # and the thread id; the plain parser of this branch gives only these.
        assert (usage["input_tokens"], usage["output_tokens"]) == (300, 90)
        assert usage["cost_usd"] is None  # Codex reports no cost: never an invented 0


@pytest.mark.pidns
def test_a_run_killed_mid_run_is_rescued_reset_and_run_again(
    herd: Herd, tmp_path: Path, codex: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [tool(SHELL, cmd="printf 'half\\n' > draft.txt"), hang()]
    with OpenAIResponsesServer([*steps, text("Finished.")]) as server:
        herd.write(
            session_toml("main", "codex", repo, codex_env(tmp_path / "home", server.url, codex))
        )
        herd.start()
        herd.client.call("start", name="main")
        wait_until(server.hanging.is_set, AGENT_WAIT_S, "the agent's second request to hang")
        assert (repo / "draft.txt").exists()
        os.kill(herd.status("main")["pid"], signal.SIGKILL)
        status = herd.wait_state("main", "completed", "failed", timeout_s=AGENT_WAIT_S)
        assert status["state"] == "completed", (status, herd.events("main"))
        assert herd.events("main", "rescue-saved") and herd.events("main", "worktree-reset")
        assert not (repo / "draft.txt").exists()
        modes = [e["data"]["mode"] for e in herd.events("main", "run-started")]
        if status["agent_session_id"] is None:
            # TODO(i10-adapters): with the codex adapter's thread id this run resumes
            # (`codex exec resume THREAD_ID`) and the server gets the first run's turns.
            assert modes == ["command", "command"]
        else:
            assert modes == ["command", "resume"]
            assert "draft.txt" in repr(server.requests[-1]["input"])


@pytest.mark.xfail(
    strict=True,
    reason="TODO(i10-adapters): the codex adapter reads `turn.failed` (429) as kind rate-limit; "
    "the plain parser of this branch calls it a crash. Remove this mark once it lands.",
)
def test_a_rate_limit_parks_without_reset(herd: Herd, tmp_path: Path, codex: str) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "draft.txt").write_text("keep me\n")
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3600.0)
    with OpenAIResponsesServer([fail(429)]) as server:
        herd.write(
            session_toml("main", "codex", repo, codex_env(tmp_path / "home", server.url, codex))
        )
        herd.start()
        herd.client.call("start", name="main")
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit"), parked
        assert herd.events("main", "rate-limited")
        assert (repo / "draft.txt").read_text() == "keep me\n"
