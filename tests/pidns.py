"""Run one test inside a private PID namespace under a sentinel init, and judge its report.

A test marked `@pytest.mark.pidns` is not run in the outer pytest process: tests/conftest.py
re-runs it as `python -m pytest <nodeid>` inside `unshare --pid --fork --mount-proc`, with
tests/pidns_sentinel.py as PID 1 and a bystander process in the sentinel's process group.
The test passes only if the inner run passed, neither the sentinel nor the bystander got any
signal, the bystander is still alive, and no process of the namespace outlived the inner run.
A mistaken kill (pid 1, pid 0, group 0, "every process whose group reads 0") lands on the
sentinel or the bystander instead of on the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSIDE_VAR = "HERD_PIDNS_INSIDE"
"""Set in the inner run: the marked test's body runs there as a normal test."""

SENTINEL = Path(__file__).with_name("pidns_sentinel.py")

SENTINEL_EXTRA_S = 10.0
"""The sentinel's deadline exceeds the inner test's timeout by this much (startup, sweep)."""

OUTER_EXTRA_S = 3 * SENTINEL_EXTRA_S
"""The outer test's timeout exceeds the inner one by this much, so the inner one reports."""

INNER_OPTIONS = [
    # -rP: what a passing test printed (the chaos figures) reaches the report too.
    *["-q", "-rP", "-p", "no:cacheprovider"],
    # Not the outer run's addopts: no `-n` (one test needs no workers) and no `-m 'not slow'`
    # (a test picked by its id runs even when it is marked slow).
    *["-o", "addopts=", "-m", ""],
    # Only the plugins a marked test uses: hypothesis, syrupy, the snapshot plugin and xdist
    # cost the inner run about a second of imports each time on a loaded machine.
    *["--disable-plugin-autoload", "-p", "pytest_timeout", "-p", "anyio"],
]
"""How the inner pytest runs the one test: cheap to start, whatever the outer run was given."""


@dataclass
class PidnsReport:
    """What the sentinel saw while one test ran in its namespace."""

    inner_exit: int | None
    inner_output: str
    sentinel_signals: list[dict[str, Any]] = field(default_factory=list)
    bystander_signals: list[dict[str, Any]] = field(default_factory=list)
    bystander_alive: bool = True
    bystander_end: str | None = None
    leftovers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Everything that makes the test fail, one line each; empty means it passed."""
        found = []
        if self.inner_exit != 0:
            found.append(f"the test failed inside the namespace (pytest exit {self.inner_exit})")
        found += [f"the sentinel (PID 1) received {describe(s)}" for s in self.sentinel_signals]
        found += [f"the bystander received {describe(s)}" for s in self.bystander_signals]
        if not self.bystander_alive:
            found.append(f"the bystander died during the test: {self.bystander_end}")
        found += [f"left running: pid {p['pid']}: {p['cmdline']}" for p in self.leftovers]
        return found + self.notes

    def failure_message(self) -> str:
        lines = ["PID-namespace harness:", *(f"  - {p}" for p in self.problems())]
        lines.append("--- output of the test inside the namespace ---")
        return "\n".join([*lines, self.inner_output])


def describe(record: dict[str, Any]) -> str:
    return f"{record['signal']} from pid {record['from_pid']} ({record['from_cmdline']})"


def unshare_argv() -> list[str]:
    """unshare as root; elsewhere inside a user namespace where this user is root."""
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
    if os.geteuid() != 0:
        argv[1:1] = ["--user", "--map-root-user"]
    return argv


def run_in_pidns(nodeid: str, rootdir: Path, inner_timeout_s: float) -> PidnsReport:
    """Run the test `nodeid` in a fresh PID namespace and return the sentinel's report.

    The inner pytest applies its own timeout (`inner_timeout_s`); the sentinel kills the run
    a little after it, and unshare (--kill-child) takes the namespace down after that.
    """
    with tempfile.TemporaryDirectory(prefix="herd-pidns-") as folder:
        report_path = Path(folder) / "report.json"
        inner = [sys.executable, "-m", "pytest", *INNER_OPTIONS, nodeid]
        argv = [*unshare_argv(), sys.executable, str(SENTINEL), str(report_path)]
        argv += [str(inner_timeout_s + SENTINEL_EXTRA_S), "--", *inner]
        env = {**os.environ, INSIDE_VAR: "1"}
        done = subprocess.run(
            argv,
            cwd=rootdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=inner_timeout_s + 2 * SENTINEL_EXTRA_S,
            start_new_session=True,  # a Ctrl-C reaches the outer pytest, which ends unshare
        )
        if not report_path.exists():
            return PidnsReport(
                inner_exit=None,
                inner_output=done.stdout + done.stderr,
                notes=[f"the sentinel wrote no report (unshare exit {done.returncode})"],
            )
        return PidnsReport(**json.loads(report_path.read_text()))
