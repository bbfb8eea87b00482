"""The real Gemini CLI under the real daemon, against a scripted Gemini API.

The preset `herd init --agent gemini` writes is what runs: `--yolo` and a trusted workspace,
or every write is refused (and an untrusted folder exits 55 at once).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import FAST, Herd
from model_servers import GeminiServer, fail, hang, text, tool
from realagents import (
    AGENT_WAIT_S,
    assert_cost_unpriced,
    assert_hello_committed,
    assert_in_flight_said,
    completed,
    ended,
    gemini_env,
    kill_mid_run,
    repo_with_identity,
    rescued_and_resumed,
    resumed_without_reset,
    run_usages,
    served_as_read,
    session_toml,
    start_main,
)

pytestmark = [pytest.mark.realagents, pytest.mark.timeout(180)]

MODEL = "gemini-2.5-flash"


def test_a_run_edits_commits_and_completes(herd: Herd, tmp_path: Path, gemini: str) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    steps = [
        tool("write_file", file_path=str(repo / "hello.txt"), content="hi\n"),
        tool("run_shell_command", command="git add -A && git commit -q -m 'agent: add hello.txt'"),
        text("Done: hello.txt committed."),
    ]
    with GeminiServer(steps) as server:
        env = gemini_env(tmp_path / "home", server.url, gemini)
        start_main(herd, session_toml("main", "gemini", repo, env))
        status = completed(herd)
        assert server.answered == 3
        assert_hello_committed(repo)
        assert status["agent_session_id"]  # from its `init` line
        usage = status["usage"]
        # Four requests (the routing call and three answers) of 100 prompt tokens (20 of them
        # cached) and 30 output: the result's stats, with the cached part as cache read.
        billed = server.bill()
        assert server.served == 4
        assert (
            usage["input_tokens"],
            usage["output_tokens"],
            usage["cache_read_tokens"],
            usage["cache_write_tokens"],
        ) == served_as_read(billed, True)
        assert usage["total_tokens"] == billed.input + billed.output
        # Gemini CLI 0.61's default (`auto`) routes on gemini-3.5-flash-lite and answers on
        # gemini-3.8-flash: herd has no price for either, so it shows none (not gemini-2.5-pro's).
        asked = {path.split("/models/")[1].split(":")[0] for path in server.paths}
        assert asked == {"gemini-3.5-flash-lite", "gemini-3.8-flash"}
        assert_cost_unpriced(herd, usage, asked)


@pytest.mark.pidns
def test_a_run_killed_mid_run_is_rescued_reset_and_resumed_in_the_same_conversation(
    herd: Herd, tmp_path: Path, gemini: str
) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    steps = [tool("write_file", file_path=str(repo / "draft.txt"), content="half\n"), hang()]
    with GeminiServer([*steps, text("Picked up where I left off.")]) as server:
        # A model set: no routing request, whose tokens the chat file would not hold.
        env = {**gemini_env(tmp_path / "home", server.url, gemini), "GEMINI_MODEL": MODEL}
        start_main(herd, session_toml("main", "gemini", repo, env))
        kept = (tmp_path / "home" / ".gemini", "*.jsonl", b'"output":30')
        session_id = kill_mid_run(herd, server.hanging, repo / "draft.txt", True, kept)
        status, started = rescued_and_resumed(herd, repo / "draft.txt")
        assert session_id in started[1]["data"]["argv"]
        assert "draft.txt" in repr(server.requests[-1]["contents"])
        # Gemini prints its stats only in the `result` line, which the killed run never
        # reached: its one answer (100 prompt tokens, 20 of them cached, 30 output) is read
        # from the chat file Gemini keeps under HOME. The resume's answer comes from its result.
        assert server.served == 2  # everything the server billed, and nothing more
        assert run_usages(herd, "main", 2) == [
            served_as_read(e.tokens, True) for e in server.ledger
        ]
        usage = status["usage"]
        figures = (usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"], 0)
        assert figures == served_as_read(server.bill(), True)
        assert usage["cost_estimated"] is True and usage["cost_usd"] > 0
        assert_in_flight_said(herd, server, status)


@pytest.mark.pidns
def test_a_rate_limit_parks_without_reset_and_then_resumes(
    herd: Herd, tmp_path: Path, gemini: str
) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    steps = [tool("write_file", file_path=str(repo / "draft.txt"), content="keep me\n"), fail(429)]
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3.0)
    with GeminiServer([*steps, text("Limit lifted, done.")]) as server:
        # Gemini CLI retries a 429 itself, 10 attempts from 5 s up to 30 s apart (about 3.5
        # minutes), before it gives up; one attempt keeps the test short.
        settings = {"general": {"maxAttempts": 1}}
        env = gemini_env(tmp_path / "home", server.url, gemini, settings)
        start_main(herd, session_toml("main", "gemini", repo, env))
        parked = herd.wait_state("main", "backoff", "failed", "completed", timeout_s=AGENT_WAIT_S)
        assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit"), (
            parked,
            herd.events("main"),
        )
        assert parked["next_restart_at"] is not None and parked["restarts"] == 0
        (limited,) = herd.events("main", "rate-limited")
        assert limited["data"]["delay_s"] == pytest.approx(3.0)
        assert (repo / "draft.txt").read_text() == "keep me\n"  # no reset
        # The run's `result` (status error, its message naming the quota) still has its stats:
        # the routing request and the one answer before the 429.
        (first,) = run_usages(herd, "main", 1)
        assert first == served_as_read(server.bill(), True)

        resumed_without_reset(herd)
        assert "draft.txt" in repr(server.requests[-1]["contents"])
        assert (repo / "draft.txt").read_text() == "keep me\n"


def test_a_run_denied_its_tools_fails_with_the_reason_and_is_not_restarted(
    herd: Herd, tmp_path: Path, gemini: str
) -> None:
    repo = repo_with_identity(tmp_path / "repo")
    steps = [
        tool("write_file", file_path=str(repo / "hello.txt"), content="hi\n"),
        text("I could not write."),
    ]
    with GeminiServer(steps) as server:
        env = gemini_env(tmp_path / "home", server.url, gemini)
        # Without --yolo, headless Gemini CLI may not run a tool that needs approval.
        toml = session_toml("main", "gemini", repo, env).replace(', "--yolo"', "")
        assert "--yolo" not in toml
        start_main(herd, toml)
        status = ended(herd)
        assert (status["state"], status["reason"]) == ("failed", "permission-denied"), (
            status,
            herd.events("main"),
        )
        assert len(herd.events("main", "run-started")) == 1
        (failed,) = herd.events("main", "failed")
        assert "write_file" in failed["message"], failed
        assert not (repo / "hello.txt").exists()
