"""The session table looks exactly as Textual's DataTable holding the same cells.

tui/dashboard/linetable.py draws the table itself through the line API (DataTable redrew every
visible cell on each update under a busy fleet). These tests put a LineTable and a DataTable
with the same columns and rows side by side and hold every line, segment for segment (styles
and the cells' meta included), to be the same: unfocused and focused, the cursor on any row,
the mouse over a row or the header, scrolled down and back.
"""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import DataTable

from agentherd.tui.dashboard.linetable import LineTable

COLUMNS = ("name", "state", "rst", "last")
ROWS = 40


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def row(index: int) -> tuple[Text, ...]:
    """A row of plain cells, some styled, of varied widths."""
    state = ("running", "green") if index % 3 else ("failed (crash-loop) ⚠1", "bold red")
    return (
        Text(f"s{index:03d}"),
        Text(state[0], style=state[1]),
        Text(str(index * 7 % 13)),
        Text(f"step {index} of the task" + "…" * (index % 4), style="dim" if index % 5 else ""),
    )


class SideBySide(App[None]):
    """A LineTable above a DataTable, the same cells in both."""

    CSS = "LineTable, DataTable { height: 12; }"

    def compose(self) -> ComposeResult:
        yield LineTable(id="ours")
        yield DataTable(id="theirs", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        ours, theirs = self.query_one(LineTable), self.query_one(DataTable)
        for key in COLUMNS:
            ours.add_column(key.upper(), key=key)
            theirs.add_column(key.upper(), key=key)
        for index in range(ROWS):
            ours.add_row(*row(index), key=f"s{index:03d}")
            theirs.add_row(*row(index), key=f"s{index:03d}")


def lines(widget: Widget) -> list[Strip]:
    """The widget's lines drawn now, as the screen gets them."""
    widget.refresh()
    return widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))


def same(app: SideBySide, what: str) -> None:
    """Both tables draw the same lines."""
    ours, theirs = app.query_one(LineTable), app.query_one(DataTable)
    assert ours.scroll_offset == theirs.scroll_offset, what
    mine, want = lines(ours), lines(theirs)
    for y, (a, b) in enumerate(zip(mine, want, strict=True)):
        assert list(a) == list(b), (what, y, a.text, b.text)


@pytest.mark.anyio
async def test_lines_are_datatables_as_the_cursor_walks_and_scrolls() -> None:
    """Without the focus, every line equals DataTable's with the cursor on the first row, then
    walked down past the screen (scrolling), paged, and back to the top."""
    app = SideBySide()
    async with app.run_test(size=(90, 30)) as pilot:
        ours, theirs = app.query_one(LineTable), app.query_one(DataTable)
        app.set_focus(None)
        await pilot.pause()
        same(app, "at the start")
        for target in (1, 2, 5, 10, 11, 12, 13, 25, 39, 38, 20, 0):
            ours.move_cursor(row=target)
            theirs.move_cursor(row=target)
            await pilot.pause()
            assert ours.cursor_row == theirs.cursor_row == target
            same(app, f"cursor on {target}")


@pytest.mark.anyio
async def test_focused_cursor_lines_are_datatables() -> None:
    """With the focus, the cursor row is drawn in the focused cursor's colours, as DataTable
    draws it with the focus (each table focused in turn, its picture kept)."""
    app = SideBySide()
    async with app.run_test(size=(90, 30)) as pilot:
        ours, theirs = app.query_one(LineTable), app.query_one(DataTable)
        for target in (0, 3, 17):
            ours.move_cursor(row=target)
            theirs.move_cursor(row=target)
            ours.focus()
            await pilot.pause()
            mine = lines(ours)
            theirs.focus()
            await pilot.pause()
            want = lines(theirs)
            assert ours.scroll_offset == theirs.scroll_offset
            for y, (a, b) in enumerate(zip(mine, want, strict=True)):
                assert list(a) == list(b), (target, y, a.text, b.text)


@pytest.mark.anyio
async def test_the_mouse_over_a_row_and_the_header_looks_as_datatable() -> None:
    """The row under the mouse and the header under the mouse take DataTable's hover look."""
    app = SideBySide()
    async with app.run_test(size=(90, 30)) as pilot:
        app.set_focus(None)
        for offset in ((3, 4), (3, 0), (60, 7)):
            await pilot.hover(LineTable, offset=offset)
            mine = lines(app.query_one(LineTable))
            await pilot.hover(DataTable, offset=offset)
            want = lines(app.query_one(DataTable))
            for y, (a, b) in enumerate(zip(mine, want, strict=True)):
                assert list(a) == list(b), (offset, y, a.text, b.text)
