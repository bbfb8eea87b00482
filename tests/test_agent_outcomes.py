"""How a run ended, as a real agent printed it, decides the supervisor's next move.

A stand-in agent replays captured Claude Code output (tests/fixtures/outcomes/) under the real
daemon, so these run without the CLI: a permission denial fails, a rate limit parks until the
reset time the agent gave, a resume the agent refuses falls back to `command`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest
from conftest import FAST, Herd, make_repo, wait_until

from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.rows import detail_lines, row_cells

FIXTURES = Path(__file__).parent / "fixtures" / "outcomes"

REPLAY = r"""
import json, pathlib, sys, time
fixtures, marker = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
if "--resume" in sys.argv:
    name = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "--resume" else "resume"
else:
    name = sys.argv[3]
runs = int(marker.read_text()) + 1 if marker.exists() else 1
marker.write_text(str(runs))
plan = json.loads(sys.argv[-1])[f"{name}:{runs}"] if sys.argv[-1].startswith("{") else None
for step in plan or [name]:
    if step.startswith("limit-in:"):  # a reset this many seconds after the agent says it
        line = {"type": "rate_limit_event", "rate_limit_info": {"status": "rejected",
                "resetsAt": int(time.time()) + int(step.split(":")[1])}, "session_id": "s-1"}
        print(json.dumps(line), flush=True)
        continue
    text = (fixtures / f"{step}.jsonl").read_text()
    sys.stdout.write(text)
    sys.stdout.flush()
    last = json.loads(text.splitlines()[-1])
    if last.get("is_error"):
        sys.exit(1)
"""


def _session(repo: Path, plans: dict[str, list[str]], **keys: object) -> str:
    """A claude session whose command and resume replay fixture files, per run number."""
    argv = [sys.executable, "-c", REPLAY, str(FIXTURES), str(repo.parent / "runs.count")]
    command = [*argv, "command", json.dumps(plans)]
    resume = [*argv, "--resume", "{session_id}", json.dumps(plans)]
    lines = [
        "[[session]]",
        'name = "main"',
        f"cwd = {json.dumps(str(repo))}",
        'agent = "claude"',
        f"command = {json.dumps(command)}",
        f"resume = {json.dumps(resume)}",
        'restart_delay = "0s"',
        *(f"{key} = {json.dumps(value)}" for key, value in keys.items()),
    ]
    return "\n".join(lines) + "\n"


def test_a_run_denied_its_tools_fails_at_once_even_under_restart_always(
    herd: Herd, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    herd.write(_session(repo, {"command:1": ["claude-no-permission-flag"]}, restart="always"))
    herd.start()
    herd.client.call("start", name="main")
    status = herd.wait_state("main", "failed", "completed")
    assert (status["state"], status["reason"]) == ("failed", "permission-denied")
    (failed,) = herd.events("main", "failed")
    assert "denied Write, Bash" in failed["message"]
    assert len(herd.events("main", "run-started")) == 1
    assert status["usage"]["output_tokens"] == 90  # the run's spend is still counted


def test_a_rate_limit_waits_until_the_reset_the_agent_gave(herd: Herd, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "draft.txt").write_text("uncommitted work\n")
    # The reset is 3 s after the agent prints it, not after the test began: a loaded machine
    # that takes seconds to start the daemon and the agent must not find it passed already.
    plans = {
        "command:1": ["limit-in:3", "claude-limit"],
        "resume:2": ["claude-stream"],
    }
    # A fallback wait of an hour: the park must follow the agent's reset time instead.
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3600.0)
    herd.write(_session(repo, plans, max_crashes=1))
    herd.start()
    herd.client.call("start", name="main")
    parked = herd.wait_state("main", "backoff", "failed", "completed")
    assert (parked["state"], parked["reason"]) == ("backoff", "rate-limit")
    (limited,) = herd.events("main", "rate-limited")
    assert 0 < limited["data"]["delay_s"] <= 3.5
    assert limited["data"]["resets_at"] is not None
    assert parked["next_restart_at"] == limited["data"]["resumes_at"]
    # The dashboard's row says when it goes on.
    state_cell = row_cells(SessionStatus.model_validate(parked), 40)["state"][0]
    assert re.fullmatch(r"backoff resumes in [0-3]s ⚠1", state_cell), state_cell
    said = detail_lines(SessionStatus.model_validate(parked))[0]  # the reason whole there
    assert re.match(r"main  backoff \(rate-limit\) resumes in [0-3]s  ·", said), said
    status = herd.wait_state("main", "completed", "failed", timeout_s=20)
    # max_crashes = 1: had the limit counted as a crash, the task would have failed.
    assert status["state"] == "completed", herd.events("main")
    assert (repo / "draft.txt").read_text() == "uncommitted work\n"
    assert not herd.events("main", "worktree-reset") and not herd.events("main", "rescue-saved")
    modes = [e["data"]["mode"] for e in herd.events("main", "run-started")]
    assert modes == ["command", "resume"]


def test_a_rate_limit_without_a_reset_time_waits_longer_each_time(
    herd: Herd, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    plans = {
        "command:1": ["claude-limit"],
        "resume:2": ["claude-limit"],
        "resume:3": ["claude-stream"],
    }
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=0.2, rate_limit_wait_max_s=10.0)
    herd.write(_session(repo, plans))
    herd.start()
    herd.client.call("start", name="main")
    status = herd.wait_state("main", "completed", "failed", timeout_s=20)
    assert status["state"] == "completed", herd.events("main")
    delays = [e["data"]["delay_s"] for e in herd.events("main", "rate-limited")]
    assert delays == [pytest.approx(0.2), pytest.approx(0.4)]


def test_herd_toml_sets_the_rate_limit_wait_and_its_cap(herd: Herd, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    plans = {
        "command:1": ["claude-limit"],
        "resume:2": ["claude-limit"],
        "resume:3": ["claude-limit"],
        "resume:4": ["claude-stream"],
    }
    # herd's own defaults (an hour) would hold the test: the session's keys must win.
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=3600.0)
    herd.write(_session(repo, plans, rate_limit_wait="0.2s", rate_limit_wait_max="0.3s"))
    herd.start()
    herd.client.call("start", name="main")
    status = herd.wait_state("main", "completed", "failed", timeout_s=20)
    assert status["state"] == "completed", herd.events("main")
    delays = [e["data"]["delay_s"] for e in herd.events("main", "rate-limited")]
    assert delays == [pytest.approx(0.2), pytest.approx(0.3), pytest.approx(0.3)]


def test_a_resume_the_agent_refuses_falls_back_to_command(herd: Herd, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    plans = {
        "command:1": ["claude-limit"],
        "resume:2": ["claude-resume-wrongcwd"],
        "command:3": ["claude-stream"],
    }
    herd.write(_session(repo, plans, max_crashes=1))
    herd.timings = dataclasses.replace(FAST, rate_limit_wait_s=0.1)
    herd.start()
    herd.client.call("start", name="main")
    status = herd.wait_state("main", "completed", "failed", timeout_s=20)
    assert status["state"] == "completed", herd.events("main")
    started = herd.events("main", "run-started")
    assert [e["data"]["mode"] for e in started] == ["command", "resume", "command"]
    (refused,) = herd.events("main", "resume-refused")
    assert "No conversation found" in refused["message"]
    assert "afresh with `command`" in refused["message"]
    wait_until(
        lambda: herd.status("main")["agent_session_id"] == "94b3ff90-06cf-49e1-9584-a62116b4bf92"
    )
