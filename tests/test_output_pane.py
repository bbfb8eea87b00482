"""The fleet view's output pane (`l`) and the run picker (`L`), driven by Pilot against a real
daemon whose agents are real processes: the pane reads the run's file by offset as the
session screen's Output tab does, and follows the selected row at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Herd, wait_until
from test_dashboard import SIMAGENT, make_repo, until
from test_session_tabs import HOSTILE, open_session, script_session, write_toml
from textual.pilot import Pilot
from textual.widgets import DataTable

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.output_view import FleetOutput, OutputView
from agentherd.tui.dashboard.run_picker import RunPicker, size_text
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable

BIG_LINES = 50_000


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def claude_session(root: Path, name: str) -> str:
    """A herd.toml block running the simulated Claude agent (it writes stream-json)."""
    make_repo(root / name)
    command = [*SIMAGENT, "--delay", "60"]
    return (
        f'[[session]]\nname = "{name}"\ncwd = "{name}"\nagent = "claude"\n'
        f'command = {json.dumps(command)}\nplan = "feature_list.json"\n'
    )


def drawn_rows(pane: OutputView) -> list[str]:
    """The pane's rows as drawn now; fail if any holds an escape or bell byte."""
    lines = pane.lines
    rows = []
    for y in range(lines.scrollable_content_region.height):
        text = lines.render_line(y).text
        assert "\x1b" not in text and "\x07" not in text, text
        rows.append(text)
    return rows


def drawn_colour(pane: OutputView, word: str) -> int | None:
    """The colour number `word` is drawn in on screen (not only in the text kept): seen in
    tmux, the pane's own text colour was laid over the agent's colours."""
    lines = pane.lines
    for y in range(lines.scrollable_content_region.height):
        for segment in lines.render_line(y):
            if word in segment.text and segment.style is not None and segment.style.color:
                return segment.style.color.number
    return None


def title(pane: OutputView) -> str:
    """The pane's title line as shown."""
    return str(pane.query_one("#output-title").render())


async def click_row(pilot: Pilot[Any], app: HerdApp, name: str) -> None:
    """Click `name`'s row in the session table (the header is the first row)."""
    table = app.query_one(SessionTable)
    await pilot.click(SessionTable, offset=(2, table._order.index(name) + 1))


@pytest.mark.anyio
async def test_the_fleet_output_pane_reads_by_offset_and_follows_the_row_at_once(
    herd: Herd,
) -> None:
    """`l` on a coloured line: the words drawn in their colours, the other controls dropped;
    `j` to a Claude agent blanks the pane at once and then shows readable summaries, never raw
    stream-json; a click on a 50,000-line log shows its end having rendered about a screen;
    on a ticking agent, tab then `g` holds the top while "+N new lines" counts, `G` follows
    again; Escape closes the pane and gives the table the keys back."""
    big = f"import time\nfor i in range({BIG_LINES}):\n    print(f'line {{i:06d}}')\n"
    ticker = (
        "import time\nfor i in range(100000):\n"
        "    print(f'tick {i:06d}', flush=True)\n    time.sleep(0.05)\n"
    )
    colours = f"import sys, time\nsys.stdout.buffer.write({HOSTILE!r})\nsys.stdout.flush()\n"
    sleep = "time.sleep(60)\n"
    write_toml(
        herd,
        script_session(herd.root, "colours", colours + sleep),
        claude_session(herd.root, "stream"),
        script_session(herd.root, "big", big + "print('the end', flush=True)\n" + sleep),
        script_session(herd.root, "ticker", ticker),
    )
    herd.start().call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 4, "the rows")
        app.fleet.sort_key = "session"  # big, colours, stream, ticker
        await until(pilot, lambda: table._order == ["big", "colours", "stream", "ticker"], "order")
        table.move_cursor(row=1)
        await pilot.pause()
        pane = app.query_one(FleetOutput)  # at 120x40 it shows without a key
        await until(pilot, lambda: pane.session == "colours", "colours' pane")
        await until(pilot, lambda: pane.lines.line_count >= 1, "colours' line")
        text = pane.lines.line_text(0)
        assert text.plain == "RED-TEXT moved GREEN-TEXT"
        styles = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
        assert "color(1)" in styles["RED-TEXT"] and "color(2)" in styles["GREEN-TEXT"]
        assert any("RED-TEXT" in row for row in drawn_rows(pane))
        assert drawn_colour(pane, "RED-TEXT") == 1 and drawn_colour(pane, "GREEN-TEXT") == 2
        assert title(pane).startswith("colours: run 1 of 1")

        await pilot.press("j")
        assert pane.session == "stream" and app.output_session == "stream"
        assert not any("RED-TEXT" in row for row in drawn_rows(pane)), "blank at once"
        assert title(pane).startswith("stream: ")
        await until(
            pilot,
            lambda: any("agent session started" in row for row in drawn_rows(pane)),
            "stream's first summary",
        )
        assert not any('{"type"' in row for row in drawn_rows(pane)), "readable, not raw"

        await until(pilot, lambda: "big" in app.shown_names(), "big's row")
        await click_row(pilot, app, "big")
        assert pane.session == "big"
        await until(pilot, lambda: pane.lines.line_count == BIG_LINES + 1, "big's whole log")
        await until(pilot, lambda: drawn_rows(pane)[-1].startswith("the end"), "big's end")
        height = pane.lines.scrollable_content_region.height
        assert pane.lines.lines_rendered <= 4 * height, "about a screen, not the log"

        await click_row(pilot, app, "ticker")
        await until(pilot, lambda: pane.lines.line_count > 40, "a screenful of ticks")
        await pilot.press("tab")
        assert app.focused is pane.lines
        await pilot.press("g")
        await until(pilot, lambda: pane.unseen >= 5, "new lines counted")
        assert pane.lines.shown_lines()[0] == "tick 000000", "the view held"
        assert f"+{pane.unseen:,} new lines (below)" in title(pane)
        await pilot.press("G")
        await until(pilot, lambda: pane.unseen == 0 and pane.lines.following, "following")
        await pilot.press("escape")
        await until(pilot, lambda: not pane.display, "the pane closed")
        assert app.focused is table and pane.session is None
        await pilot.press("k")
        assert table.selected_session == "stream", "j/k move the table's cursor again"


