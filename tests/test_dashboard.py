"""The dashboard driven by Textual's Pilot against a real daemon and real simulated agents."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import Herd
from textual.pilot import Pilot
from textual.widgets import Static

from agentherd.supervisor.api.client import Client
from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.help import HelpScreen
from agentherd.tui.dashboard.output_view import FleetOutput
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable

NAMES = ("alpha", "beta", "gamma")
WAIT_S = 30.0
"""Generous for a loaded CI machine; a passing run waits a fraction of this."""
SIMAGENT = [sys.executable, "-m", "agentherd.supervisor.sim.simagent"]


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def make_repo(folder: Path) -> None:
    """A git repo with a feature list of three failing items."""
    folder.mkdir()
    plan = [
        {"category": "functional", "description": f"feature {n}", "steps": [], "passes": False}
        for n in range(1, 4)
    ]
    (folder / "feature_list.json").write_text(json.dumps(plan))
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "feature_list.json"],
        ["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "plan"],
    ):
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


def write_config(root: Path) -> Path:
    """herd.toml with three slow simulated agents that stay running for the whole test."""
    blocks = []
    for name in NAMES:
        make_repo(root / name)
        command = [*SIMAGENT, "--delay", "60"]
        blocks.append(
            f'[[session]]\nname = "{name}"\ncwd = "{name}"\nagent = "claude"\n'
            f'command = {json.dumps(command)}\nplan = "feature_list.json"\n'
        )
    path = root / "herd.toml"
    path.write_text('[defaults]\nrestart = "never"\nstop_grace = "5s"\n\n' + "\n".join(blocks))
    return path


@pytest.fixture
def fleet(herd: Herd) -> Iterator[tuple[Path, Client]]:
    """A daemon in a thread with three running agents (the autouse fixture checks leftovers)."""
    write_config(herd.root)
    client = herd.start()
    client.call("up")
    assert herd.daemon is not None
    yield herd.daemon.socket_path, client


async def until(pilot: Pilot[Any], predicate: Callable[[], bool], what: str) -> None:
    """Let the app run until `predicate()` holds; fail after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def until_daemon(
    pilot: Pilot[Any],
    client: Client,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    what: str,
) -> dict[str, Any]:
    """Let the app run until the daemon's status of `name` satisfies `predicate`; return it."""
    deadline = time.monotonic() + WAIT_S
    while True:
        status: dict[str, Any] = await anyio.to_thread.run_sync(
            lambda: client.call("status", target=name)
        )
        if predicate(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last status {status}")
        await pilot.pause(0.05)


def cell(app: HerdApp, name: str, column: str) -> str:
    """The text of one cell of the session table."""
    return str(app.query_one(SessionTable).get_cell(name, column))


async def select(pilot: Pilot[Any], app: HerdApp, name: str) -> None:
    """Put the table's cursor on the row of `name`."""
    table = app.query_one(SessionTable)
    table.move_cursor(row=table.get_row_index(name))
    await pilot.pause()
    assert table.selected_session == name


def running(status: dict[str, Any]) -> bool:
    """The session's agent is up."""
    return status["state"] == "running" and status["pid"] is not None


@pytest.mark.pidns
@pytest.mark.anyio
async def test_rows_appear_and_start_stop_restart_kill_drive_the_daemon(
    fleet: tuple[Path, Client],
) -> None:
    """Each key does what its footer says, seen both in the table and by the daemon."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(
            pilot, lambda: app.query_one(SessionTable).row_count == len(NAMES), "a row per session"
        )
        await until(
            pilot,
            lambda: all(cell(app, n, "state") == "running" for n in NAMES),
            "every row running",
        )
        assert "3 running" in str(app.query_one("#summary", Static).render())

        await select(pilot, app, "beta")
        await pilot.press("s")
        await until_daemon(pilot, client, "beta", lambda s: s["state"] == "stopped", "stopped")
        await until(
            pilot,
            lambda: cell(app, "beta", "state").startswith("stopped"),
            "the row to say stopped",
        )

        await pilot.press("s")
        started = await until_daemon(pilot, client, "beta", running, "started again")
        assert started["handle"] == "beta/2"

        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "restart asks first")
        await pilot.press("y")
        restarted = await until_daemon(
            pilot, client, "beta", lambda s: running(s) and s["handle"] != "beta/2", "restart"
        )
        assert restarted["handle"] == "beta/3"

        await select(pilot, app, "gamma")
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.question == "Kill gamma?"
        assert "SIGKILL" in app.screen.consequence
        await pilot.press("y")
        killed = await until_daemon(
            pilot, client, "gamma", lambda s: s["state"] == "stopped", "killed"
        )
        assert killed["pid"] is None
        events = client.call("events", session="gamma")
        assert [e["data"].get("kill") for e in events if e["kind"] == "stopping"] == [True]
        alpha = await until_daemon(pilot, client, "alpha", running, "alpha untouched")
        assert alpha["handle"] == "alpha/1"


@pytest.mark.pidns
@pytest.mark.anyio
async def test_kill_answered_no_leaves_the_agent_running_and_the_table_live(
    fleet: tuple[Path, Client],
) -> None:
    """`n` closes the confirmation and sends nothing; meanwhile rows update and keys wait."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == len(NAMES), "rows")
        await select(pilot, app, "alpha")
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("s", "r")  # session keys do nothing while the dialog is open
        await anyio.to_thread.run_sync(lambda: client.call("stop", name="beta"))
        await until(
            pilot,
            lambda: cell(app, "beta", "state").startswith("stopped"),
            "the table to update behind the dialog",
        )
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "it to close")
        status = await until_daemon(pilot, client, "alpha", running, "alpha running")
        assert status["handle"] == "alpha/1"


