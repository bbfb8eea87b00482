"""The dashboard's new-session dialog (`[keys] new`, `c`): filled by Pilot against a real
daemon, it adds the session through `herd new`'s code; the row appears and the agent starts.
A mistake stays in the dialog, said in one line, and writes nothing."""

from __future__ import annotations

import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import Herd, git, script
from test_dashboard import WAIT_S, until
from textual.pilot import Pilot
from textual.widgets import Input, Select, Static

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.newsession import NewSessionScreen
from agentherd.tui.dashboard.widgets import SessionTable


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def _repo(path: Path) -> None:
    """A repository whose run-agent.sh (the plain preset's command) says its prompt and waits."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "run-agent.sh").write_text('#!/bin/sh\necho "task: $1"\nexec sleep 60\n')
    (path / "run-agent.sh").chmod(0o755)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")


async def until_async(pilot: Pilot[Any], check: Callable[[], bool], what: str) -> None:
    """Let the app run until `check()`, asked in a thread (it calls the daemon), holds."""
    deadline = time.monotonic() + WAIT_S
    while not await anyio.to_thread.run_sync(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def _type(pilot: Pilot[Any], field: str, text: str) -> None:
    """Click into a field of the dialog and type `text`."""
    app = pilot.app
    app.screen.query_one(f"#{field}", Input).focus()
    await pilot.pause()
    app.screen.query_one(f"#{field}", Input).value = ""
    await pilot.press(*["space" if c == " " else c for c in text])


@pytest.mark.anyio
@pytest.mark.timeout(40)
async def test_the_new_session_dialog_adds_and_starts_a_session(herd: Herd) -> None:
    _repo(herd.root / "app")
    herd.write(f'[[session]]\nname = "first"\ncommand = {script("print(1)")}\n')
    client = herd.start()
    assert herd.daemon is not None
    app = HerdApp(herd.daemon.socket_path, config_path=herd.config_path)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 1, "the first row")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, NewSessionScreen), "the dialog")
        await _type(pilot, "name", "bad!")
        await _type(pilot, "repo", "app")
        await pilot.press("enter")
        problem = app.screen.query_one("#problem", Static)
        await until(pilot, lambda: "letters, digits" in str(problem.render()), "the mistake said")
        assert isinstance(app.screen, NewSessionScreen)  # still open, nothing written
        assert "bad" not in herd.config_path.read_text()
        app.screen.query_one("#agent", Select).value = "plain"  # runs ./run-agent.sh PROMPT
        await _type(pilot, "name", "login")
        await _type(pilot, "prompt", "fix the login")
        await _type(pilot, "budget", "5")
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, NewSessionScreen), "it closed")
        await until(pilot, lambda: "login" in table.order, "the new row")
        tree = (herd.root / "app.worktrees" / "login").resolve()
        assert app.worktrees["login"] == tree  # the editor and shell keys work there at once

        def running() -> bool:
            status = client.call("status", target="login")
            assert status["state"] not in ("failed", "completed"), status
            return bool(status["pid"])

        await until_async(pilot, running, "the new session's agent running")
    (session,) = [
        s for s in tomllib.loads(herd.config_path.read_text())["session"] if s["name"] == "login"
    ]
    assert (
        session["agent"] == "plain"
        and session["command"][-1] == "fix the login"
        and session["budget"]["cost_usd"] == 5
    )
    assert (herd.root / "app.worktrees" / "login" / "run-agent.sh").is_file()
