"""Reset times the real CLIs say in words, and Gemini retrying a limit by itself, under the
real daemon: the scripted servers give the reset time the way the real APIs do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import FAST, Herd, make_repo, wait_until
from model_servers import AnthropicServer, GeminiServer, OpenAIResponsesServer, fail, hang, text
from realagents import (
    AGENT_WAIT_S,
    claude_env,
    codex_env,
    gemini_env,
    repo_with_identity,
    session_toml,
    start_main,
)

from agentherd.sessions.status import SessionStatus
from agentherd.sessions.times import parse_iso
from agentherd.tui.dashboard.rows import row_cells

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

FALLBACK_S = 3600.0
"""herd's own wait, far from the servers' reset times: a park of this length is a guess."""


@pytest.mark.pidns
def test_gemini_retrying_a_limit_shows_waiting_then_parks_until_its_suggested_retry(
    herd: Herd, tmp_path: Path, gemini: str
) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    said = ("detail", "text")  # Gemini's API: RetryInfo and "Please retry in 6s."
    steps = [fail(429, 6, said), fail(429, 6, said), text("Limit lifted, done.")]
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=FALLBACK_S)
    with GeminiServer(steps) as server:
        # Two attempts: the first 429 Gemini retries by itself (at least 5 s later), the
        # second ends the run with its "Suggested retry after 6s.".
        env = gemini_env(tmp_path / "home", server.url, gemini, {"general": {"maxAttempts": 2}})
        start_main(herd, session_toml("main", "gemini", repo, env))
        waiting = wait_until(
            lambda: (
                (herd.status("main").get("limit") or {}).get("waiting") == "agent"
                and herd.status("main")
            ),
            AGENT_WAIT_S,
            "the session to show Gemini waiting on the limit",
        )
        assert waiting["state"] == "running" and waiting["limit"]["attempt"] == 1, waiting
        assert waiting["limit"]["until"] is not None
        cell = row_cells(SessionStatus.model_validate(waiting), 40)["state"][0]
        assert "running waiting on rate limit (attempt 1)" in cell, cell
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit"), parked
        (limited,) = herd.events("main", "rate-limited")
        assert limited["data"]["delay_source"] == "agent", limited
        assert 0 < limited["data"]["delay_s"] <= 6.5, limited
        assert parked["limit"]["waiting"] == "herd" and parked["limit"]["delay_source"] == "agent"
        final = herd.wait_state("main", "completed", "failed", timeout_s=AGENT_WAIT_S)
        assert final["state"] == "completed", [e["message"] for e in herd.events("main")]
        # The 429 came before any answer: Gemini keeps no conversation to resume ("No previous
        # sessions found", exit 42), so the resume falls back to `command` (not a crash loop).
        modes = [e["data"]["mode"] for e in herd.events("main", "run-started")]
        assert modes == ["command", "resume", "command"], herd.events("main")
        assert herd.events("main", "resume-refused")
        assert not herd.events("main", "worktree-reset")


def test_codex_parks_until_the_reset_its_server_said_in_words(
    herd: Herd, tmp_path: Path, codex: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3.0)
    with OpenAIResponsesServer([fail(429, 120, ("stream",))]) as server:
        env = codex_env(tmp_path / "home", server.url, codex)
        start_main(herd, session_toml("main", "codex", repo, env))
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit"), parked
        (limited,) = herd.events("main", "rate-limited")
        # Not herd's 3 s: the 120 s the server said (a retry before it would meet the limit).
        assert 115 <= limited["data"]["delay_s"] <= 120, limited
        assert limited["data"]["delay_source"] == "agent"
        herd.client.call("stop", name="main")


def test_a_codex_limit_without_a_reset_time_waits_herds_guess_and_says_so(
    herd: Herd, tmp_path: Path, codex: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=FALLBACK_S)
    # An HTTP 429's Retry-After: Codex prints only "exceeded retry limit, last status: 429".
    with OpenAIResponsesServer([fail(429, 120, ("header",))]) as server:
        env = codex_env(tmp_path / "home", server.url, codex)
        start_main(herd, session_toml("main", "codex", repo, env))
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        (limited,) = herd.events("main", "rate-limited")
        assert limited["data"]["delay_source"] == "guess", limited
        assert "herd's guess" in limited["message"]
        assert parked["limit"]["delay_source"] == "guess"
        herd.client.call("stop", name="main")


def test_codex_usage_limit_without_a_time_in_its_output_waits_the_reset_in_its_rollout(
    herd: Herd, tmp_path: Path, codex: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3.0)
    # ChatGPT's Codex backend: the reset only in x-codex-primary-* headers. Codex prints "try
    # again later" and writes the used-up window, with its reset, into its rollout.
    with OpenAIResponsesServer([fail(429, 90, ("usage",))]) as server:
        env = codex_env(tmp_path / "home", server.url, codex)
        start_main(herd, session_toml("main", "codex", repo, env))
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit"), parked
        (limited,) = herd.events("main", "rate-limited")
        assert 80 <= limited["data"]["delay_s"] <= 90, limited
        assert limited["data"]["delay_source"] == "agent"
        herd.client.call("stop", name="main")


@pytest.mark.pidns
def test_two_claude_sessions_on_one_key_park_together_and_resume_staggered(
    herd: Herd, tmp_path: Path, claude: str
) -> None:
    stagger_s = 2.0
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3.0, rate_limit_stagger_s=stagger_s)
    with (
        AnthropicServer([fail(429), text("a: limit lifted, done.")]) as server_a,
        AnthropicServer([hang(), text("b: done.")]) as server_b,
    ):
        toml = ""
        for name, server in (("a", server_a), ("b", server_b)):
            env = claude_env(tmp_path / f"home-{name}", server.url, claude)  # one key variable
            toml += session_toml(name, "claude", make_repo(tmp_path / name), env)
        herd.write(toml)
        herd.start()
        herd.client.call("start", name="b")
        wait_until(server_b.hanging.is_set, AGENT_WAIT_S, "b's request to be in flight")
        herd.client.call("start", name="a")  # a's first request meets the account's limit
        parked = {
            name: herd.wait_state(name, "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
            for name in ("a", "b")
        }
        for name, status in parked.items():
            assert (status["state"], status["reason"]) == ("backoff", "rate-limit"), (
                name,
                status,
                herd.events(name),
            )
            assert status["limit"]["account"] == "claude:ANTHROPIC_API_KEY"
        (limited_b,) = herd.events("b", "rate-limited")
        assert "another session of account claude:ANTHROPIC_API_KEY" in limited_b["message"]
        resume_a = parse_iso(parked["a"]["next_restart_at"])
        resume_b = parse_iso(parked["b"]["next_restart_at"])
        assert resume_a is not None and resume_b is not None
        assert (resume_b - resume_a).total_seconds() == stagger_s
        for name in ("a", "b"):
            final = herd.wait_state(name, "completed", "failed", timeout_s=AGENT_WAIT_S)
            assert final["state"] == "completed", [e["message"] for e in herd.events(name)]
        again_a = parse_iso(herd.events("a", "run-started")[1]["at"])
        again_b = parse_iso(herd.events("b", "run-started")[1]["at"])
        assert again_a is not None and again_b is not None
        assert resume_a <= again_a and resume_b <= again_b
        assert (again_b - again_a).total_seconds() >= stagger_s * 0.9  # never both at once
