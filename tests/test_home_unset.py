"""herd without `HOME` (a systemd unit, `env -i`, a container): every verb works, agents get
the environment herd was given (no invented HOME), and a `~` that cannot be expanded is a
person's error, not a traceback."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from pathlib import Path

import pytest
from conftest import HERD, wait_until

from agentherd.sessions.config import ConfigError, find_config


def without_home(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_RUNTIME_DIR")}
    return subprocess.run(
        [HERD, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.pidns
def test_every_verb_works_without_home(tmp_path: Path) -> None:
    agent = json.dumps(["/bin/sh", "-c", 'echo "home=${HOME-unset}"; exec sleep 60'])
    (tmp_path / "herd.toml").write_text(
        f'[[session]]\nname = "a"\ncommand = {agent}\nagent = "claude"\nstop_grace = "2s"\n'
    )
    assert without_home(tmp_path, "check").returncode == 0
    up = without_home(tmp_path, "up", "--no-tui")
    try:
        assert up.returncode == 0, up.stderr
        wait_until(
            lambda: "home=unset" in without_home(tmp_path, "logs", "a").stdout,
            what="the agent's first line",
        )
        for verb in (["ls"], ["status", "a", "--json"], ["events"], ["report", "a"]):
            done = without_home(tmp_path, *verb)
            assert done.returncode == 0 and done.stderr == "", (verb, done.stderr)
    finally:
        down = without_home(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    after = without_home(tmp_path, "ls")
    assert after.returncode == 0 and "stopped" in after.stdout


def test_a_tilde_with_no_home_to_expand_is_a_person_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No HOME and no passwd entry (an arbitrary container uid): `~` names no folder."""
    monkeypatch.delenv("HOME", raising=False)

    def no_such_user(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_such_user)
    with pytest.raises(ConfigError) as refused:
        find_config("~/herd.toml")
    [problem] = refused.value.problems
    assert "~/herd.toml" in str(problem) and "HOME" in str(problem)
