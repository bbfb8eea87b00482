"""A scrolled table draws only the rows the scroll uncovered, and looks as if drawn afresh.

Its scrollbar likewise repaints only the lines its thumb moved on (tui/dashboard/linescrollbar.py).

The session table keeps the styled lines that a scroll only moved
(tui/dashboard/scrollshift.py): a `j`
at the bottom of the screen used to draw every visible row again (the slowest keys under a
busy fleet). These tests hold every scrolled picture to the same table drawn from scratch,
through cell updates, cursor moves, single-row and page scrolls both ways.
"""

from __future__ import annotations

import pytest
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from agentherd.tui.dashboard.linescrollbar import LineScrollBar
from agentherd.tui.dashboard.rowtable import RowCachedTable

ROWS = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class TableApp(App[None]):
    """One table of ROWS rows, more than fit on screen."""

    def compose(self) -> ComposeResult:
        yield RowCachedTable(cursor_type="row", zebra_stripes=True, id="t")

    def on_mount(self) -> None:
        table = self.query_one(RowCachedTable)
        for key in ("name", "state", "last"):
            table.add_column(key.upper(), key=key)
        for index in range(ROWS):
            cells = (Text(f"s{index:03d}"), Text("running", style="green"), Text(f"line {index}"))
            table.add_row(*cells, key=f"s{index:03d}")


def painted(widget: Widget) -> list[Strip]:
    """The widget's lines as the screen has them (its cache of styled lines)."""
    return widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))


def afresh(widget: Widget) -> list[Strip]:
    """The widget's lines drawn from scratch (nothing kept)."""
    widget.refresh()
    return painted(widget)


@pytest.mark.anyio
async def test_scrolled_table_is_what_a_fresh_draw_shows() -> None:
    """Down past the screen's end one row at a time, a page at a time, back up, with cells
    changing on screen in between: each picture equals the table drawn from scratch (rows in
    the wrong place, a stale cell or a cursor left behind fail here)."""
    app = TableApp()
    async with app.run_test(size=(50, 12)) as pilot:
        table = app.query_one(RowCachedTable)
        keys = ["down"] * 14 + ["pagedown", "down", "up"] + ["up"] * 12 + ["pagedown"] * 3
        keys += ["pageup", "end", "up", "home"]
        offsets = set()
        for step, key in enumerate(keys):
            # A fleet update on a row on screen, not yet painted when the key scrolls (as the
            # dashboard's feed does between two frames), every other key.
            if step % 2 == 0:
                first = table.scroll_offset.y
                row = first + step % (table.size.height - 1)
                table.update_cell(f"s{row:03d}", "last", Text(f"changed at {step}"))
            app.post_message(events.Key(key, None))  # as the terminal driver does
            await pilot.pause()
            shown = painted(table)
            assert shown == afresh(table), (step, key, table.scroll_offset)
            bar = table.vertical_scrollbar
            assert isinstance(bar, LineScrollBar)
            assert painted(bar) == afresh(bar), (step, key, bar.position)
            offsets.add(table.scroll_offset.y)
        assert len(offsets) > 10  # it did scroll, by one row and by pages


@pytest.mark.anyio
async def test_a_one_row_scroll_draws_two_rows_not_the_screen() -> None:
    """A `down` at the bottom of the screen scrolls by one row and draws the two rows the
    cursor left and reached (one of them the row it uncovered), not every row on screen."""
    app = TableApp()
    async with app.run_test(size=(50, 12)) as pilot:
        table = app.query_one(RowCachedTable)
        visible = table.size.height - 1  # the header takes a line
        for _ in range(visible - 1):
            await pilot.press("down")
        await pilot.pause()
        assert table.scroll_offset.y == 0
        drawn: list[int] = []
        render_line = table.render_line

        def counting(y: int) -> Strip:
            drawn.append(y)
            return render_line(y)

        table.render_line = counting  # type: ignore[method-assign]
        await pilot.press("down")
        await pilot.pause()
        assert table.scroll_offset.y == 1
        assert len(drawn) <= 2, drawn
        assert painted(table) == afresh(table)