def answered(app: HerdApp) -> bool:
    """The picker on top lists the daemon's answer (not only the runs the view knew of)."""
    return isinstance(app.screen, RunPicker) and app.screen.answered


def picker_rows(picker: RunPicker) -> list[list[str]]:
    """The picker's rows as text."""
    table = picker.query_one(DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.anyio
async def test_L_lists_every_run_and_shows_the_one_chosen(herd: Herd) -> None:
    """A session that failed twice and then stays up: `L` lists runs 3, 2, 1 (3 running, 2
    and 1 ended with exit 1, each with its start and its log's size), the cursor on the run
    shown; choosing run 1 shows its output; choosing run 3 follows the newest again; Escape
    keeps the run shown."""
    code = (
        "import os, sys, time\n"
        "run = os.path.basename(os.environ['HERD_RUN_DIR'])\n"
        "print(f'output of run {run}', flush=True)\n"
        "sys.exit(1) if int(run) < 3 else time.sleep(60)\n"
    )
    extra = 'restart = "on-failure"\nrestart_delay = "0s"\n'
    write_toml(herd, script_session(herd.root, "runs", code, extra))
    client = herd.start()
    client.call("up")
    wait_until(lambda: client.call("status", target="runs")["run"] == 3, 30, "run 3")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_session(pilot, app, "runs")
        view = screen.query_one(OutputView)

        def shows(run: int) -> bool:
            return view.shown_run == run and f"output of run {run}" in view.lines.shown_lines()

        await until(pilot, lambda: shows(3), "run 3")
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, RunPicker), "the picker")
        picker = app.screen
        assert isinstance(picker, RunPicker)
        await until(pilot, lambda: picker.answered and len(picker_rows(picker)) == 3, "3 runs")
        rows = picker_rows(picker)
        assert [row[0] for row in rows] == ["3", "2", "1"]
        assert rows[0][2] == "running" and rows[0][3] == "-"
        assert all(row[3] == "1" and row[2] not in ("running", "?") for row in rows[1:])
        assert all(row[1] != "?" for row in rows), "each run's start"
        run1 = Path(client.call("log_info", name="runs", run=1)["path"])
        assert rows[2][4] == size_text(run1.stat().st_size)
        assert picker.query_one(DataTable).cursor_row == 0, "on the run shown"
        await pilot.press("down", "down", "enter")
        await until(pilot, lambda: shows(1) and view.run == 1, "run 1")
        assert "run 1 of 3" in title(view)
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, RunPicker), "the picker again")
        await until(pilot, lambda: answered(app) and len(picker_rows(app.screen)) == 3, "3 runs")  # type: ignore[arg-type]
        assert app.screen.query_one(DataTable).cursor_row == 2, "on run 1, shown now"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RunPicker), "closed")
        assert shows(1)
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, RunPicker), "the picker a third time")
        await until(pilot, lambda: len(picker_rows(app.screen)) == 3, "three runs")  # type: ignore[arg-type]
        await pilot.press("k", "k", "enter")
        await until(pilot, lambda: shows(3) and view.run is None, "the newest, followed")


@pytest.mark.anyio
async def test_checkpoints_tab_takes_the_keys_so_F_restarts_from_the_row_chosen(
    herd: Herd,
) -> None:
    """Seen in tmux: after Enter and `4` the arrows and `j` still went elsewhere (or a late
    tab event pulled the Output tab back), and F offered the newest checkpoint. Now `4` then
    `j` moves to the second checkpoint and F names it; `n` cancels."""
    code = (
        "import subprocess, time\n"
        "git = ['git', '-c', 'user.name=t', '-c', 'user.email=t@localhost']\n"
        "for n in (1, 2):\n"
        "    open(f'f{n}.txt', 'w').write('x')\n"
        "    subprocess.run([*git, 'add', f'f{n}.txt'], check=True)\n"
        "    subprocess.run([*git, 'commit', '-qm', f'commit {n}'], check=True)\n"
        "print('committed', flush=True)\ntime.sleep(60)\n"
    )
    write_toml(herd, script_session(herd.root, "commits", code))
    client = herd.start()
    client.call("up")
    wait_until(
        lambda: (
            (client.call("status", target="commits").get("checkpoint") or {}).get("subject")
            == "commit 2"
        ),
        30,
        "the second commit",
    )
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: "commits" in table._order, "the row")
        await pilot.press("enter", "4")
        screen = app.screen
        checkpoints = screen.query_one("#checkpoint-table", DataTable)
        await until(pilot, lambda: checkpoints.row_count >= 3, "the checkpoints")
        # Waited for, not read after a fixed pause: a loaded machine moved the focus later.
        await until(pilot, lambda: app.focused is checkpoints, "the checkpoints to take the keys")
        await pilot.press("j")
        await pilot.press("F")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        second = screen.checkpoints[1]["sha"][:10]  # type: ignore[attr-defined]
        question = str(app.screen.query_one("#question").render())
        assert f"from {second}?" in question and "commit 1" in screen.checkpoints[1]["subject"]  # type: ignore[attr-defined]
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "cancelled")
