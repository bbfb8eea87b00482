"""`herd events`, `herd logs NAME` and `herd report NAME` answered without click or pydantic
print exactly what the full command line prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import make_repo, wait_until

from agentherd.supervisor.api import fleetapi
from agentherd.tui.cli import fastread

HERD = [sys.executable, "-c", "from agentherd.tui.cli.fastpath import main; main()"]
INSTALLED = str(Path(sys.executable).parent / "herd")
FULL = [sys.executable, "-c", "from agentherd.tui.cli.cli import main; main()"]


def test_the_fast_reads_page_events_as_the_fleet_does() -> None:
    assert fastread.EVENTS_PAGE == fleetapi.EVENTS_PAGE


def test_events_logs_and_report_skip_click_and_pydantic(tmp_path: Path) -> None:
    """Every verb but ls and status cost ~0.3 s of CPU at 50 sessions (click and the pydantic
    models imported, herd.toml read twice): the target is 60 ms."""
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "api"\ncwd = "{make_repo(tmp_path / "api")}"\n'
        'command = ["sh", "-c", "echo done; exit 3"]\nrestart = "never"\n'
        f'[[session]]\nname = "web"\ncwd = "{make_repo(tmp_path / "web")}"\n'
        'command = ["sh", "-c", "echo fine"]\nrestart = "never"\n'
    )
    env = {**os.environ, "COLUMNS": "160"}
    run = lambda argv: subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)  # noqa: E731
    assert run([*FULL, "up", "--no-tui"]).returncode == 0
    try:
        wait_until(lambda: "run-exited" in run([*FULL, "events", "--session", "api"]).stdout)
        wait_until(lambda: "run-exited" in run([*FULL, "events", "--session", "web"]).stdout)
        verbs = (
            ["events"],
            ["events", "--json"],
            ["events", "--session", "web", "-n", "2"],
            ["events", "--since", "2", "--lines", "1", "--json"],
            ["events", "-n", "0"],
            ["report", "api"],
            ["report", "web", "--json"],
            ["logs", "api"],
            ["logs", "web", "-n", "1", "--raw"],
            ["logs", "--run", "1", "api"],
        )
        for verb in verbs:
            fast, full = run([*HERD, *verb]), run([*FULL, *verb])
            assert fast.returncode == full.returncode == 0, fast.stderr + full.stderr
            moment = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")  # a report says when it was made
            assert moment.sub("T", fast.stdout) == moment.sub("T", full.stdout), verb
        timed = {**env, "PYTHONPROFILEIMPORTTIME": "1"}
        for verb in (["events"], ["events", "--json"], ["report", "api"], ["logs", "api"]):
            installed = subprocess.run(
                [INSTALLED, *verb], cwd=tmp_path, capture_output=True, text=True, env=timed
            )
            assert installed.returncode == 0 and installed.stdout, installed.stderr
            imported = {
                line.rpartition("|")[2].strip()
                for line in installed.stderr.splitlines()
                if line.startswith("import time:")
            }
            assert not imported & {"click", "pydantic", "tomllib"}, verb
        for mistake in (
            ["report", "nope"],
            ["events", "-n", "-1"],
            ["events", "--bogus"],
            ["logs", "nope"],
        ):
            fast = run([*HERD, *mistake])  # the full command line's one `herd:` line, exit 2
            assert fast.returncode == 2 and fast.stderr.startswith("herd: "), fast.stderr
            assert len(fast.stderr.splitlines()) == 1, fast.stderr
    finally:
        assert run([*FULL, "down"]).returncode == 0
