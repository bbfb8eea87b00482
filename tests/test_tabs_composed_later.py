"""The session screen's tabs composed after its first paint (Textual's `Lazy`): what a reader
hands them before they are mounted is what they show once they are, and the Diff tab asked to
read before it is mounted reads once it is."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.lazy import Lazy
from textual.widgets import DataTable, Log, Static, TabbedContent, TabPane

from agentherd.tui.dashboard.checkpoints_tab import READING_CHECKPOINTS, CheckpointsTab
from agentherd.tui.dashboard.diff_view import DiffView
from agentherd.tui.dashboard.events_tab import EventsTab

CHECKPOINTS = [  # oldest first, as the report lists them
    {"sha": "a" * 40, "at": "2026-12-05T01:00:00Z", "subject": "first", "verified": True},
    {"sha": "b" * 40, "at": "2026-12-05T02:00:00Z", "subject": "second", "verified": False},
]


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


class Tabs(App[None]):
    """A front tab and the three parts, each composed later in a hidden tab."""

    def __init__(self) -> None:
        super().__init__()
        self.checkpoints = CheckpointsTab()
        self.events = EventsTab(shown=3)
        self.diff = DiffView()
        self.read: list[str] = []
        self.ready_at_mount: tuple[bool, ...] = ()
        self.selected_at_mount: dict[str, Any] | None = None
        self.read_at_mount: list[str] = []

    def compose(self) -> ComposeResult:
        with TabbedContent(initial="front"):
            with TabPane("Front", id="front"):
                yield Static("front")
            for pane, part in (("c", self.checkpoints), ("e", self.events), ("d", self.diff)):
                with TabPane(pane, id=pane):
                    yield Lazy(part)

    def on_mount(self) -> None:
        """Before the first paint, as a reader answering at once: the parts are not mounted."""
        self.ready_at_mount = (self.checkpoints.ready, self.events.ready, self.diff.ready)
        self.selected_at_mount = self.checkpoints.selected()
        self.checkpoints.show(CHECKPOINTS)
        self.events.show(["one", "two", "three", "four"], "⚠ open: stall")
        self.diff.show("alpha")
        self.read_at_mount = list(self.read)


@pytest.mark.anyio
async def test_what_a_tab_was_given_before_it_was_mounted_is_shown_once_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = Tabs()

    def read_list(view: DiffView, session: str, target: Any, against: str) -> None:
        app.read.append(session)

    monkeypatch.setattr(DiffView, "_read_list", read_list)
    async with app.run_test() as pilot:
        assert app.ready_at_mount == (False, False, False)
        assert app.selected_at_mount is None
        assert app.read_at_mount == [], "nothing read before the view is mounted"

        tabs = app.query_one(TabbedContent)
        for pane in ("c", "e", "d"):
            tabs.active = pane
            await pilot.pause()
        await pilot.pause()
        assert app.checkpoints.ready and app.events.ready and app.diff.ready

        table = app.checkpoints.query_one(DataTable)
        assert [table.get_row_at(i)[4] for i in range(table.row_count)] == ["second", "first"]
        assert app.checkpoints.selected() == CHECKPOINTS[1]
        detail = str(app.checkpoints.query_one("#checkpoint-detail", Static).render())
        assert detail not in ("", READING_CHECKPOINTS), detail
        assert list(app.events.query_one(Log).lines) == ["two", "three", "four"]
        warnings = str(app.events.query_one("#open-warnings", Static).render())
        assert warnings == "⚠ open: stall"
        assert app.read == ["alpha"], "read once mounted"

        app.checkpoints.show(None)  # another session: blank until read
        await pilot.pause()
        assert table.row_count == 0 and app.checkpoints.selected() is None
        detail = str(app.checkpoints.query_one("#checkpoint-detail", Static).render())
        assert detail == READING_CHECKPOINTS
