"""Tests that make the mistakes the PID-namespace harness must catch (run by test_pidns_harness).

The file name does not match test_*.py, so pytest runs these only when named explicitly. Each
is marked pidns: run through pytest they fail; tests/test_pidns_harness.py checks how.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap

import pytest
from conftest import PY, TEST_ID_VAR

pytestmark = pytest.mark.pidns


def run_python(code: str, **options: object) -> None:
    subprocess.run([PY, "-c", textwrap.dedent(code)], check=True, timeout=30, **options)


def test_signals_pid_1() -> None:
    """What `stop_tree` does with a run whose pid was recorded as 1."""
    # The sender stays a moment, so the sentinel reads its command line (a zombie has none).
    run_python("import os, signal, time; os.kill(1, signal.SIGTERM); time.sleep(2)")


def test_signals_its_own_process_group() -> None:
    """What `os.killpg(0, ...)` does: the caller's group (here the sentinel's, and pytest's)."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # pytest survives to report
    try:
        run_python("import os, signal; os.killpg(0, signal.SIGTERM)")
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_kills_every_process_whose_group_reads_0() -> None:
    """Case 1's sweep: from inside a namespace, init's group (and its members') reads 0."""
    run_python(
        f"""
        import os, signal
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (os.getpid(), {os.getpid()}):
                try:
                    if os.getpgid(int(name)) == 0:
                        os.kill(int(name), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        """,
        start_new_session=True,
    )


def test_leaves_a_process_behind() -> None:
    """A process that escaped the test's own leftover check (no HERD_TEST_ID)."""
    env = {k: v for k, v in os.environ.items() if k != TEST_ID_VAR}
    subprocess.Popen(
        [PY, "-c", "import time; time.sleep(600)  # leftover"], env=env, start_new_session=True
    )


def test_behaves() -> None:
    """Signals only its own child: nothing to report."""
    child = subprocess.Popen([PY, "-c", "import time; time.sleep(600)"])
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=10) == -signal.SIGTERM
