"""The session screen's Output and Spend tabs, driven by Pilot against a real daemon whose
agents are real processes: the simulated agent, or small scripts that print what a test needs
(hostile escapes, a log of several mebibytes, one marker per run)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import FAST, Herd, wait_until
from test_dashboard import SIMAGENT, make_repo, until
from textual.pilot import Pilot
from textual.widgets import DataTable, Static, TabbedContent

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.output_view import OutputView
from agentherd.tui.dashboard.session_screen import SessionScreen
from agentherd.tui.dashboard.spend_chart import SpendCharts
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable

HOSTILE = (
    b"\x1b[31mRED-TEXT\x1b[0m \x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x1b[10;5H"
    b"moved \x1b[1;32mGREEN-TEXT\x1b[0m\n"
)
"""Colours, then a clipboard write (OSC 52), a window title, a screen clear and a cursor move."""

BIG_LINES = 100_000
"""Lines of the big log: 6.3 MB, far past what any view should read or render at once."""


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def script_session(root: Path, name: str, code: str, extra: str = "") -> str:
    """A herd.toml block running `code` with this Python as a plain agent."""
    make_repo(root / name)
    (root / name / "agent.py").write_text(code)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "add", "agent.py"], cwd=root / name, check=True)
    subprocess.run([*git, "commit", "-qm", "agent"], cwd=root / name, check=True)
    command = [sys.executable, "agent.py"]
    return (
        f'[[session]]\nname = "{name}"\ncwd = "{name}"\nagent = "plain"\n'
        f"command = {json.dumps(command)}\n{extra}"
    )


def write_toml(herd: Herd, *blocks: str) -> None:
    """herd.toml: the blocks under defaults that never restart and stop quickly."""
    herd.write('[defaults]\nrestart = "never"\nstop_grace = "5s"\n\n' + "\n".join(blocks))


async def open_session(pilot: Pilot[Any], app: HerdApp, name: str) -> SessionScreen:
    """Put the cursor on `name` and press Enter; return the session screen."""
    table = app.query_one(SessionTable)
    await until(pilot, lambda: name in table.order, f"{name}'s row")
    table.move_cursor(row=table.get_row_index(name))
    await pilot.pause()
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
    screen = app.screen
    assert isinstance(screen, SessionScreen)
    return screen


def row_texts(view: OutputView) -> list[str]:
    """Every row of the output as drawn now, and fail if any holds an escape character."""
    lines = view.lines
    rows = []
    for y in range(lines.scrollable_content_region.height):
        strip = lines.render_line(y)
        for segment in strip:
            assert "\x1b" not in segment.text and "\x07" not in segment.text, segment.text
        rows.append(strip.text)
    return rows


@pytest.mark.anyio
async def test_colours_show_and_every_other_control_stays_inert(herd: Herd) -> None:
    """A plain agent prints red and green text around OSC 52, a title, CSI 2J and a cursor
    move: the readable view shows the words in colour with the rest dropped, the raw view
    (`v`) shows the rest as ^[ text, still coloured; no drawn row holds an escape byte."""
    code = f"import sys, time\nsys.stdout.buffer.write({HOSTILE!r})\nsys.stdout.flush()\n"
    write_toml(herd, script_session(herd.root, "hostile", code + "time.sleep(60)\n"))
    herd.start().call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_session(pilot, app, "hostile")
        view = screen.query_one(OutputView)
        await until(pilot, lambda: view.lines.line_count >= 1, "the line")
        text = view.lines.line_text(0)
        assert text.plain == "RED-TEXT moved GREEN-TEXT"
        styles = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
        assert "color(1)" in styles["RED-TEXT"] and "color(2)" in styles["GREEN-TEXT"]  # red, green
        assert any("RED-TEXT" in row for row in row_texts(view))
        await pilot.press("v")
        await until(pilot, lambda: "raw" in str(screen.query_one("#output-title").render()), "raw")
        raw = view.lines.line_text(0)
        for shown in ("^[]52;c;ZXZpbA==^G", "^[]0;pwned^G", "^[[2J", "^[[10;5H"):
            assert shown in raw.plain
        assert any("color(1)" in str(s.style) for s in raw.spans)
        assert any("^[[2J" in row for row in row_texts(view))


@pytest.mark.anyio
async def test_w_wraps_a_long_line_onto_the_next_rows_and_back(herd: Herd) -> None:
    """A 300-character line is cut at the edge; `w` wraps it onto three rows (the title says
    wrap); `w` again cuts it."""
    code = "import time\nprint('W' * 300, flush=True)\nprint('after', flush=True)\ntime.sleep(60)\n"
    write_toml(herd, script_session(herd.root, "wide", code))
    herd.start().call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_session(pilot, app, "wide")
        view = screen.query_one(OutputView)
        await until(pilot, lambda: view.lines.line_count >= 2, "the lines")
        cut = row_texts(view)
        assert cut[0].count("W") < 300 and cut[1].startswith("after")
        await pilot.press("w")
        await until(pilot, lambda: view.lines.wrap, "wrap on")
        assert "wrap" in str(screen.query_one("#output-title").render())
        wrapped = [row.rstrip() for row in row_texts(view) if row.strip()]
        assert "".join(wrapped[:-1]) == "W" * 300 and len(wrapped) >= 4
        assert wrapped[-1] == "after"
        await pilot.press("w")
        await until(pilot, lambda: not view.lines.wrap, "wrap off")
        assert row_texts(view)[1].startswith("after")


@pytest.mark.anyio
async def test_a_big_log_opens_scrolls_to_the_top_and_searches_reading_only_the_screen(
    herd: Herd,
) -> None:
    """A 6.3 MB log of 100,000 lines: opening shows its end, `g` its first line, `/` finds a
    line near the top and `G` returns to the end, each rendering and reading at most a few
    screens of lines (counted, not timed), however long the log."""
    code = (
        "import sys, time\n"
        f"for i in range({BIG_LINES}):\n"
        "    tag = 'needle' if i == 17 else 'line'\n"
        "    sys.stdout.write(f'{tag} {i:06d} ' + 'x' * 50 + '\\n')\n"
        "sys.stdout.flush()\n"
        "time.sleep(60)\n"
    )
    write_toml(herd, script_session(herd.root, "big", code))
    client = herd.start()
    client.call("up")
    wait_until(lambda: client.call("status", target="big")["logs"]["bytes"] >= BIG_LINES * 63, 60)
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_session(pilot, app, "big")
        view = screen.query_one(OutputView)
        lines = view.lines
        await until(pilot, lambda: lines.line_count == BIG_LINES, "the whole log indexed")
        await pilot.pause(0.2)
        height = lines.scrollable_content_region.height
        screens = 3 * height
        assert lines.shown_lines()[-1].startswith(f"line {BIG_LINES - 1:06d}")
        assert lines.lines_rendered <= screens and lines.reader.lines_read <= screens

        rendered, read = lines.lines_rendered, lines.reader.lines_read
        await pilot.press("g")
        await until(pilot, lambda: lines.scroll_offset.y == 0, "the top")
        await pilot.pause(0.1)
        assert lines.shown_lines()[0].startswith("line 000000")
        assert lines.lines_rendered - rendered <= screens
        assert lines.reader.lines_read - read <= screens

        await pilot.press("G")
        await until(pilot, lambda: lines.at_end, "the end")
        rendered, read = lines.lines_rendered, lines.reader.lines_read
        await pilot.press("slash", *"needle", "enter")
        await until(pilot, lambda: view.match_line is not None, "a match")
        await pilot.pause(0.1)
        assert view.match_line == 17
        assert any(line.startswith("needle 000017") for line in lines.shown_lines())
        assert lines.lines_rendered - rendered <= screens
        assert lines.reader.lines_read - read <= screens


@pytest.mark.anyio
async def test_every_run_of_the_session_can_be_shown(herd: Herd) -> None:
    """A session that fails twice and then stays up has three runs: the tab follows run 3;
    `[` shows run 2's output, again run 1's; `]` twice follows the newest again."""
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
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: shows(2), "run 2")
        assert "run 2 of 3" in str(screen.query_one("#output-title").render())
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: shows(1), "run 1")
        await pilot.press("right_square_bracket", "right_square_bracket")
        await until(pilot, lambda: shows(3) and view.run is None, "the newest again")


@pytest.mark.anyio
async def test_spend_tab_charts_a_running_agents_spend_against_its_budget(tmp_path: Path) -> None:
    """A simulated agent that spends $0.05 a feature under a $1 / 2M-token budget: the Spend
    tab (6) shows cost_usd and tokens each with its limit rule and a time axis once samples
    come, and says where the spend is heading."""
    herd = Herd(tmp_path, replace(FAST, spend_sample_s=0.1, budget_check_s=0.1))
    make_repo(tmp_path / "spender")
    command = [*SIMAGENT, "--delay", "3", "--cost-per-feature", "0.05"]
    herd.write(
        '[defaults]\nrestart = "never"\nstop_grace = "5s"\n\n'
        f'[[session]]\nname = "spender"\ncwd = "spender"\nagent = "claude"\n'
        f'command = {json.dumps(command)}\nplan = "feature_list.json"\n'
        "budget = { cost_usd = 1, tokens = 2000000 }\n"
    )
    try:
        herd.start().call("up")
        app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_session(pilot, app, "spender")
            await pilot.press("6")
            chart = screen.query_one("#spend-chart", Static)

            def drawn() -> str:
                charts = chart.content
                if not isinstance(charts, SpendCharts):
                    return str(charts)
                return "\n".join(line.plain for line in charts.lines(110))

            def charted() -> bool:
                text = drawn()
                return text.count("limit ─") >= 2 and ("···" in text or "runs out" in text)

            await until(pilot, lambda: len(screen.samples or []) >= 3, "samples")
            await until(pilot, charted, "the charts")
            text = drawn()
            assert "cost_usd  $" in text and "of $1.00" in text
            assert "tokens " in text and "of 2.0M" in text
    finally:
        herd.down()


@pytest.mark.anyio
async def test_restart_from_a_chosen_checkpoint_asks_and_is_rebindable(herd: Herd) -> None:
    """`[keys] restart-from = "T"`: on the Checkpoints tab, the older checkpoint under the
    cursor, T asks "Restart sim from <sha>?"; n sends nothing; T then y resets the worktree to
    that checkpoint (a worktree-reset event naming it) and begins a new task."""
    make_repo(herd.root / "sim")
    command = [*SIMAGENT, "--delay", "0.2"]
    write_toml(
        herd,
        f'[[session]]\nname = "sim"\ncwd = "sim"\nagent = "claude"\n'
        f'command = {json.dumps(command)}\nplan = "feature_list.json"\n',
    )
    client = herd.start()
    client.call("up")
    herd.wait_state("sim", "completed", timeout_s=30)
    # The checkpoint before the last, as git counts it: sha, then its files' added/removed lines.
    git_show = ["git", "show", "--numstat", "--format=%H", "HEAD~1"]
    shown = (await anyio.run_process(git_show, cwd=herd.root / "sim")).stdout.decode().split()
    numstat = shown[1:]
    added, removed = sum(map(int, numstat[0::3])), sum(map(int, numstat[1::3]))
    app = HerdApp(herd.daemon.socket_path, keys={"restart-from": "T"})  # type: ignore[union-attr]
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_session(pilot, app, "sim")
        await pilot.press("4")  # at once: the tab is composed after the screen's first paint
        await until(pilot, lambda: len(screen.checkpoints) >= 2, "the checkpoints")
        table = screen.query_one("#checkpoint-table", DataTable)
        await until(pilot, lambda: app.focused is table, "the table to take the keys")
        await pilot.press("j")
        await until(pilot, lambda: table.cursor_row == 1, "the cursor on the older checkpoint")
        older = screen.checkpoints[1]["sha"]
        assert older == shown[0]
        detail = str(screen.query_one("#checkpoint-detail", Static).render())
        assert f"{len(numstat) // 3} file(s) +{added} -{removed}: " in detail, detail
        await pilot.press("T")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        asked = str(app.screen.query_one("#question").render())
        assert asked == f"Restart sim from {older[:10]}?"
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen, "the question closed")
        assert not herd.events("sim", "worktree-reset")
        await pilot.press("T")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question again")
        await pilot.press("y")
        await until(pilot, lambda: bool(herd.events("sim", "worktree-reset")), "the reset")
        reset = herd.events("sim", "worktree-reset")[0]
        assert reset["data"]["sha"] == older
        assert herd.status("sim")["handle"] != "sim/1"


@pytest.mark.anyio
async def test_an_editor_that_cannot_run_is_a_notice_not_a_crash(
    herd: Herd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`e` with $EDITOR naming no program: a notice says it cannot run; the dashboard stays."""
    monkeypatch.setenv("VISUAL", str(tmp_path / "no-such-editor"))
    write_toml(herd, script_session(herd.root, "quiet", "import time\ntime.sleep(60)\n"))
    herd.start().call("up")
    socket_path = herd.daemon.socket_path  # type: ignore[union-attr]
    app = HerdApp(socket_path, worktrees={"quiet": herd.root / "quiet"})
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 1, "the row")
        await pilot.press("e")
        await until(pilot, lambda: bool(app._notifications), "a notice")
        notice = next(iter(app._notifications)).message
        assert notice.startswith("cannot run") and "no-such-editor" in notice
        assert app.is_running


