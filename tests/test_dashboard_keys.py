"""Every key of the fleet view and the session screen, pressed against a real daemon."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from conftest import Herd, wait_until
from test_dashboard import NAMES, cell, fleet, running, select, until, until_daemon, write_config
from textual.widgets import Input

from agentherd.sessions.config import load_config
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.ondisk import AsyncDiskClient
from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.output_view import OutputView
from agentherd.tui.dashboard.session_screen import SessionScreen
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable

__all__ = ["fleet"]  # the fixture, shared with test_dashboard


def rows(app: HerdApp) -> list[str]:
    """Session names in the table's order."""
    return list(app.query_one(SessionTable)._order)


async def all_rows(pilot, app: HerdApp) -> None:
    await until(pilot, lambda: app.query_one(SessionTable).row_count == len(NAMES), "rows")


@pytest.mark.anyio
async def test_j_and_k_move_the_cursor_and_never_kill(fleet: tuple[Path, Client]) -> None:
    """A vim user's j/k move down and up; no dialog opens, every agent keeps running."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        table = app.query_one(SessionTable)
        await select(pilot, app, rows(app)[0])
        await pilot.press("j", "j")
        assert table.selected_session == rows(app)[2]
        await pilot.press("k")
        assert table.selected_session == rows(app)[1]
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen)
    assert all(running(s) for s in client.call("ls"))


@pytest.mark.pidns
@pytest.mark.anyio
async def test_p_pauses_and_resumes_the_selected_session(fleet: tuple[Path, Client]) -> None:
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        await until(pilot, lambda: cell(app, "beta", "state") == "running", "beta running")
        await select(pilot, app, "beta")
        await pilot.press("p")
        await until_daemon(pilot, client, "beta", lambda s: s["state"] == "paused", "paused")
        await until(
            pilot, lambda: cell(app, "beta", "state").startswith("paused"), "the row: paused"
        )
        await pilot.press("p")
        await until_daemon(pilot, client, "beta", running, "resumed")


@pytest.mark.anyio
async def test_sort_and_filter_change_the_rows_not_the_fleet(fleet: tuple[Path, Client]) -> None:
    """`o` orders by name, then state...; `/beta` leaves one row; Escape brings all back."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        await anyio.to_thread.run_sync(lambda: client.call("stop", name="gamma"))
        await until(pilot, lambda: cell(app, "gamma", "state").startswith("stopped"), "gamma")
        await pilot.press("o", "o")  # needs a person -> herd.toml order -> name
        assert app.fleet.sort_key == "session"
        assert rows(app) == sorted(NAMES)
        await pilot.press("o")  # state: running before stopped
        assert rows(app)[-1] == "gamma"
        await pilot.press("slash", *"stopped")
        await until(pilot, lambda: rows(app) == ["gamma"], "only gamma")
        summary = str(app.query_one("#summary").render())
        assert "filter 'stopped': 1 shown" in summary
        await pilot.press("escape")
        await until(pilot, lambda: len(rows(app)) == 3, "every row again")
        assert not app.query_one("#filter", Input).has_class("-visible")


@pytest.mark.anyio
async def test_output_pane_follows_the_cursor(fleet: tuple[Path, Client]) -> None:
    """With the pane open (at 120x40 it is, without a key), moving to another row shows that
    row's output, never the old one's."""
    socket_path, _ = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        first = rows(app)[0]
        await select(pilot, app, first)
        await until(pilot, lambda: app.output_session == first, "the pane on the first row")
        await pilot.press("j")
        await until(pilot, lambda: app.output_session == rows(app)[1], "the pane to follow")
        title = app.query_one("#output-title")
        await until(
            pilot, lambda: str(title.render()).startswith(rows(app)[1]), "its title to follow"
        )


@pytest.mark.anyio
async def test_session_screen_tabs_follow_the_session(fleet: tuple[Path, Client]) -> None:
    """Enter opens the screen on the selected session's output; `.` moves to the next session
    and every tab follows; Escape returns with the cursor on that session."""
    socket_path, _ = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        order = rows(app)
        await select(pilot, app, order[0])
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        screen = app.screen
        assert isinstance(screen, SessionScreen) and screen.session == order[0]
        view = screen.query_one(OutputView)
        await until(
            pilot,
            lambda: any("agent session started" in line for line in view.lines.shown_lines()),
            "the run's output",
        )
        await pilot.press("3")
        plan = screen.query_one("#plan-text")
        await until(pilot, lambda: "0/3 passing" in str(plan.render()), "the plan tab")
        assert "✗ feature 1" in str(plan.render())
        await pilot.press("full_stop")
        assert screen.session == order[1]
        await until(
            pilot, lambda: order[1] in str(screen.query_one("#session-head").render()), "head"
        )
        await pilot.press("5")
        events = screen.query_one("#event-log")
        await until(
            pilot,
            lambda: any(f"task {order[1]}/1 started" in line for line in events.lines),
            "the next session's events",
        )
        await pilot.press("7")
        await until(pilot, lambda: screen.report.get("session") == order[1], "its report")
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen is not screen, "the help")
        await pilot.press("escape")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionScreen), "back")
        assert app.query_one(SessionTable).selected_session == order[1]


