"""Pictures of the dashboard on a fixed fleet (tests/snapshot_fleet.py), compared with the
stored SVGs under tests/__snapshots__/. `pytest --snapshot-update` rewrites them; look at
each changed picture before committing it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from snapshot_fleet import ReplayClient, write_logs
from textual.pilot import Pilot
from textual.widgets import Input, Static

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.newsession import NewSessionScreen
from agentherd.tui.dashboard.output_view import FleetOutput
from agentherd.tui.dashboard.spend_chart import SpendCharts
from agentherd.tui.dashboard.widgets import SessionTable

SIZE = (120, 34)
NOTES = {"search-index": "stalls after feature 2: herd raises a stall warning (⚠)"}


def app_for(tmp_path: Path, budgets: bool = False) -> HerdApp:
    """The dashboard on the replayed fleet (with api-migration's budget and spend samples)."""
    client = ReplayClient(write_logs(tmp_path / "logs"), budgets=budgets)
    return HerdApp(client=client, config_label="snapshot", notes=NOTES)


async def rows_shown(pilot: Pilot[Any]) -> None:
    """Wait until the snapshot became rows, and let the screen settle."""
    app = pilot.app
    for _ in range(200):
        if app.query_one(SessionTable).row_count == 6:
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def pane_read(pilot: Pilot[Any], name: str = "billing-export") -> None:
    """Wait until the output pane (shown without a key on a large screen) has `name`'s lines."""
    for _ in range(500):
        pane = pilot.app.query_one(FleetOutput)
        if pane.session == name and pane.lines.line_count and pane.title_text.startswith("run"):
            break
        await pilot.pause(0.02)
    await pilot.pause(0.3)


async def with_output(pilot: Pilot[Any]) -> None:
    """The rows, then the selected session's output under them."""
    await rows_shown(pilot)
    await pane_read(pilot)


async def open_tab(pilot: Pilot[Any], key: str) -> None:
    """Open billing-export's session screen on tab `key` and wait for its reads."""
    await rows_shown(pilot)
    await pilot.press("enter", key)
    for _ in range(200):
        calls = [op for op, _ in pilot.app.client.calls]
        if "report" in calls and "events" in calls:
            break
        await pilot.pause(0.02)
    for _ in range(500):  # the report is the screen's last read: then every tab is filled
        if getattr(pilot.app.screen, "report", None):
            break
        await pilot.pause(0.02)
    await pilot.pause(0.3)


def test_fleet_view(snap_compare: Any, tmp_path: Path) -> None:
    """The fleet ordered by need: billing-export (failed, crash-loop, red, ✗, ⚠1) first, then
    mobile-sync (⚠1, yellow PLAN) and search-index (⚠1 stall); the header counts the states and
    "3 need a person" and ends within the width; no scrollbar under the rows; the details under
    the table are billing-export's failing verification, and under them its output (no key:
    the screen has room); the footer names billing-export with Start and Restart first."""
    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=with_output)


def test_fleet_view_at_80_columns(snap_compare: Any, tmp_path: Path) -> None:
    """At 80x24 PID, COST, UP and CHECKPOINT give way; SESSION, STATE, RST, PLAN and the last
    output stay readable."""
    assert snap_compare(app_for(tmp_path), terminal_size=(80, 24), run_before=rows_shown)


def test_fleet_filtered_by_warning(snap_compare: Any, tmp_path: Path) -> None:
    """`/` then "stall": the filter line shows the words, only search-index is listed, and the
    header says "filter 'stall': 1 shown"; the details include the demo note."""

    async def filtered(pilot: Pilot[Any]) -> None:
        await rows_shown(pilot)
        await pilot.press("slash", *"stall")
        table = pilot.app.query_one(SessionTable)
        for _ in range(500):  # the filter applies on the table's next step, later under load
            if table.order == ("search-index",):
                break
            await pilot.pause(0.02)
        for field in pilot.app.query(Input):  # a blinking cursor is drawn or not by the clock
            field.cursor_blink = False
        await pane_read(pilot, "search-index")

    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=filtered)


def test_fleet_output_pane_reads_the_selected_run(snap_compare: Any, tmp_path: Path) -> None:
    """At 200x60, with no key: every column, the header whole, and under the table and
    details the pane titled "billing-export: run 6 of 6 · 7 lines · readable" with the
    stream-json log as one readable line per event (init, text, Write, → result, Bash,
    result), never raw JSON; the footer names billing-export, its keys, then Open, Help."""
    assert snap_compare(app_for(tmp_path), terminal_size=(200, 60), run_before=with_output)