@pytest.mark.anyio
async def test_output_view_shows_the_selected_sessions_output(fleet: tuple[Path, Client]) -> None:
    """At 120x40 the selected session's output shows under the table without a key; `l`
    closes it and `l` again opens it."""
    socket_path, _ = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == len(NAMES), "rows")
        await select(pilot, app, "beta")
        pane = app.query_one(FleetOutput)
        await until(
            pilot,
            lambda: any("agent session started" in line for line in pane.lines.shown_lines()),
            "the agent's first line in the output view",
        )
        assert app.output_session == "beta"
        assert app.query_one("#output-pane").display
        await pilot.press("l")
        await until(pilot, lambda: not app.query_one("#output-pane").display, "it to close")
        assert app.output_session is None
        await pilot.press("l")
        await until(pilot, lambda: app.output_session == "beta", "it to open again")
        assert app.query_one("#output-pane").display


@pytest.mark.anyio
async def test_q_quits_and_leaves_the_agents_running(fleet: tuple[Path, Client]) -> None:
    """The daemon owns the agents: closing the dashboard stops none of them."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == len(NAMES), "rows")
        await pilot.press("q")
    assert app.return_code == 0
    statuses = client.call("ls")
    assert [s["state"] for s in statuses] == ["running"] * len(NAMES)
    assert all(s["pid"] is not None for s in statuses)


@pytest.mark.anyio
async def test_keys_from_herd_toml_rebind_actions(fleet: tuple[Path, Client]) -> None:
    """`[keys] restart = "R"` moves restart to R; an unknown action name is only a warning."""
    socket_path, client = fleet
    app = HerdApp(socket_path, keys={"restart": "R", "no-such-action": "x"})
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == len(NAMES), "rows")
        await select(pilot, app, "alpha")
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "restart asks first")
        await pilot.press("y")
        status = await until_daemon(
            pilot, client, "alpha", lambda s: running(s) and s["handle"] == "alpha/2", "restart"
        )
        assert status["restarts"] == 0
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        assert ("R", "Stop the selected session gracefully and begin a new task (asks first)") in (
            help_screen.lines
        )


@pytest.mark.anyio
async def test_banner_says_the_daemon_is_gone_instead_of_crashing(
    fleet: tuple[Path, Client],
) -> None:
    """`herd down` elsewhere turns into a banner; keys then fail as notices, not tracebacks."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == len(NAMES), "rows")
        await anyio.to_thread.run_sync(lambda: client.call("down", socket_timeout_s=None))
        banner = app.query_one("#banner", Static)
        await until(pilot, lambda: banner.has_class("-visible"), "the banner")
        assert str(banner.render()).startswith("daemon not reachable: ")
        await select(pilot, app, "alpha")
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "restart asks first")
        await pilot.press("y")
        await until(
            pilot, lambda: any(n.severity == "error" for n in app._notifications), "an error notice"
        )
        assert app.is_running


