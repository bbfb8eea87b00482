"""The run picker lists the runs the output view knows of (numbers and sizes) without waiting
for the daemon: under a busy fleet its answer took seconds, and a daemon gone leaves the runs
still listed and choosable."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from conftest import Herd, wait_until
from test_dashboard import until
from test_output_pane import picker_rows
from test_session_tabs import open_session, script_session, write_toml

from agentherd.sessions.records import Event
from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.output_view import OutputView
from agentherd.tui.dashboard.run_picker import PENDING, RunPicker, rows_of, size_text

AGENT = (
    "import os, sys, time\n"
    "run = os.path.basename(os.environ['HERD_RUN_DIR'])\n"
    "print(f'output of run {run}' * int(run), flush=True)\n"
    "sys.exit(1) if run == '1' else time.sleep(60)\n"
)
"""Run 1 prints a line and fails; run 2 prints a longer one and stays up."""


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def test_rows_before_the_answer_say_pending_and_after_it_how_each_run_ended() -> None:
    """Without the events every start, end and exit is "…"; with them, each run's own."""
    sizes = {1: 10, 2: None}
    pending = rows_of(2, sizes, None, live=True)
    assert [(r.run, r.started_at, r.ended, r.exit, r.size_bytes) for r in pending] == [
        (2, PENDING, PENDING, PENDING, None),
        (1, PENDING, PENDING, PENDING, 10),
    ]
    events = [
        Event(seq=1, at="2026-12-01T10:00:00Z", session="s", run=1, kind="run-started", message=""),
        Event(
            seq=2,
            at="2026-12-01T10:00:05Z",
            session="s",
            run=1,
            kind="run-exited",
            message="",
            data={"outcome": "crashed", "exit_code": 1},
        ),
        Event(seq=3, at="2026-12-01T10:00:06Z", session="s", run=2, kind="run-started", message=""),
    ]
    assert all(not row.sized for row in rows_of(2, None, None, live=True)), "sizes not read yet"
    known = rows_of(2, sizes, events, live=True)
    assert [(r.run, r.started_at, r.ended, r.exit) for r in known] == [
        (2, "2026-12-01T10:00:06Z", "running", "-"),
        (1, "2026-12-01T10:00:00Z", "crashed", "1"),
    ]


@pytest.mark.anyio
async def test_picker_lists_the_known_runs_when_the_daemon_is_gone(herd: Herd) -> None:
    """Session `runs` with run 1 failed and run 2 up: after `herd down`, `L` on its Output tab
    still lists runs 2 and 1 with their logs' sizes, starts and ends "…" and a note that they
    cannot be read; Enter on run 1 chooses it."""
    write_toml(
        herd,
        script_session(herd.root, "runs", AGENT, 'restart = "on-failure"\nrestart_delay = "0s"\n'),
    )
    client = herd.start()
    client.call("up")
    wait_until(lambda: client.call("status", target="runs")["run"] == 2, 30, "run 2")
    paths = {n: Path(client.call("log_info", name="runs", run=n)["path"]) for n in (1, 2)}
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_session(pilot, app, "runs")
        view = screen.query_one(OutputView)
        await until(pilot, lambda: view.shown_run == 2 and view.latest_run == 2, "run 2 shown")
        await anyio.to_thread.run_sync(lambda: client.call("down", socket_timeout_s=None))
        # `down` answers first; the daemon serves on while it drains its reports, so a read
        # sent now may still be answered. Gone means its socket is gone.
        socket_path = herd.daemon.socket_path  # type: ignore[union-attr]
        await until(pilot, lambda: not socket_path.exists(), "the daemon gone")
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, RunPicker), "the picker")
        picker = app.screen
        assert isinstance(picker, RunPicker)
        note = picker.query_one("#runs-note")
        await until(pilot, lambda: "cannot read" in str(note.render()), "the note")
        await until(pilot, lambda: len(picker_rows(picker)) == 2, "two runs")
        await until(pilot, lambda: picker_rows(picker)[0][4] != PENDING, "their sizes")
        rows = picker_rows(picker)
        assert [row[0] for row in rows] == ["2", "1"]
        assert [row[4] for row in rows] == [size_text(paths[n].stat().st_size) for n in (2, 1)]
        assert all(row[1:4] == [PENDING] * 3 for row in rows), rows
        assert not picker.answered
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.screen is screen, "the picker closed")
        assert view.run == 1, "run 1 chosen"
