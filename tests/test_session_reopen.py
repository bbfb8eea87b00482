"""The dashboard keeps one session screen and shows it again for the next session (its nine
tabs composed once: most of an open's time), and makes the garbage collector's full passes
between keys. What a person relies on: the screen shown again says nothing of the session
shown before; a closed screen follows nothing; a dialog over it stops nothing; no object
the collector froze is kept once it is garbage."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from conftest import Herd
from test_dashboard import until
from test_session_tabs import open_session, script_session, write_toml
from textual.widget import Widget
from textual.widgets import DataTable, Log, Static

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.collector import QuietCollector
from agentherd.tui.dashboard.diff_view import DiffView
from agentherd.tui.dashboard.fleet import OUTPUT_PANE_MIN_SIZE
from agentherd.tui.dashboard.output_view import FleetOutput, OutputView
from agentherd.tui.dashboard.session_screen import READING, SessionScreen

MARKER_AGENT = (
    "import os, pathlib, time\n"
    "name = os.environ['HERD_SESSION'].upper()\n"
    "pathlib.Path('claude-progress.txt').write_text(f'## Session 1\\n- {name}-PROGRESS\\n')\n"
    "print(f'{name}-MARK', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def texts(screen: SessionScreen) -> str:
    """Every word the session screen shows in its text tabs and output, as one string."""
    selectors = [*READING, "#checkpoint-detail", "#open-warnings"]
    parts = [str(screen.query_one(selector, Static).render()) for selector in selectors]
    parts += screen.query_one("#event-log", Log).lines
    parts += screen.query_one(OutputView).lines.shown_lines()
    return "\n".join(parts)


def running_workers(app: HerdApp, screen: SessionScreen) -> list[str]:
    """The screen's and its widgets' workers still running."""
    return [
        worker.name
        for worker in app.workers
        if worker.is_running
        and isinstance(worker.node, Widget)
        and (worker.node is screen or screen in worker.node.ancestors_with_self)
    ]


@pytest.mark.anyio
async def test_the_screen_shown_again_says_nothing_of_the_session_before(herd: Herd) -> None:
    write_toml(
        herd,
        script_session(herd.root, "alpha", MARKER_AGENT, 'progress = "claude-progress.txt"\n'),
        script_session(herd.root, "beta", MARKER_AGENT, 'progress = "claude-progress.txt"\n'),
    )
    client = herd.start()
    client.call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_session(pilot, app, "alpha")
        await until(pilot, lambda: "ALPHA-MARK" in texts(screen), "alpha's output")
        await until(pilot, lambda: "ALPHA-PROGRESS" in texts(screen), "alpha's progress")

        await pilot.press("question_mark")  # a dialog over the screen stops nothing
        await until(pilot, lambda: app.screen is not screen, "the help")
        await pilot.pause(0.2)
        assert screen.query_one(OutputView).session == "alpha"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the session screen again")

        await pilot.press("escape")  # closed: it follows nothing
        await until(pilot, lambda: not isinstance(app.screen, SessionScreen), "the fleet")
        await until(pilot, lambda: not running_workers(app, screen), "no worker left")
        assert screen.query_one(OutputView).session is None

        again = await open_session(pilot, app, "beta")
        assert again is screen, "the same screen, shown again"
        seen = texts(screen)
        assert "ALPHA" not in seen, seen
        await until(pilot, lambda: "BETA-PROGRESS" in texts(screen), "beta's progress")
        await until(pilot, lambda: "BETA-MARK" in texts(screen), "beta's output")
        assert "ALPHA" not in texts(screen)

        await pilot.press("8")  # the Diff tab, read for beta
        diff = screen.query_one(DiffView)
        await until(pilot, lambda: diff.reply is not None, "beta's diff")
        screen.session = "alpha"  # `,` and `.`: blank at once, before any reader answers
        assert str(diff.query_one("#diff-head", Static).render()) == "reading the diff…"
        assert diff.reply is None and diff.session == "alpha"
        blank = texts(screen)
        assert "BETA" not in blank, blank
        assert str(screen.query_one("#progress-text", Static).render()) == READING["#progress-text"]
        assert screen.query_one("#checkpoint-table", DataTable).row_count == 0
        await until(pilot, lambda: "ALPHA-PROGRESS" in texts(screen), "alpha's progress again")


@pytest.mark.anyio
async def test_the_fleets_output_pane_rests_while_a_session_is_open_and_returns_after(
    herd: Herd,
) -> None:
    """Opening a session stops the pane's reading (the session screen reads the output) but
    leaves the fleet's layout; back, the pane follows the selected session again, or stays
    hidden if the terminal was narrowed meanwhile."""
    write_toml(herd, script_session(herd.root, "alpha", MARKER_AGENT))
    herd.start().call("up")
    app = HerdApp(herd.daemon.socket_path)  # type: ignore[union-attr]
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(FleetOutput)
        screen = await open_session(pilot, app, "alpha")
        assert pane.session is None, "the pane reads nothing under the session screen"
        await until(pilot, lambda: "ALPHA-MARK" in texts(screen), "alpha's output")
        await pilot.press("escape")
        await until(pilot, lambda: pane.session == "alpha" and pane.display, "the pane again")
        await until(
            pilot, lambda: any("ALPHA-MARK" in line for line in pane.lines.shown_lines()), "it"
        )

        await open_session(pilot, app, "alpha")
        await pilot.resize_terminal(OUTPUT_PANE_MIN_SIZE[0] - 1, 40)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionScreen), "the fleet")
        await until(pilot, lambda: not pane.display, "the pane hidden: no room for it")
        assert pane.session is None


def test_what_a_full_pass_left_is_frozen_and_the_quiet_pass_frees_what_died_since() -> None:
    now = [100.0]
    collector = QuietCollector(every_s=30, quiet_s=2, clock=lambda: now[0])

    class Node:
        """Half of a reference cycle: only a full pass frees it."""

        other: Any = None

    try:
        first, second = Node(), Node()
        first.other, second.other = second, first
        gone = weakref.ref(first)
        gc.collect()  # Python's own full pass, as far as the collector can tell
        now[0] += 1
        assert not collector.tick()
        frozen = gc.get_freeze_count()
        assert frozen > 0, "what the full pass left is out of the next one"
        assert not collector.tick() and gc.get_freeze_count() == frozen, "no new pass: as is"
        del first, second
        gc.collect()
        assert gone() is not None, "frozen: Python's own passes leave it"
        now[0] += 28
        assert not collector.tick(), "the pass over everything is not due yet"
        now[0] += 2
        collector.saw_key()
        now[0] += 1
        assert not collector.tick(), "a key came a second ago"
        assert gone() is not None
        now[0] += 1
        assert collector.tick()
        assert gone() is None, "the quiet pass freed the dead cycle"
        assert not collector.tick(), "and the next is 30 s away"
    finally:
        collector.release()
    assert gc.get_freeze_count() == 0