def git_out(repo: Path, *args: str) -> str:
    """Run git in `repo` and return its stdout."""
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def test_create_demo_makes_six_repos_and_a_valid_herd_toml(tmp_path: Path) -> None:
    """Six git repos with failing plans, and a herd.toml of six distinct simulated agents."""
    from agentherd.sessions.config import load_config
    from agentherd.supervisor.sim.demo import DEMO_BUDGET_USD, create_demo

    config = load_config(create_demo(tmp_path / "demo"))
    assert len(config.sessions) == 6
    flags = set()
    for session in config.sessions:
        assert session.cwd == (tmp_path / "demo" / session.name).resolve()
        assert git_out(session.cwd, "log", "--format=%an <%ae>|%s").splitlines() == [
            "herd-demo <demo@localhost>|Initial setup: feature_list.json and project structure"
        ]
        assert git_out(session.cwd, "branch", "--show-current").strip() == "main"
        assert git_out(session.cwd, "status", "--porcelain") == ""
        plan = json.loads((session.cwd / "feature_list.json").read_text())
        assert 6 <= len(plan) <= 10
        assert all(set(item) == {"category", "description", "steps", "passes"} for item in plan)
        assert not any(item["passes"] for item in plan)
        assert "0/" in (session.cwd / "claude-progress.txt").read_text()
        assert session.agent == "claude" and session.plan and session.progress
        assert session.budget.cost_usd == DEMO_BUDGET_USD, "the demo's Spend tab has a limit"
        assert isinstance(session.command, list) and isinstance(session.resume, list)
        assert session.command[:3] == SIMAGENT
        assert session.resume[-2:] == ["--resume", "{session_id}"]
        flags.add(
            " ".join(
                a
                for a in session.command
                if a.startswith("--")
                and a not in ("--plan", "--progress", "--delay", "--jitter", "--flood")
            )
        )
    assert flags == {
        "",
        "--crash-at --crash-once",
        "--stall-at --stall-once",
        "--one-per-run",
        "--tamper-at",
    }
    by_name = {s.name: s for s in config.sessions}
    assert by_name["auth-refactor"].restart == "on-failure"
    assert by_name["docs-site"].restart == "until-done"
    assert by_name["search-index"].budget.stall == 30
    assert by_name["search-index"].on_drift == {"stalled": "restart"}


def test_create_demo_repeats_behaviours_with_numbered_names(tmp_path: Path) -> None:
    """More than six sessions reuse the behaviours under numbered names; a second run refuses."""
    from agentherd.sessions.config import load_config
    from agentherd.supervisor.sim.demo import create_demo

    path = create_demo(tmp_path, sessions=8)
    names = [s.name for s in load_config(path).sessions]
    assert names[6:] == ["api-migration-2", "auth-refactor-2"]
    assert len(set(names)) == 8
    with pytest.raises(FileExistsError):
        create_demo(tmp_path)


def test_a_demo_repo_is_workable_by_the_simulated_agent(tmp_path: Path) -> None:
    """The simulated agent accepts the demo's plan: one feature done, passing and committed."""
    from agentherd.supervisor.sim.demo import create_demo

    create_demo(tmp_path, sessions=1)
    repo = tmp_path / "api-migration"
    result = subprocess.run(
        [*SIMAGENT, "--delay", "0", "--one-per-run"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    plan = json.loads((repo / "feature_list.json").read_text())
    assert [item["passes"] for item in plan[:2]] == [True, False]
    assert len(git_out(repo, "log", "--format=%s").splitlines()) == 2


def test_the_details_strip_says_where_the_selected_session_stands() -> None:
    """Plan drift, the checkpoint's verdict, the progress gist and warnings, in a few lines."""
    from agentherd.sessions.status import SessionStatus
    from agentherd.tui.dashboard.rows import detail_lines

    status = SessionStatus.model_validate(
        {
            "session": "api",
            "plan": {
                "passing": 3,
                "total": 7,
                "changed_items": [{"index": 2, "change": "removed", "description": "x"}],
            },
            "checkpoint": {
                "sha": "6df08f15ec99",
                "at": "2026-11-30T02:00:00Z",
                "verified": False,
                "subject": "feat: \x1b[2Jx",
            },
            "progress": {"latest": ["## Session 4 (coding)\n- did x\n- Status: 3/7 tests passing"]},
            "warnings": [{"seq": 9, "at": "x", "kind": "verify-failed", "message": "exit 1"}],
        }
    )
    assert detail_lines(status) == [
        "api  plan 3/7 passing; 1 change(s) against the baseline",
        "  checkpoint 6df08f15ec FAILS verification: feat: ^[[2Jx",
        "  progress: Session 4 (coding): Status: 3/7 tests passing",
        "  ⚠ verify-failed: exit 1",
    ]
