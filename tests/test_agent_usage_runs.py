"""Under the real daemon: a resumed Codex thread counted once; a killed Claude run's spend kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import Herd, make_repo, script, wait_until

FIXTURES = Path(__file__).parent / "fixtures" / "agents"


def replay(first: Path, resumed: Path) -> str:
    """An agent that prints `first` then dies by SIGKILL; given an argument, prints `resumed`."""
    return script(f"""
        import os, signal, sys
        if len(sys.argv) > 1:
            sys.stdout.buffer.write(open({str(resumed)!r}, "rb").read())
            sys.exit(0)
        for line in open({str(first)!r}, "rb"):
            if line.strip() != b"Killed":
                sys.stdout.buffer.write(line)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)


def session(name: str, repo: Path, agent: str, command: str, env: str = "{}") -> str:
    """A [[session]] block that resumes with the agent's session id."""
    resume = json.dumps([*json.loads(command), "{session_id}"])
    return f"""
[[session]]
name = "{name}"
cwd = "{repo}"
agent = "{agent}"
command = {command}
resume = {resume}
restart = "on-failure"
restart_delay = 0
env = {env}
"""


def run_usages(herd: Herd, name: str, count: int) -> list[dict[str, object]]:
    """The usage of a session's first `count` runs, once all of them ended."""
    store = herd.daemon.store if herd.daemon is not None else None
    assert store is not None

    def ended() -> list[dict[str, object]] | None:
        runs = store.runs(name)
        done = [r for r in runs if r.ended_at is not None]
        return [r.usage for r in done] if len(done) >= count else None

    return wait_until(ended, timeout_s=30, what=f"{count} ended runs of {name}")  # type: ignore[no-any-return]


@pytest.mark.timeout(120)
def test_a_resumed_codex_thread_is_counted_once(herd: Herd, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    command = replay(FIXTURES / "real/codex-exec.jsonl", FIXTURES / "real/codex-resume.jsonl")
    herd.write(session("cx", repo, "codex", command))
    client = herd.start()
    client.call("start", name="cx")
    herd.wait_state("cx", "completed", "failed", "stopped", timeout_s=30)
    first, resumed = run_usages(herd, "cx", 2)
    # The thread's counter after the resume is 500 input (100 cached) and 150 output: the
    # runs add up to that, not to 390 + 650.
    assert (first["input_tokens"], first["cache_read_tokens"], first["output_tokens"]) == (
        240,
        60,
        90,
    )
    assert (resumed["input_tokens"], resumed["cache_read_tokens"], resumed["output_tokens"]) == (
        160,
        40,
        60,
    )
    assert herd.status("cx")["usage"]["total_tokens"] == 650


@pytest.mark.timeout(120)
def test_a_killed_claude_run_takes_its_spend_from_the_transcript(
    herd: Herd, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-home", home)
    command = replay(
        FIXTURES / "real/claude-killed-midrun.log", FIXTURES / "real/claude-resumed-under-herd.log"
    )
    herd.write(session("cl", repo, "claude", command, env=f'{{ HOME = "{home}" }}'))
    client = herd.start()
    client.call("start", name="cl")
    herd.wait_state("cl", "completed", "failed", "stopped", timeout_s=30)
    killed, resumed = run_usages(herd, "cl", 2)
    # The resumed run named the stored conversation, whose transcript it appends to.
    (checked,) = wait_until(lambda: herd.events("cl", "resume-checked"), what="the check")
    assert checked["data"]["agent_session_id"] == "3c6dc9ee-9626-4943-9a2a-b53c4c69233a"
    assert checked["data"]["file"].startswith(str(home / ".claude" / "projects"))
    assert not herd.events("cl", "resume-mismatch")
    # stdout alone says 3 output tokens; the transcript says 90 (30 per message).
    assert killed["output_tokens"] == 90 and killed["total_tokens"] == 480
    assert killed["cost_estimated"] is True and killed["cost_usd"] == pytest.approx(0.0039675)
    assert resumed["output_tokens"] == 120 and resumed["cost_estimated"] is False
    usage = herd.status("cl")["usage"]
    assert usage["output_tokens"] == 210 and usage["total_tokens"] == 1120


@pytest.mark.timeout(120)
def test_a_resume_that_lands_in_another_conversation_is_a_warning(
    herd: Herd, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    command = replay(
        FIXTURES / "real/claude-killed-midrun.log", FIXTURES / "real/claude-stream.jsonl"
    )
    herd.write(session("cl", repo, "claude", command, env=f'{{ HOME = "{tmp_path}" }}'))
    herd.start().call("start", name="cl")
    herd.wait_state("cl", "completed", "failed", "stopped", timeout_s=30)
    (mismatch,) = wait_until(lambda: herd.events("cl", "resume-mismatch"), what="the warning")
    assert mismatch["data"]["expected"] == "3c6dc9ee-9626-4943-9a2a-b53c4c69233a"
    assert mismatch["data"]["agent_session_id"] != mismatch["data"]["expected"]
    assert "the earlier work is not in its context" in mismatch["message"]
    assert "resume-mismatch" in herd.cli("status", "cl").stdout
    assert not herd.events("cl", "resume-checked")
