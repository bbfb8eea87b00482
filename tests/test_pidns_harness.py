"""The PID-namespace harness catches what it is for: signals to init or its group, leftovers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pidns import PidnsReport, run_in_pidns

ROOT = Path(__file__).resolve().parent.parent
CASES = "tests/pidns_misbehaving.py"


def run_case(name: str) -> PidnsReport:
    return run_in_pidns(f"{CASES}::{name}", ROOT, inner_timeout_s=60)


def test_a_signal_to_pid_1_is_reported_with_its_sender() -> None:
    report = run_case("test_signals_pid_1")
    assert report.inner_exit == 0, report.inner_output
    (received,) = report.sentinel_signals
    assert received["signal"] == "SIGTERM" and "os.kill(1" in received["from_cmdline"]
    assert report.problems() == [
        f"the sentinel (PID 1) received SIGTERM from pid {received['from_pid']} "
        f"({received['from_cmdline']})"
    ]


def test_a_signal_to_the_own_process_group_reaches_sentinel_and_bystander() -> None:
    report = run_case("test_signals_its_own_process_group")
    assert report.inner_exit == 0, report.inner_output
    assert [s["signal"] for s in report.sentinel_signals] == ["SIGTERM"]
    assert [s["signal"] for s in report.bystander_signals] == ["SIGTERM"]
    sender = report.bystander_signals[0]
    assert sender["from_pid"], "the sender's pid is known"
    # The sender may be gone before its command line is read (it exits right after the call).
    assert sender["from_cmdline"] in ("", None) or "killpg(0" in sender["from_cmdline"]
    assert len(report.problems()) == 2


def test_a_sweep_of_group_0_kills_the_bystander_and_is_reported() -> None:
    report = run_case("test_kills_every_process_whose_group_reads_0")
    assert report.inner_exit == 0, report.inner_output
    assert not report.bystander_alive and report.bystander_end == "killed by SIGKILL"
    assert report.problems() == ["the bystander died during the test: killed by SIGKILL"]


def test_a_process_left_running_is_reported() -> None:
    report = run_case("test_leaves_a_process_behind")
    assert report.inner_exit == 0, report.inner_output
    (left,) = report.leftovers
    assert "# leftover" in left["cmdline"]
    assert report.problems() == [f"left running: pid {left['pid']}: {left['cmdline']}"]


def test_a_test_that_behaves_passes() -> None:
    report = run_case("test_behaves")
    assert report.problems() == [], report.failure_message()


@pytest.mark.timeout(180)
def test_the_marker_fails_the_test_and_shows_why() -> None:
    """The whole path: a pidns-marked test run by pytest fails, naming the signal and sender."""
    case = f"{CASES}::test_signals_pid_1"
    done = subprocess.run(
        # -n 0: one test needs no workers (two would start two more pytests for it).
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", case],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the sentinel (PID 1) received SIGTERM from pid" in done.stdout
    assert "output of the test inside the namespace" in done.stdout
    assert "1 passed" in done.stdout, "the inner run passed; the harness failed it"
