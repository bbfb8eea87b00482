"""The real Claude Code CLI under the real daemon, against a scripted Anthropic server.

Each test runs the preset `herd init --agent claude` writes, in a throw-away HOME, and checks
what a user relies on: the work is done and committed, tokens and cost are exact, a crash is
resumed in the same conversation, a rate limit parks, a permission denial fails the task.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import FAST, Herd, make_repo, wait_until
from model_servers import AnthropicServer, Tokens, fail, hang, text, tool
from realagents import (
    AGENT_WAIT_S,
    MAIN,
    assert_cost_unpriced,
    assert_hello_committed,
    assert_in_flight_said,
    claude_env,
    completed,
    ended,
    kill_mid_run,
    rescued_and_resumed,
    result_lines,
    resumed_without_reset,
    run_usages,
    served_as_read,
    session_toml,
    start_main,
)

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]


UNLISTED = "claude-opus-5-5"


def _commit_step() -> object:
    return tool(
        "Bash",
        command="git add -A && git commit -q -m 'agent: add hello.txt'",
        description="commit",
    )


def test_a_run_edits_commits_and_counts_exact_tokens_and_cost(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    tokens = Tokens(input=100, output=30, cache_read=20, cache_write=10)
    steps = [tool("Write", file_path=str(repo / "hello.txt"), content="hi\n"), _commit_step()]
    with AnthropicServer([*steps, text("Done: hello.txt committed.")], tokens) as server:
        env = claude_env(tmp_path / "home", server.url, claude)
        start_main(herd, session_toml("main", "claude", repo, env))
        status = completed(herd)
        assert server.answered == 3
        assert_hello_committed(repo)
        usage = status["usage"]
        assert (
            usage["input_tokens"],
            usage["output_tokens"],
            usage["cache_read_tokens"],
            usage["cache_write_tokens"],
            usage["turns"],
        ) == (*served_as_read(server.bill(scripted_only=True), False), 3)
        (result,) = result_lines(herd.root / ".herd" / "runs" / "main" / "1" / "output.log")
        assert result["total_cost_usd"] > 0
        assert usage["cost_usd"] == pytest.approx(result["total_cost_usd"])
        assert usage["cost_estimated"] is False
        assert status["agent_session_id"] == result["session_id"]
        wait_until(lambda: herd.events("main", "checkpoint"), what="the agent's commit seen")


@pytest.mark.pidns
def test_a_run_killed_mid_run_is_rescued_reset_and_resumed_in_the_same_conversation(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [tool("Write", file_path=str(repo / "draft.txt"), content="half done\n"), hang()]
    with AnthropicServer([*steps, text("Picked up where I left off.")]) as server:
        env = claude_env(tmp_path / "home", server.url, claude)
        start_main(herd, session_toml("main", "claude", repo, env))
        kept = (tmp_path / "home" / ".claude", "*.jsonl", b'"output_tokens":30')
        session_id = kill_mid_run(herd, server.hanging, repo / "draft.txt", True, kept)
        status, started = rescued_and_resumed(herd, repo / "draft.txt")
        assert session_id in started[1]["data"]["argv"]
        # The resumed request carries the first run's turns: the same conversation goes on.
        resumed = server.requests[-1]
        sent = repr(resumed["messages"])
        assert "draft.txt" in sent and "tool_result" in sent
        assert status["agent_session_id"] == session_id
        # The killed run printed its one served message with `output_tokens: 1`; its transcript
        # under the agent's HOME holds the final usage, taken when the run ended.
        conversation = [e.tokens for e in server.ledger if e.scripted]
        assert len(conversation) == 2  # the answer before the hang and the resumed run's
        assert run_usages(herd, "main", 2) == [served_as_read(t, False) for t in conversation]
        billed = server.bill(scripted_only=True)
        usage = status["usage"]
        assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (
            billed.input,
            billed.output,
            billed.input + billed.output + billed.cache_read + billed.cache_write,
        )
        if usage["cost_unpriced_model"] is None:  # 2.1.197's default model: herd prices it
            assert usage["cost_estimated"] is True, usage  # the killed run's cost: herd's estimate
        else:  # 2.1.332's default model has no price in herd: the killed run's cost is withheld
            assert usage["cost_unpriced_model"] == "claude-opus-5-5", usage
        assert_in_flight_said(herd, server, status)


@pytest.mark.pidns
def test_a_rate_limit_parks_without_reset_and_then_resumes(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [tool("Write", file_path=str(repo / "draft.txt"), content="keep me\n"), fail(429)]
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3.0)
    with AnthropicServer([*steps, text("Limit lifted, done.")]) as server:
        env = claude_env(tmp_path / "home", server.url, claude)
        start_main(herd, session_toml("main", "claude", repo, env))
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit"), parked
        assert parked["next_restart_at"] is not None
        (limited,) = herd.events("main", "rate-limited")
        assert limited["data"]["delay_s"] == pytest.approx(3.0)
        assert (repo / "draft.txt").read_text() == "keep me\n"  # no reset
        assert parked["restarts"] == 0
        # The served message before the 429 is counted, with Claude's own cost for it.
        (result,) = result_lines(herd.root / ".herd" / "runs" / "main" / "1" / "output.log")
        assert result["api_error_status"] == 429 and result["total_cost_usd"] > 0
        (first,) = run_usages(herd, "main", 1)
        assert first == served_as_read(server.bill(scripted_only=True), False)

        started = resumed_without_reset(herd)
        assert "draft.txt" in repr(server.requests[-1]["messages"])
        # Nothing was rescued nor reset: the resume prompt says so instead of empty words.
        assert "edits on none and reset the tree to none" in " ".join(started[1]["data"]["argv"])


def test_a_run_denied_its_tools_fails_with_the_reason_and_is_not_restarted(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [tool("Write", file_path=str(repo / "hello.txt"), content="hi\n"), _commit_step()]
    with AnthropicServer([*steps, text("I could not write.")]) as server:
        env = claude_env(tmp_path / "home", server.url, claude)
        toml = session_toml("main", "claude", repo, env)
        # The old preset: no permission flag, so Claude Code refuses Write and Bash headless.
        toml = toml.replace(', "--allowedTools", "Bash,Read,Edit,Write,Glob,Grep"', "")
        assert "--allowedTools" not in toml
        start_main(herd, toml)
        status = ended(herd)
        assert (status["state"], status["reason"]) == ("failed", "permission-denied")
        (failed,) = herd.events("main", "failed")
        assert "Write, Bash" in failed["message"]
        assert len(herd.events("main", "run-started")) == 1
        assert not (repo / "hello.txt").exists()
        assert server.answered == 3


def test_an_overload_that_recovers_on_retry_is_a_normal_success(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    with AnthropicServer([fail(529), text("Done after one retry.")]) as server:
        env = {**claude_env(tmp_path / "home", server.url, claude), "CLAUDE_CODE_MAX_RETRIES": "1"}
        start_main(herd, session_toml("main", "claude", repo, env))
        status = completed(herd)
        assert len(server.requests) == 2 and server.answered == 1
        assert len(herd.events("main", "run-started")) == 1
        assert status["usage"]["input_tokens"] == 100


@pytest.mark.pidns
def test_a_model_herd_has_no_price_for_is_unpriced_not_priced_as_sonnet(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    steps = [tool("Write", file_path=str(repo / "draft.txt"), content="half done\n"), hang()]
    with AnthropicServer(steps) as server:
        # Claude Code 2.1.332's default model; herd's table has no price for it.
        env = {**claude_env(tmp_path / "home", server.url, claude), "ANTHROPIC_MODEL": UNLISTED}
        start_main(herd, session_toml("main", "claude", repo, env, restart="never"))
        kept = (tmp_path / "home" / ".claude", "*.jsonl", b'"output_tokens":30')
        kill_mid_run(herd, server.hanging, repo / "draft.txt", True, kept)
        status = ended(herd)
        assert {r["model"] for r in server.requests} == {UNLISTED}
        (run,) = herd.daemon.store.runs(MAIN)
        assert run.usage["input_tokens"] > 0  # the answer before the kill, from the transcript
        # Killed before its result: no cost of Claude's own, and no Sonnet price in its place.
        assert_cost_unpriced(herd, status["usage"], {UNLISTED})
