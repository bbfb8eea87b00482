"""Tests of the simulated agent, run as a real process in real git repositories."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

SIM = [sys.executable, "-m", "agentherd.supervisor.sim.simagent"]
TIMEOUT = 60  # seconds for one simagent run; generous for a loaded CI machine
LINE_WAIT = 30  # seconds to wait for an expected line from a live simagent
QUIET = 0.5  # seconds a stalled agent must stay silent and commit-free
FAST = ["--delay", "0"]


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return stdout."""
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def subjects(repo: Path) -> list[str]:
    """Return the commit subjects of HEAD, newest first (empty before the first commit)."""
    proc = subprocess.run(
        ["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True, check=False
    )
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def env(**extra: str) -> dict[str, str]:
    """Return the test environment without an inherited rescue ref, plus ``extra``."""
    base = {k: v for k, v in os.environ.items() if k != "HERD_RESCUE_REF"}
    return base | extra


def sim(repo: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run simagent in ``repo`` to completion."""
    return subprocess.run(
        [*SIM, *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env(**extra_env),
        check=False,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    """Parse every line of ``stdout`` as JSON (fails on any other line)."""
    return [json.loads(line) for line in stdout.splitlines()]


def json_events(stdout: str) -> list[dict[str, Any]]:
    """Parse the lines of ``stdout`` that are JSON objects, skipping noise."""
    found = []
    for line in stdout.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def plan(repo: Path) -> list[dict[str, Any]]:
    """Read the feature list of ``repo``."""
    data: list[dict[str, Any]] = json.loads((repo / "feature_list.json").read_text())
    return data


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty git repository."""
    git(tmp_path, "init", "-q")
    return tmp_path


def pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    """Copy the lines of ``stream`` into ``lines`` until it closes."""
    for line in stream:
        lines.put(line)


@contextmanager
def live(repo: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """Start simagent, feed its stdout lines into a queue, and kill it on the way out."""
    proc = subprocess.Popen(
        [*SIM, *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    reader = threading.Thread(target=pump, args=(proc.stdout, lines))
    reader.start()
    try:
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=TIMEOUT)
        reader.join(timeout=TIMEOUT)
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()


def wait_line(lines: queue.Queue[str], match: Callable[[str], bool]) -> str:
    """Return the first queued line that ``match`` accepts, failing after LINE_WAIT."""
    while True:
        line = lines.get(timeout=LINE_WAIT)
        if match(line):
            return line


def is_stall_line(line: str) -> bool:
    """Tell whether ``line`` is the line a stalling simagent prints last."""
    return "Waiting for the test of feature" in line


def test_init_creates_plan_progress_and_commit(repo: Path) -> None:
    """--init writes a plan of N failing features, a progress file and the first commit."""
    proc = sim(repo, "--init", "3", "--one-per-run", *FAST)
    assert proc.returncode == 0, proc.stderr
    items = plan(repo)
    assert len(items) == 3
    assert all(item["passes"] is False for item in items)
    assert items[0]["description"].startswith("Feature 1: ")
    assert set(items[0]) == {"category", "description", "steps", "passes"}
    progress = (repo / "claude-progress.txt").read_text()
    assert "## Session 1 (initializer)" in progress
    assert progress.rstrip().endswith("- Status: 0/3 tests passing")
    assert (repo / ".gitignore").exists()
    assert subjects(repo) == ["Initial setup: feature_list.json and project structure"]
    assert git(repo, "status", "--porcelain") == ""
    assert events(proc.stdout)[-1]["type"] == "result"


def test_no_plan_without_init_is_a_usage_error(repo: Path) -> None:
    """Without a plan and without --init, simagent says why on stderr and exits 2."""
    proc = sim(repo, *FAST)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert "feature_list.json" in proc.stderr


def test_full_run_passes_every_feature(repo: Path) -> None:
    """A full run commits once per feature and prints only stream-json lines."""
    proc = sim(repo, "--init", "3", *FAST)
    assert proc.returncode == 0, proc.stderr
    lines = events(proc.stdout)
    init, result = lines[0], lines[-1]
    assert (init["type"], init["subtype"], init["model"]) == ("system", "init", "claude-sonnet-4-5")
    assert "rescue_ref" not in init
    assert result["type"] == "result"
    assert result["is_error"] is False
    assert result["subtype"] == "success"
    assert result["session_id"] == init["session_id"]
    assert all(item["passes"] for item in plan(repo))
    assert len(subjects(repo)) == 4
    assert all(s.startswith("Implement ") and s.endswith(" - verified") for s in subjects(repo)[:3])
    assert git(repo, "status", "--porcelain") == ""
    assistant = [line["message"] for line in lines if line["type"] == "assistant"]
    assert len({m["id"] for m in assistant}) == len(assistant) == result["num_turns"]
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
        assert result["usage"][key] == sum(m["usage"][key] for m in assistant)
    assert result["total_cost_usd"] == pytest.approx(4 * 0.05)
    progress = (repo / "claude-progress.txt").read_text()
    assert progress.count("(coding) — ") == 3
    assert progress.rstrip().endswith("- Status: 3/3 tests passing")
    check = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert check.returncode == 0, check.stdout


def test_usage_is_deterministic(tmp_path: Path) -> None:
    """Two runs of the same plan report the same token counts."""
    usages = []
    for name in ("a", "b"):
        repo = tmp_path / name
        repo.mkdir()
        git(repo, "init", "-q")
        proc = sim(repo, "--init", "2", *FAST)
        usages.append(
            [x["message"]["usage"] for x in events(proc.stdout) if x["type"] == "assistant"]
        )
    assert usages[0] == usages[1]


def test_crash_leaves_a_half_edit(repo: Path) -> None:
    """--crash-at 2 commits feature 1, then dies mid-edit with exit 3 and no result line."""
    proc = sim(repo, "--init", "3", "--crash-at", "2", *FAST)
    assert proc.returncode == 3
    assert not proc.stdout.endswith("\n")
    assert all(x["type"] != "result" for x in json_events(proc.stdout))
    assert subjects(repo)[0].startswith("Implement Feature 1")
    status = git(repo, "status", "--porcelain").splitlines()
    assert any(line.startswith(" M ") for line in status)
    assert "?? src/wip_2.py" in status
    assert [item["passes"] for item in plan(repo)] == [True, False, False]


def test_crash_once_then_restart_succeeds(repo: Path) -> None:
    """With --crash-once the second run passes the crash point and finishes."""
    args = ("--init", "3", "--crash-at", "2", "--crash-once", *FAST)
    assert sim(repo, *args).returncode == 3
    proc = sim(repo, *args)
    assert proc.returncode == 0, proc.stderr
    assert all(item["passes"] for item in plan(repo))
    assert json_events(proc.stdout)[-1]["type"] == "result"
    assert (repo / ".git" / "simagent-crashed-2").exists()


def test_resume_keeps_the_session_id(repo: Path) -> None:
    """--resume reuses the id; the rescue ref from the environment is reported too."""
    first = sim(repo, "--init", "2", "--session-id", "pinned-1", *FAST, "--one-per-run")
    assert events(first.stdout)[0]["session_id"] == "pinned-1"
    ref = "refs/herd/demo/rescue/2"
    proc = sim(repo, "--resume", "pinned-1", "--one-per-run", *FAST, HERD_RESCUE_REF=ref)
    assert proc.returncode == 0, proc.stderr
    lines = events(proc.stdout)
    assert lines[0]["session_id"] == lines[-1]["session_id"] == "pinned-1"
    assert lines[0]["rescue_ref"] == ref
    progress = (repo / "claude-progress.txt").read_text()
    assert "Resumed session pinned-1" in progress
    assert f"Previous edits were rolled back; saved at {ref}" in progress


def test_one_per_run_does_one_feature_each_time(repo: Path) -> None:
    """--one-per-run does the initializer, then one feature per run, then reports done."""
    for expected in range(1, 4):
        proc = sim(repo, "--init", "2", "--one-per-run", *FAST)
        assert proc.returncode == 0, proc.stderr
        assert events(proc.stdout)[-1]["type"] == "result"
        assert len(subjects(repo)) == expected
        assert sum(item["passes"] for item in plan(repo)) == expected - 1
    proc = sim(repo, "--init", "2", "--one-per-run", *FAST)
    result = events(proc.stdout)[-1]
    assert proc.returncode == 0
    assert result["is_error"] is False
    assert "Nothing left" in result["result"]
    assert len(subjects(repo)) == 3


def test_tamper_changes_the_plan(repo: Path) -> None:
    """--tamper-at drops the last feature and rewords the one it reached."""
    sim(repo, "--init", "4", "--one-per-run", *FAST)
    before = plan(repo)
    proc = sim(repo, "--tamper-at", "2", *FAST)
    assert proc.returncode == 0, proc.stderr
    after = plan(repo)
    assert len(after) == 3
    assert after[1]["description"] != before[1]["description"]
    assert [after[0]["description"], after[2]["description"]] == [
        before[0]["description"],
        before[2]["description"],
    ]


def test_stall_prints_then_goes_quiet(repo: Path) -> None:
    """--stall-at prints one line, then neither prints nor commits until killed."""
    with live(repo, "--init", "3", "--stall-at", "2", *FAST) as (proc, lines):
        wait_line(lines, is_stall_line)
        head = git(repo, "rev-parse", "HEAD")
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=QUIET)
        assert git(repo, "rev-parse", "HEAD") == head
        assert lines.empty()
        assert subjects(repo)[0].startswith("Implement Feature 1")
    assert proc.returncode == -signal.SIGKILL


def test_fail_at_reports_an_error_and_exits_zero(repo: Path) -> None:
    """--fail-at ends with an is_error result (subtype success) and exit code 0."""
    proc = sim(repo, "--init", "3", "--fail-at", "2", *FAST)
    assert proc.returncode == 0
    result = events(proc.stdout)[-1]
    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "success", True)
    assert [item["passes"] for item in plan(repo)] == [True, False, False]


def test_flood_emits_escape_sequences(repo: Path) -> None:
    """--flood adds plain-text noise with ANSI escapes and carriage returns."""
    args = [*SIM, "--init", "2", "--flood", "4", *FAST]
    proc = subprocess.run(args, cwd=repo, capture_output=True, timeout=TIMEOUT, env=env())
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b[31m" in proc.stdout
    assert b"\r" in proc.stdout
    noise = [line for line in proc.stdout.split(b"\n") if line and not line.startswith(b"{")]
    assert len(noise) == 2 * 4
    assert json_events(proc.stdout.decode())[-1]["type"] == "result"


def test_sigterm_stops_promptly(repo: Path) -> None:
    """By default SIGTERM ends simagent at once, without a traceback."""
    with live(repo, "--init", "2", "--stall-at", "1", *FAST) as (proc, lines):
        wait_line(lines, is_stall_line)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=LINE_WAIT) == -signal.SIGTERM
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()


def test_ignore_sigterm_survives_sigterm(repo: Path) -> None:
    """--ignore-sigterm keeps running after SIGTERM; only SIGKILL ends it."""
    with live(repo, "--init", "2", "--stall-at", "1", "--ignore-sigterm", *FAST) as (proc, lines):
        wait_line(lines, is_stall_line)
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=QUIET)
        proc.kill()
        assert proc.wait(timeout=LINE_WAIT) == -signal.SIGKILL