def test_help_lists_keys_and_the_legend(snap_compare: Any, tmp_path: Path) -> None:
    """`?`: every key as bound (K kills, j/k move) and the legend of ⚠N ✓ ✗ … RST PLAN."""

    async def help_open(pilot: Pilot[Any]) -> None:
        await rows_shown(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.2)

    assert snap_compare(app_for(tmp_path), terminal_size=(120, 50), run_before=help_open)


def test_kill_confirmation_names_the_session(snap_compare: Any, tmp_path: Path) -> None:
    """`K` on mobile-sync: a red-bordered dialog "Kill mobile-sync?" saying SIGKILL, no grace
    period, and that uncommitted work stays; y / n."""

    async def kill_asked(pilot: Pilot[Any]) -> None:
        await rows_shown(pilot)
        await pilot.press("j", "K")
        await pilot.pause(0.2)

    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=kill_asked)


@pytest.mark.parametrize(
    ("key", "shows"),
    [
        ("1", "Output: the stream-json run log summarised, one readable line per event"),
        ("2", "Progress: says there is no progress file in this fleet"),
        ("3", "Plan: 1/4 passing, ✓ CSV export then ✗ for the three failing items"),
        ("4", "Checkpoints: newest first, the newest ✗; below it the failing verify lines"),
        (
            "5",
            "Events: the open verify-failed warning above the events, times as 11-30 09:00:01",
        ),
        ("6", "Spend: says no budget is set, how to set one, and that no samples were taken"),
        ("7", "Report: herd's report rendered as markdown"),
        (
            "d",
            "Diff: the newest checkpoint 9f1c2ab against 41d07e3, the picker (work, then ✗ "
            "9f1c2ab, ✓ 41d07e3), two files with +/-, export.py's diff in green and red",
        ),
    ],
    ids=["output", "progress", "plan", "checkpoints", "events", "spend", "report", "diff"],
)
def test_session_screen_tabs(snap_compare: Any, tmp_path: Path, key: str, shows: str) -> None:
    """Enter on billing-export, then a tab: the headline says failed (crash-loop), run 6,
    plan 1/4, ⚠1, $0.88; the tab shows what `shows` says."""

    async def on_tab(pilot: Pilot[Any]) -> None:
        await open_tab(pilot, key)

    assert snap_compare(app_for(tmp_path), terminal_size=SIZE, run_before=on_tab), shows


def test_spend_tab_charts_each_budget_against_its_limit(snap_compare: Any, tmp_path: Path) -> None:
    """api-migration's Spend tab (7 after Enter): for cost_usd, tokens and wall_time a headline
    (spent of limit, %), a dim "limit" rule, green blocks rising from 09:00 to 10:00 and dim
    dots where the recent rate leads; tokens' dots reach the limit and the rule shows a red ✕
    with "runs out ~hh:mm at this rate"; then "restarts 0 of 20" and the projection line in
    yellow saying tokens run out with 5/6 passing, before the plan is done."""

    async def on_spend(pilot: Pilot[Any]) -> None:
        await rows_shown(pilot)
        table = pilot.app.query_one(SessionTable)
        table.move_cursor(row=table.get_row_index("api-migration"))
        await pilot.press("enter", "6")
        for _ in range(500):  # the tab shown and its charts drawn (not "reading the spend…")
            chart = pilot.app.screen.query("#spend-chart")
            if chart and isinstance(chart.first(Static).content, SpendCharts):
                break
            await pilot.pause(0.02)
        await pilot.pause(0.1)

    app = app_for(tmp_path, budgets=True)
    assert snap_compare(app, terminal_size=(120, 40), run_before=on_spend)


def test_new_session_dialog_asks_for_the_fields_of_herd_new(
    snap_compare: Any, tmp_path: Path
) -> None:
    """`c`: a "New session" dialog over the fleet: agent (claude), then name, prompt,
    repository, folder and budget USD, each with a hint; enter adds and starts, escape cancels."""
    app = app_for(tmp_path)
    app.config_path = tmp_path / "herd.toml"

    async def dialog_open(pilot: Pilot[Any]) -> None:
        await rows_shown(pilot)
        await pilot.press("c")
        for _ in range(500):  # the dialog shown, its fields mounted
            if isinstance(pilot.app.screen, NewSessionScreen) and pilot.app.screen.query("Input"):
                break
            await pilot.pause(0.02)
        for field in pilot.app.screen.query(Input):  # drawn or not by the clock otherwise
            field.cursor_blink = False
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(120, 40), run_before=dialog_open)
