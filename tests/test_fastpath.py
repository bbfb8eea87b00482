"""`herd status --json` and `herd ls --json` answered without click or pydantic print exactly
what the full command line prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_repo, sleeping_fleet, wait_until

from agentherd.supervisor.api import protocol
from agentherd.tui.cli import common, fastcall, fastpath

HERD = [sys.executable, "-c", "from agentherd.tui.cli.fastpath import main; main()"]
INSTALLED = str(Path(sys.executable).parent / "herd")
FULL = [sys.executable, "-c", "from agentherd.tui.cli.cli import main; main()"]


def test_the_fast_path_speaks_the_daemons_protocol_and_version() -> None:
    assert fastcall.PROTOCOL == protocol.PROTOCOL
    assert fastcall.installed_version() == protocol.HERD_VERSION
    assert fastpath.EXIT_FORBIDDEN == common.EXIT_FORBIDDEN
    assert fastpath.EXIT_INTERNAL == common.EXIT_INTERNAL


def test_only_status_and_ls_take_the_fast_path() -> None:
    assert fastpath._split(["status", "api", "--json"]) == (None, ["status", "api", "--json"])
    assert fastpath._split(["-c", "h.toml", "ls", "--json"]) == ("h.toml", ["ls", "--json"])
    assert fastpath._split(["status", "api"]) == (None, ["status", "api"])
    assert fastpath._split(["ls"]) == (None, ["ls"])
    for argv in (
        ["status", "a", "b"],
        ["ls", "--json", "--json"],
        ["logs", "--json"],
        ["ls", "-h"],
    ):
        assert fastpath._split(argv) is None


def test_fast_json_equals_the_full_command_lines(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "api")
    sleeper = f'command = ["{sys.executable}", "-c", "import time; time.sleep(60)"]\n'
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "api"\ncwd = "{repo}"\nprogress = "progress.txt"\n{sleeper}'
        f'[[session]]\nname = "old"\ncwd = "{repo}"\narchived = true\n{sleeper}'
    )
    (repo / "progress.txt").write_text("- caf\u00e9 \u2192 ok\n", encoding="utf-8")
    run = lambda argv: subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)  # noqa: E731
    assert run([*FULL, "up", "--no-tui"]).returncode == 0
    try:
        # The fleet's `--json` is indented by the daemon (pydantic's serializer): the same
        # text as the full command line's `json.dumps`, archived sessions out of `ls` only.
        wait_until(lambda: "\\u00e9" in run([*HERD, "status", "--json"]).stdout)
        listed = json.loads(run([*HERD, "ls", "--json"]).stdout)
        assert [s["session"] for s in listed] == ["api"]
        assert len(json.loads(run([*HERD, "status", "--json"]).stdout)) == 2
        for verb in (["status", "api", "--json"], ["status", "--json"], ["ls", "--json"]):
            fast, full = run([*HERD, *verb]), run([*FULL, *verb])
            assert fast.returncode == full.returncode == 0, fast.stderr + full.stderr
            assert json.loads(fast.stdout) == json.loads(full.stdout)
            assert fast.stdout == full.stdout
        # The installed command (bin/herd) prints the same, without importing socket, click or
        # pydantic (JSON is the stdlib's `json`, which brings `re`).
        timed = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
        for verb in (["status", "api", "--json"], ["status", "--json"], ["ls", "--json"]):
            installed = subprocess.run(
                [INSTALLED, *verb], cwd=tmp_path, capture_output=True, text=True, env=timed
            )
            expected = run([*FULL, *verb]).stdout
            assert installed.returncode == 0 and installed.stdout == expected, installed.stderr
            imported = {
                line.rpartition("|")[2].strip()
                for line in installed.stderr.splitlines()
                if line.startswith("import time:")
            }
            assert "agentherd.tui.cli.fastpath" in imported
            assert "json" in imported
            assert not imported & {"socket", "hashlib", "click", "pydantic"}, verb
        missing = run([*HERD, "status", "nope", "--json"])  # errors are the full CLI's own
        assert missing.returncode == 2 and "nope" in missing.stderr
    finally:
        assert run([*FULL, "down"]).returncode == 0


def test_only_a_plain_down_takes_the_fast_down() -> None:
    assert fastpath._down_config(["down"]) == (None,)
    assert fastpath._down_config(["-c", "h.toml", "down"]) == ("h.toml",)
    assert fastpath._down_config(["--config=h.toml", "down"]) == ("h.toml",)
    for argv in (["down", "--help"], ["up"], ["-c", "h.toml", "up"], ["--debug", "down"]):
        assert fastpath._down_config(argv) is None


def test_down_without_the_full_command_line_prints_what_it_prints(tmp_path: Path) -> None:
    """`herd down` started the stops only after importing click and pydantic: seconds on a
    loaded machine. The fast one must print the same and leave nothing running."""
    sleeping_fleet(tmp_path, "api", "web")
    run = lambda argv: subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)  # noqa: E731
    watch = (
        "import sys; from agentherd.tui.cli.fastpath import main; main(); "
        "print(sorted(m for m in ('click', 'pydantic') if m in sys.modules))"
    )
    assert run([*FULL, "up", "--no-tui"]).returncode == 0
    pid = int((tmp_path / ".herd" / "daemon.lock").read_text())
    down = subprocess.run(
        [sys.executable, "-c", watch, "down"], cwd=tmp_path, capture_output=True, text=True
    )
    assert down.returncode == 0, down.stderr
    assert down.stdout.splitlines() == [
        "api: stopped",
        "web: stopped",
        "herd: daemon stopped",
        "[]",
    ]
    assert fastpath._process_gone(pid)
    again = run([*HERD, "down"])  # no daemon now: the full command line's own error
    assert again.returncode == 2 and "no herd daemon is running" in again.stderr


class _ReapedStat:
    """/proc/<pid>/stat of a process reaped after the open: the read fails with ESRCH."""

    def __enter__(self) -> _ReapedStat:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def read(self) -> bytes:
        raise ProcessLookupError(3, "No such process")


def test_a_daemon_reaped_while_its_stat_is_read_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen under load: `herd down` died with a traceback when the daemon was reaped between
    opening its /proc stat file and reading it; it has ended, so `down` goes on."""
    monkeypatch.setattr(fastpath, "open", lambda *_: _ReapedStat(), raising=False)
    assert fastpath._process_gone(12345)


