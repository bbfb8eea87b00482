"""A fleet's open files: the daemon raises its soft limit as far as the fleet needs (within the
hard one), and `herd check` says when the fleet cannot fit under the hard limit."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentherd.sessions.configchecks import FDS_PER_SESSION, open_files_needed

HERD = [sys.executable, "-c", "from agentherd.tui.cli.cli import main; main()"]


def _fleet(root: Path, sessions: int) -> Path:
    """A herd.toml of `sessions` sessions that never start by themselves, in one plain folder."""
    (root / "work").mkdir()
    blocks = [
        f'[[session]]\nname = "s{i}"\ncwd = "{root / "work"}"\ncommand = ["sleep", "60"]\n'
        for i in range(sessions)
    ]
    config = root / "herd.toml"
    config.write_text("\n".join(blocks))
    return config


def _limited(hard: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))


def test_herd_check_says_when_the_fleet_cannot_fit_the_open_file_limit(tmp_path: Path) -> None:
    """At 2,000 sessions the daemon holds ~4,000 files: past a hard limit of 4,096 the fleet
    failed session by session at start, with nothing said before."""
    _fleet(tmp_path, 300)
    hard = open_files_needed(300) - 1
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < hard:
        pytest.skip("the hard open-file limit here is lower than the test's")
    checked = subprocess.run(
        [*HERD, "check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=lambda: _limited(hard),  # noqa: PLW1509 - the child's own limit, nothing more
    )
    assert checked.returncode == 0, checked.stderr  # a warning: not every session runs at once
    line = next(x for x in checked.stderr.splitlines() if "open files" in x)
    assert line.startswith("warning: herd.toml: 300 sessions need up to")
    assert f"({FDS_PER_SESSION} a session" in line and f"hard limit is {hard:,}" in line
    fits = subprocess.run(
        [*HERD, "check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=lambda: _limited(hard + 1),  # noqa: PLW1509
    )
    assert fits.returncode == 0 and "open files" not in fits.stderr, fits.stderr


def test_the_daemon_raises_its_soft_limit_as_far_as_the_fleet_needs() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    sessions = 6000  # past the usual 16,384
    wanted = open_files_needed(sessions)
    if hard != resource.RLIM_INFINITY and hard < 16384 + 2:
        pytest.skip(f"the hard open-file limit here is {hard}")
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, {hard}))
        from agentherd.supervisor.api.server import raise_fd_limit
        print(raise_fd_limit({sessions}), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    expected = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    assert done.stdout.split() == [str(expected), str(expected)]
