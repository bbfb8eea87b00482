"""The real Codex CLI (`codex exec --json`) under the real daemon, against a scripted Responses API.

The preset `herd init --agent codex` writes is what runs: it must let Codex edit, run commands
and commit in its worktree (`--sandbox workspace-write` could not commit), with stdin /dev/null.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import FAST, Herd, git, make_repo
from model_servers import OpenAIResponsesServer, Tokens, fail, hang, text, tool
from realagents import (
    AGENT_WAIT_S,
    assert_cost_estimated,
    assert_hello_committed,
    codex_env,
    completed,
    ended,
    kill_mid_run,
    rescued_and_resumed,
    run_usages,
    served_as_read,
    session_toml,
    start_main,
)

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

SHELL = "exec_command"
"""The shell tool codex-cli 0.171.0 offers the model."""


def test_a_run_edits_commits_and_completes(herd: Herd, tmp_path: Path, codex: str) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [
        tool(SHELL, cmd="printf 'hi\\n' > hello.txt"),
        tool(SHELL, cmd="git add -A && git commit -q -m 'agent: add hello.txt'"),
        text("Done: hello.txt committed."),
    ]
    with OpenAIResponsesServer(steps, Tokens(100, 30, 20, 0)) as server:
        start_main(
            herd,
            session_toml("main", "codex", repo, codex_env(tmp_path / "home", server.url, codex)),
        )
        status = completed(herd)
        assert server.answered == 3
        assert_hello_committed(repo)
        usage = status["usage"]
        # Three requests of 100 input (20 of them cached) and 30 output: Codex's thread total
        # is 300 input of which 60 cached; the cached part is cache read, not input.
        assert (
            usage["input_tokens"],
            usage["output_tokens"],
            usage["cache_read_tokens"],
            usage["cache_write_tokens"],
        ) == served_as_read(server.bill(), True)
        assert status["agent_session_id"]  # the thread id, from `thread.started`
        assert_cost_estimated("codex", usage)


@pytest.mark.pidns
def test_a_run_killed_mid_run_is_rescued_reset_and_run_again(
    herd: Herd, tmp_path: Path, codex: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [tool(SHELL, cmd="printf 'half\\n' > draft.txt"), hang()]
    with OpenAIResponsesServer([*steps, text("Finished.")]) as server:
        start_main(
            herd,
            session_toml("main", "codex", repo, codex_env(tmp_path / "home", server.url, codex)),
        )
        kept = (tmp_path / "home" / ".codex", "rollout-*.jsonl", b'"output_tokens":30')
        kill_mid_run(herd, server.hanging, repo / "draft.txt", kept=kept)
        status, started = rescued_and_resumed(herd, repo / "draft.txt")
        # The thread id from `thread.started` resumes the same thread after the crash.
        thread = status["agent_session_id"]
        assert thread and started[1]["data"]["argv"][-3:-1] == ["resume", thread]
        assert "draft.txt" in repr(server.requests[-1]["input"])
        # Codex prints the thread's total only at a turn's end, which the killed run never
        # reached: its one served answer (100 input, 20 of them cached, 30 output) is read from
        # the rollout file Codex keeps under CODEX_HOME. The resume prints the thread's total
        # (200 input): what the killed run recorded is taken off, so each answer counts once.
        assert server.answered == server.served == 2
        assert run_usages(herd, "main", 2) == [
            served_as_read(e.tokens, True) for e in server.ledger
        ]
        usage = status["usage"]
        figures = (usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"], 0)
        assert figures == served_as_read(server.bill(), True)


def test_a_rate_limit_parks_without_reset(herd: Herd, tmp_path: Path, codex: str) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "draft.txt").write_text("keep me\n")
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3600.0)
    with OpenAIResponsesServer([fail(429)]) as server:
        start_main(
            herd,
            session_toml("main", "codex", repo, codex_env(tmp_path / "home", server.url, codex)),
        )
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit"), parked
        assert herd.events("main", "rate-limited")
        assert (repo / "draft.txt").read_text() == "keep me\n"  # no reset
        assert not herd.events("main", "worktree-reset")
        assert parked["restarts"] == 0
        assert len(herd.events("main", "run-started")) == 1


def test_a_commit_the_sandbox_refuses_fails_with_the_reason_and_is_not_restarted(
    herd: Herd, tmp_path: Path, codex: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [
        tool(SHELL, cmd="printf 'hi\\n' > hello.txt"),
        # codex-cli 0.171.0 at times prints no `command_execution` item for a command that
        # ends at once (here often for this commit): herd reads the refusal from the thread's
        # rollout file, which always has the call's `function_call_output`.
        tool(SHELL, cmd="git add -A && git commit -q -m 'agent: add hello.txt'"),
        # A failing test is not a refusal: it must not be named.
        tool(SHELL, cmd="printf 'FAILED tests/test_app.py::test_add\\n'; exit 1"),
        text("I could not commit."),
    ]
    with OpenAIResponsesServer(steps) as server:
        toml = session_toml("main", "codex", repo, codex_env(tmp_path / "home", server.url, codex))
        # The old preset: workspace-write leaves .git read-only, so the commit is refused.
        toml = toml.replace('"danger-full-access"', '"workspace-write"')
        assert "workspace-write" in toml
        start_main(herd, toml)
        status = ended(herd)
        output = herd.root / ".herd" / "runs" / "main" / "1" / "output.log"
        assert (status["state"], status["reason"]) == ("failed", "permission-denied"), (
            status,
            output.read_text(errors="replace")[-4000:],
        )
        assert len(herd.events("main", "run-started")) == 1
        (failed,) = herd.events("main", "failed")
        assert "was denied git;" in failed["message"], failed  # the command, and only it
        assert git(repo, "log", "-1", "--format=%s").strip() != "agent: add hello.txt"
        assert server.answered == 4