@pytest.mark.anyio
async def test_palette_restarts_a_session_by_name(fleet: tuple[Path, Client]) -> None:
    """ctrl+p, "restart gamma", Enter: gamma gets a new task; nothing else is touched."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"restart gamma")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "restart asks first")
        await pilot.press("y")
        status = await until_daemon(
            pilot, client, "gamma", lambda s: running(s) and s["handle"] == "gamma/2", "restart"
        )
        assert status["restarts"] == 0
    assert client.call("status", target="alpha")["handle"] == "alpha/1"


@pytest.mark.anyio
async def test_approve_and_reject_ask_first_and_no_sends_nothing(
    fleet: tuple[Path, Client], herd: Herd
) -> None:
    """With no plan change, A says there is nothing to approve; after the agent removes an
    item, A and X each ask, naming the session, and `n` sends nothing."""
    socket_path, client = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        await select(pilot, app, "alpha")
        await pilot.press("A")
        await until(
            pilot,
            lambda: any("has not changed" in n.message for n in app._notifications),
            "a notice that there is nothing to approve",
        )
        assert not isinstance(app.screen, ConfirmScreen)
        plan = herd.root / "alpha" / "feature_list.json"
        items = json.loads(plan.read_text())
        plan.write_text(json.dumps(items[:2]))  # the agent drops an item: forbidden
        await until_daemon(
            pilot, client, "alpha", lambda s: bool(s["plan"]["changed_items"]), "the change"
        )
        await until(pilot, lambda: bool(app.status_of("alpha").plan.changed_items), "seen")
        for key, question in (("A", "Approve alpha's changed plan?"), ("X", "Reject alpha's")):
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.question.startswith(question)
            await pilot.press("n")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "closed")
    kinds = {e["kind"] for e in client.call("events", session="alpha")}
    assert not kinds & {"plan-approved", "plan-rejected"}
    assert len(json.loads(plan.read_text())) == 2, "nothing wrote the plan back"


@pytest.mark.anyio
async def test_dashboard_reads_a_stopped_fleet_and_changes_nothing(herd: Herd) -> None:
    """After `herd down` the dashboard shows the fleet from disk, says it is read-only, and a
    start key starts nothing."""
    write_config(herd.root)
    client = herd.start()
    client.call("up")
    for name in NAMES:
        wait_until(lambda name=name: "session started" in herd.status(name)["last_line"], what=name)
    herd.down()
    config = load_config(herd.config_path)
    app = HerdApp(client=AsyncDiskClient(config, poll_s=0.1))
    async with app.run_test(size=(120, 40)) as pilot:
        await all_rows(pilot, app)
        assert all(cell(app, n, "state").startswith("stopped") for n in NAMES)
        banner = app.query_one("#banner")
        assert "read-only" in str(banner.render()) and banner.has_class("-visible")
        await select(pilot, app, "alpha")
        await pilot.press("s")
        await until(pilot, lambda: any("read-only" in n.message for n in app._notifications), "")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        view = app.screen.query_one(OutputView)
        await until(
            pilot,
            lambda: any("agent session started" in line for line in view.lines.shown_lines()),
            "the output read from disk",
        )
    assert not Client(herd.daemon.socket_path).ping()  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_snapshot_after_the_table_is_gone_is_ignored(tmp_path: Path) -> None:
    """Seen in the 200-session bench: while the app closed, a snapshot was handled after the
    table had been removed, and the dashboard died with NoMatches instead of exiting."""
    from snapshot_fleet import ReplayClient, statuses, write_logs

    from agentherd.tui.dashboard.messages import Snapshot

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == 6, "rows")
        await app.query_one(SessionTable).remove()
        app.post_message(Snapshot(statuses()))
        await pilot.pause(0.1)
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.anyio
async def test_rows_scrolled_into_view_show_their_newest_state(tmp_path: Path) -> None:
    """Rows off screen are updated only when shown (a big fleet redraws only what is seen),
    so moving to one must show what the newest snapshot says, not what the first one said."""
    from snapshot_fleet import ReplayClient, statuses, write_logs

    from agentherd.tui.dashboard.messages import Snapshot

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(120, 14)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        last = rows(app)[-1]
        changed = [
            s.model_copy(update={"last_line": "brand new line"}) if s.session == last else s
            for s in statuses()
        ]
        app.post_message(Snapshot(changed))
        await pilot.pause(0.1)
        await select(pilot, app, last)
        await until(pilot, lambda: "brand new line" in cell(app, last, "last"), "the new line")


@pytest.mark.anyio
async def test_output_keys_work_wherever_the_focus_is_in_the_session_screen(
    tmp_path: Path,
) -> None:
    """Seen in tmux: `/` on the session screen did nothing (the tab bar had the focus) and the
    typed word ran other keys (`e` opened an editor). Now `/word` Enter finds the word, `n`
    the next match, and `v` shows the raw stream-json."""
    from snapshot_fleet import ReplayClient, write_logs

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == 6, "rows")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        view = app.screen.query_one(OutputView)
        await until(pilot, lambda: view.lines.line_count >= 7, "the output")
        await pilot.press("slash", *"passed", "enter")
        await until(pilot, lambda: view.match_line is not None, "a match")
        assert "passed" in view.lines.line_text(view.match_line).plain
        assert isinstance(app.screen, SessionScreen), "no other key ran"
        await pilot.press("v")
        await until(
            pilot,
            lambda: any(line.startswith('{"type"') for line in view.lines.shown_lines()),
            "the raw lines",
        )
