"""`r` restarts only after a confirmation that names the session, in every state: a restart
runs (and pays) the agent again, and a finished session's restart used to start it at once."""

from __future__ import annotations

import pytest
from conftest import Herd, wait_until
from test_dashboard import until, until_daemon
from test_session_tabs import open_session, script_session, write_toml

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def confirmation(app: HerdApp) -> ConfirmScreen:
    """The dialog on top, which must be a confirmation."""
    screen = app.screen
    assert isinstance(screen, ConfirmScreen), screen
    return screen


@pytest.mark.anyio
async def test_r_on_a_finished_or_running_session_asks_first(herd: Herd) -> None:
    """On a completed session, `r` asks "Restart done (completed)?" and `n` starts nothing
    (and `a`, with no warning to acknowledge, says so);
    on a failed one, from its session screen, `y` starts task 2; on a running one the
    question says the run under way is stopped, and `escape` sends nothing."""
    write_toml(
        herd,
        script_session(herd.root, "done", "print('all done')\n"),
        script_session(herd.root, "broke", "import sys; sys.exit(3)\n"),
        script_session(herd.root, "busy", "import time; print('up', flush=True); time.sleep(60)\n"),
    )
    client = herd.start()
    client.call("up")
    wait_until(lambda: client.call("status", target="done")["state"] == "completed", 30, "done")
    wait_until(lambda: client.call("status", target="broke")["state"] == "failed", 30, "broke")
    wait_until(lambda: client.call("status", target="busy")["pid"] is not None, 30, "busy up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 3, "three rows")
        await until(
            pilot, lambda: app.status_of("done") is not None and app.statuses, "the statuses"
        )
        table.move_cursor(row=table.get_row_index("done"))
        await pilot.pause()
        await pilot.press("a")  # seen in tmux: with no warning to ack the notice said "running"
        await until(pilot, lambda: bool(app._notifications), "a notice")
        notice = next(iter(app._notifications)).message
        assert notice == "done has no open warnings to acknowledge", notice
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        dialog = confirmation(app)
        assert dialog.question == "Restart done (completed)?"
        assert "agent runs again" in dialog.consequence
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "closed")
        status = client.call("status", target="done")
        assert (status["state"], status["handle"]) == ("completed", "done/1"), "nothing sent"

        screen = await open_session(pilot, app, "broke")
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asks on its screen")
        assert confirmation(app).question == "Restart broke (failed)?"
        await pilot.press("y")
        await until(pilot, lambda: app.screen is screen, "back on the session screen")
        restarted = await until_daemon(
            pilot, client, "broke", lambda s: s["handle"] == "broke/2", "task 2 of broke"
        )
        assert restarted["run"] == 2
        await pilot.press("escape")

        table.move_cursor(row=table.get_row_index("busy"))
        await pilot.pause()
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asks for busy")
        dialog = confirmation(app)
        assert dialog.question == "Restart busy?"
        assert "stopped gracefully" in dialog.consequence
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "closed")
    status = client.call("status", target="busy")
    assert (status["state"], status["handle"]) == ("running", "busy/1"), "escape sent nothing"
