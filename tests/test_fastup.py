"""`herd up --no-tui` with no daemon: started without click or pydantic in the command line,
printing what the full command line prints, and every problem with herd.toml still worded by
the full command line (exit 2, no daemon left behind)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import make_repo

from agentherd.sessions.states import ACTIVE_STATES
from agentherd.tui.cli import fastup

FULL = [sys.executable, "-c", "from agentherd.tui.cli.cli import main; main()"]
WATCHED = [
    sys.executable,
    "-c",
    "import sys; from agentherd.tui.cli.fastpath import main; main(); "
    "print(sorted(m for m in ('click', 'pydantic') if m in sys.modules))",
]
SLEEPER = f'command = ["{sys.executable}", "-c", "import time; time.sleep(60)"]\n'


def test_the_fast_up_knows_the_active_states() -> None:
    assert {str(s) for s in ACTIVE_STATES} == fastup.ACTIVE


def test_only_a_plain_up_without_the_dashboard_takes_the_fast_up() -> None:
    assert fastup.up_config(["up", "--no-tui"]) == (None,)
    assert fastup.up_config(["-c", "h.toml", "up", "--no-tui"]) == ("h.toml",)
    assert fastup.up_config(["--config=h.toml", "up", "--no-tui"]) == ("h.toml",)
    for argv in (["up"], ["up", "--no-tui", "api"], ["up", "api", "--no-tui"], ["--debug", "up"]):
        assert fastup.up_config(argv) is None


def _fleet(folder: Path, sessions: str) -> Path:
    folder.mkdir()
    (folder / "herd.toml").write_text(sessions)
    return folder


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_fast_up_starts_the_fleet_and_prints_what_the_full_one_prints(tmp_path: Path) -> None:
    def config(folder: Path) -> str:
        return (
            "".join(
                f'[[session]]\nname = "{name}"\ncwd = "{make_repo(folder / name)}"\n{SLEEPER}'
                for name in ("api", "web")
            )
            + f'[[session]]\nname = "later"\ncwd = "{make_repo(folder / "later")}"\n'
            + (f"autostart = false\n{SLEEPER}")
        )

    full_dir = tmp_path / "full"
    full_dir.mkdir()
    full_dir = _fleet(full_dir / "f", config(full_dir))
    fast_dir = tmp_path / "fast"
    fast_dir.mkdir()
    fast_dir = _fleet(fast_dir / "f", config(fast_dir))
    full = _run([*FULL, "up", "--no-tui"], full_dir)
    try:
        fast = _run([*WATCHED, "up", "--no-tui"], fast_dir)
        try:
            assert full.returncode == fast.returncode == 0, full.stderr + fast.stderr
            assert fast.stdout.splitlines()[-1] == "[]"  # neither click nor pydantic loaded
            assert fast.stdout.splitlines()[:-1] == full.stdout.splitlines()
            assert full.stdout.splitlines() == [
                "herd: started the daemon; 2 of 3 session(s) active",
                "  api/1",
                "  web/1",
            ]
            assert fast.stderr == full.stderr == ""
            states = _run([*FULL, "ls"], fast_dir)
            assert states.stdout.count("running") == 2, states.stdout
        finally:
            assert _run([*FULL, "down"], fast_dir).returncode == 0
    finally:
        assert _run([*FULL, "down"], full_dir).returncode == 0


def test_a_problem_in_herd_toml_is_the_full_command_lines_to_word(tmp_path: Path) -> None:
    """The spawned daemon checks herd.toml as `herd up` does and refuses to serve: the person
    sees the full command line's line and exit code, and no daemon is left running."""
    folder = _fleet(
        tmp_path / "f",
        f'[[session]]\nname = "api"\ncwd = "{make_repo(tmp_path / "api")}"\n'
        'command = ["no-such-agent-program"]\n',
    )
    up = _run([*WATCHED, "up", "--no-tui"], folder)
    full = _run([*FULL, "up", "--no-tui"], folder)
    assert up.returncode == full.returncode == 2, up.stderr
    assert "'no-such-agent-program' is not on PATH" in up.stderr
    assert up.stderr == full.stderr
    assert not (folder / ".herd" / "state.db").exists()  # no daemon served
    assert "left to the full `herd up`" in (folder / ".herd" / "daemon.log").read_text()
