"""What keeps the session screen's keys cheap, against a real daemon: the footer rebuilt only
when its keys change, the report drawn as one widget (bench/dashboard_speed.py measures)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_dashboard import NAMES, until
from test_dashboard_keys import fleet
from textual.geometry import Region
from textual.widgets import Static, TabbedContent

from agentherd.supervisor.api.client import Client
from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.footer import SessionFooter
from agentherd.tui.dashboard.session_screen import TABS, SessionScreen
from agentherd.tui.dashboard.widgets import SessionTable

__all__ = ["fleet"]  # the fixture, shared with test_dashboard

SAME_KEYS_TABS = ("progress", "plan", "checkpoints", "events", "spend", "report", "output")
"""Tabs whose content offers no key of its own in the footer (the Terminal tab's does)."""


@pytest.mark.anyio
async def test_a_tab_switch_keeps_the_footer(fleet: tuple[Path, Client]) -> None:
    """A tab switch moves the focus, which Textual announces as new bindings, but the keys the
    footer shows stay the same: the footer keeps its keys instead of building every one again
    (that rebuild was a third of the dashboard's CPU per switch in bench/dashboard_speed.py's
    profile at 200 sessions)."""
    socket_path, _ = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == len(NAMES), "rows")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        screen = app.screen
        footer = screen.query_one(SessionFooter)
        tabs = screen.query_one(TabbedContent)
        await until(pilot, lambda: screen.focused is not None, "the output's focus")
        await until(pilot, lambda: len(footer.children) > 3, "the footer's keys")
        await pilot.pause()
        shown = list(footer.children)
        numbers = {tab: str(n) for n, (tab, _) in enumerate(TABS, start=1)}
        for tab in SAME_KEYS_TABS:
            await pilot.press(numbers[tab])
            await until(pilot, lambda t=tab: tabs.active == t, f"the {tab} tab")
            await until(pilot, lambda t=tab: screen.focused in tabs.get_pane(t).query("*"), "focus")
            await pilot.pause()
            await pilot.pause()
            assert list(footer.children) == shown, f"the footer was built again on the {tab} tab"
        assert "Back" in " ".join(str(getattr(key, "description", "")) for key in shown)


@pytest.mark.anyio
async def test_the_report_tab_is_one_widget(fleet: tuple[Path, Client]) -> None:
    """The Report tab shows the report's text in one widget, so showing the tab lays out one
    widget however long the report (a widget per markdown block was 65 % of a switch's CPU)."""
    socket_path, _ = fleet
    app = HerdApp(socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == len(NAMES), "rows")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        await pilot.press("7")
        await until(pilot, lambda: bool(screen.report), "the report")
        await pilot.pause()
        report = screen.query_one("#report-text")
        assert isinstance(report, Static) and not report.children
        lines = report.render_lines(Region(0, 0, report.size.width, 3))
        assert "herd report" in "".join(line.text for line in lines)