@pytest.mark.anyio
async def test_with_wrap_on_g_and_G_reach_the_first_and_last_rows(herd: Herd) -> None:
    """Seen in tmux: with wrap on, `g` stayed at the end when the log had fewer lines than
    the screen has rows but more wrapped rows. Now `g` shows the first line on the top row
    and `G` the last line on the bottom row."""
    code = (
        "import time\nprint('first' + 'y' * 295)\n"
        "for _ in range(30):\n    print('z' * 300)\n"
        "print('last', flush=True)\ntime.sleep(60)\n"
    )
    write_toml(herd, script_session(herd.root, "long", code))
    herd.start().call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_session(pilot, app, "long")
        view = screen.query_one(OutputView)
        await until(pilot, lambda: view.lines.line_count == 32, "the lines")
        await pilot.press("w")
        await until(pilot, lambda: view.lines.wrap, "wrap on")
        await until(pilot, lambda: row_texts(view)[-1].rstrip() == "last", "the end at the bottom")
        await pilot.press("g")
        await until(pilot, lambda: row_texts(view)[0].startswith("firstyyy"), "the top")
        await pilot.press("G")
        await until(pilot, lambda: row_texts(view)[-1].rstrip() == "last", "the end again")


@pytest.mark.anyio
async def test_scrolled_up_the_view_holds_and_counts_new_lines_until_G(herd: Herd) -> None:
    """An agent printing a line every 50 ms: `g` goes to the top, which stays on screen while
    lines come, the title counting "+N new lines"; `G` follows the end again."""
    code = (
        "import time\nfor i in range(100000):\n"
        "    print(f'tick {i:06d}', flush=True)\n    time.sleep(0.05)\n"
    )
    write_toml(herd, script_session(herd.root, "ticker", code))
    herd.start().call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_session(pilot, app, "ticker")
        view = screen.query_one(OutputView)
        lines = view.lines
        await until(pilot, lambda: lines.line_count > 40, "a screenful and more")
        await pilot.press("g")
        await until(pilot, lambda: view.unseen >= 5, "new lines counted")
        assert lines.shown_lines()[0] == "tick 000000", "the view held"
        assert f"+{view.unseen:,} new lines" in str(screen.query_one("#output-title").render())
        await pilot.press("G")
        await until(pilot, lambda: view.unseen == 0 and lines.following, "following again")
        newest = lines.line_count - 1
        await until(
            pilot,
            lambda: any(line >= f"tick {newest:06d}" for line in lines.shown_lines()),
            "the newest lines on screen",
        )


@pytest.mark.anyio
async def test_palette_shows_output_and_spend_of_a_session_by_name(herd: Herd) -> None:
    """ctrl+p "show output of second" opens second's session screen on its output (the
    cursor was on first); ctrl+p "spend of first" moves that screen to first's Spend tab, and
    one Escape returns to the fleet (the palette never stacks session screens)."""
    quiet = "import time\nprint('hello from', __file__, flush=True)\ntime.sleep(60)\n"
    write_toml(
        herd,
        script_session(herd.root, "first", quiet),
        script_session(herd.root, "second", quiet),
    )
    herd.start().call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == 2, "the rows")
        for words, session, tab in (
            ("show output of second", "second", "output"),
            ("spend of first", "first", "spend"),
        ):
            await pilot.press("ctrl+p")
            await pilot.pause(0.2)
            await pilot.press(*words)
            await pilot.pause(0.5)
            await pilot.press("enter")

            def shown(session: str = session, tab: str = tab) -> bool:
                screen = app.screen
                return (
                    isinstance(screen, SessionScreen)
                    and screen.session == session
                    and screen.query_one(TabbedContent).active == tab
                )

            await until(pilot, shown, f"{session}'s {tab} tab")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionScreen), "the fleet")
