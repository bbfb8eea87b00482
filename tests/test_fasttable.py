"""`herd ls`, `herd status` and `herd status NAME` for people, answered without click or
pydantic, print exactly what the full command line prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import make_repo, wait_until

HERD = [sys.executable, "-c", "from agentherd.tui.cli.fastpath import main; main()"]
INSTALLED = str(Path(sys.executable).parent / "herd")
FULL = [sys.executable, "-c", "from agentherd.tui.cli.cli import main; main()"]


def test_the_tables_and_details_for_people_skip_click_and_pydantic(tmp_path: Path) -> None:
    """At 1,000 sessions `herd ls` cost 845 ms of CPU, most of it importing click and the
    pydantic models and reading herd.toml twice: the daemon's JSON is enough to print it."""
    sleeper = (
        f'["{sys.executable}", "-c", "import time; print(\'up\', flush=True); time.sleep(60)"]'
    )
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "api"\ncwd = "{make_repo(tmp_path / "api")}"\n'
        f"command = {sleeper}\n"
        f'[[session]]\nname = "web"\ncwd = "{make_repo(tmp_path / "web")}"\n'
        'command = ["sh", "-c", "echo done; exit 3"]\nrestart = "never"\n'
        "[session.budget]\ncost_usd = 5\n"
    )
    env = {**os.environ, "COLUMNS": "160"}
    run = lambda argv: subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)  # noqa: E731
    assert run([*FULL, "up", "--no-tui"]).returncode == 0
    try:
        wait_until(lambda: "exit" in run([*FULL, "status", "web"]).stdout, 30.0)
        wait_until(lambda: "up" in run([*FULL, "status", "api"]).stdout, 30.0)
        for verb in (["status", "web"], ["status", "api"], ["status", "web/1"], ["ls"]):
            fast, full = run([*HERD, *verb]), run([*FULL, *verb])
            assert fast.returncode == full.returncode == 0, fast.stderr + full.stderr
            if verb == ["ls"]:  # api's UPTIME ticks between the two
                fast.stdout, full.stdout = (
                    "\n".join(line[:40] for line in out.stdout.splitlines()) for out in (fast, full)
                )
            assert fast.stdout == full.stdout
        timed = {**env, "PYTHONPROFILEIMPORTTIME": "1"}
        for verb in (["ls"], ["status"], ["status", "api"]):
            installed = subprocess.run(
                [INSTALLED, *verb], cwd=tmp_path, capture_output=True, text=True, env=timed
            )
            assert installed.returncode == 0 and "api" in installed.stdout, installed.stderr
            imported = {
                line.rpartition("|")[2].strip()
                for line in installed.stderr.splitlines()
                if line.startswith("import time:")
            }
            assert not imported & {"click", "pydantic", "tomllib"}, verb
        missing = run([*HERD, "status", "nope"])  # errors are the full command line's own
        assert missing.returncode == 2 and "nope" in missing.stderr
    finally:
        assert run([*FULL, "down"]).returncode == 0
