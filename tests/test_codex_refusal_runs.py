"""Under the real daemon: a Codex refusal only the rollout shows fails the run; a failing test
in the sandbox does not.

The agent replays what codex-cli 0.171.0 printed and wrote (fixtures/agents/real/codex-sandbox-*):
its stdout, and its rollout under CODEX_HOME with the times moved to now, as the real CLI
would have stamped them. tests/test_real_codex.py does the same with the real binary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Herd, make_repo, script

REAL = Path(__file__).parent / "fixtures" / "agents" / "real"
THREAD = "01a23528-1cc6-7e61-9e06-8a83ef3f36dd"
REFUSED_RUN_STARTED = "2026-12-02T05:09:10.718Z"
ORDINARY_RUN_STARTED = "2026-12-02T05:09:16.447Z"
"""When the captured runs began: the replay stamps the rollout as if they began now."""


def replay(stdout: Path, started: str, until: str | None = None) -> str:
    """An agent that writes the thread's rollout (lines before `until`) and prints `stdout`."""
    return script(f"""
        import json, os, sys
        from datetime import UTC, datetime, timedelta
        def moment(text):
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        shift = datetime.now(UTC) - moment({started!r})
        folder = os.path.join(os.environ["CODEX_HOME"], "sessions", "2026", "12", "02")
        os.makedirs(folder, exist_ok=True)
        name = "rollout-2026-12-02T05-09-10-{THREAD}.jsonl"
        with open(os.path.join(folder, name), "w") as out:
            for line in open({str(REAL / "codex-sandbox-rollout.jsonl")!r}):
                entry = json.loads(line)
                if {until!r} is not None and entry["timestamp"] >= {until!r}:
                    break
                stamp = moment(entry["timestamp"]) + shift
                entry["timestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                out.write(json.dumps(entry) + "\\n")
        sys.stdout.buffer.write(open({str(stdout)!r}, "rb").read())
    """)


def session(repo: Path, command: str, codex_home: Path) -> str:
    """A Codex session run once (restarted only on failure) with its own CODEX_HOME."""
    return f"""
[[session]]
name = "cx"
cwd = "{repo}"
agent = "codex"
command = {command}
restart = "on-failure"
restart_delay = 0
env = {{ CODEX_HOME = {json.dumps(str(codex_home))} }}
"""


@pytest.mark.timeout(120)
def test_a_refusal_stdout_never_printed_fails_the_run_naming_it(herd: Herd, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    command = replay(
        REAL / "codex-sandbox-refused.jsonl", REFUSED_RUN_STARTED, ORDINARY_RUN_STARTED
    )
    herd.write(session(repo, command, tmp_path / "codex-home"))
    herd.start().call("start", name="cx")
    status = herd.wait_state("cx", "completed", "failed", timeout_s=60)
    assert (status["state"], status["reason"]) == ("failed", "permission-denied"), (
        status,
        herd.events("cx"),
    )
    (failed,) = herd.events("cx", "failed")
    # The commit into read-only .git and the escalation Codex rejected; not the failing test.
    assert "was denied git, touch;" in failed["message"], failed
    assert len(herd.events("cx", "run-started")) == 1
    assert herd.events("cx", "run-exited")[0]["data"]["outcome"] == "permission-denied"


@pytest.mark.timeout(120)
def test_failing_tests_in_the_sandbox_are_no_refusal(herd: Herd, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    # The resumed run: its rollout holds the earlier run's refused commit (stamped before this
    # run began) and then only ordinary failures, one of which prints "Read-only file system"
    # about a file in the worktree (stdout alone would call that a refusal).
    command = replay(REAL / "codex-sandbox-ordinary-failures.jsonl", ORDINARY_RUN_STARTED)
    herd.write(session(repo, command, tmp_path / "codex-home"))
    herd.start().call("start", name="cx")
    status = herd.wait_state("cx", "completed", "failed", timeout_s=60)
    assert status["state"] == "completed", (status, herd.events("cx"))
    assert herd.events("cx", "run-exited")[0]["data"]["outcome"] == "success"