def test_the_fast_path_finds_the_daemons_socket_without_pathlib(tmp_path: Path) -> None:
    """Its own copy of `socket_path_for` (pathlib and typing cost a verb ~10 ms of CPU)."""
    from agentherd.supervisor.files.paths import socket_path_for

    config = tmp_path / "herd.toml"
    config.write_text("")
    expected = socket_path_for(tmp_path / ".herd")  # makes the runtime folder, as a daemon does
    assert fastcall.socket_path_of(str(config)) == str(expected)
    assert fastcall.config_path(str(config)) == str(config.resolve())
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, agentherd.tui.cli.fastpath; print(*sorted(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "pathlib" not in loaded and "typing" not in loaded


def test_a_fleet_across_hosts_goes_to_the_full_command_line(tmp_path: Path) -> None:
    """With a [cluster], `ls` and `status` ask the cluster (the full command line): the fast
    path asked the local daemon only."""
    config = tmp_path / "herd.toml"
    for text, across in (
        ('[[session]]\nname = "cluster-a"\n', False),
        ('[cluster]\nurl = "postgresql://h/db"\n', True),
        ('  cluster = { url = "postgresql://h/db" }\n', True),
    ):
        config.write_text(text)
        assert fastcall.across_hosts(str(config)) is across, text
        if across:
            assert fastcall.local_socket(str(config)) is None
