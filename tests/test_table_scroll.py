"""A scrolled table builds only the rows the scroll changed, and looks as if drawn afresh.

The session table keeps each row's line (tui/dashboard/linetable.py): a `j` at the bottom of
the screen used to build every visible row again (the slowest keys under a busy fleet); now the
rows that only moved come from what was kept. These tests hold every scrolled picture to the
same table drawn from scratch, through cell updates, cursor moves, single-row and page scrolls
both ways.
"""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from agentherd.tui.dashboard.linetable import LineTable

ROWS = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class TableApp(App[None]):
    """One table of ROWS rows, more than fit on screen."""

    def compose(self) -> ComposeResult:
        yield LineTable(id="t")

    def on_mount(self) -> None:
        table = self.query_one(LineTable)
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
    if isinstance(widget, LineTable):
        widget._lines.clear()
    widget.refresh()
    return painted(widget)


@pytest.mark.anyio
async def test_scrolled_table_is_what_a_fresh_draw_shows() -> None:
    """Down past the screen's end one row at a time, a page at a time, back up, with cells
    changing on screen in between: each picture equals the table drawn from scratch (rows in
    the wrong place, a stale cell or a cursor left behind fail here)."""
    app = TableApp()
    async with app.run_test(size=(50, 12)) as pilot:
        table = app.query_one(LineTable)
        keys = ["down"] * 14 + ["pagedown", "down", "up"] + ["up"] * 12 + ["pagedown"] * 3
        keys += ["pageup", "end", "up", "home"]
        offsets = set()
        for step, key in enumerate(keys):
            # A fleet update on a row on screen, not yet painted when the key scrolls (as the
            # dashboard's feed does between two frames), every other key.
            if step % 2 == 0:
                first = table.scroll_offset.y
                row = first + step % (table.size.height - 1)
                table.set_cell(f"s{row:03d}", "last", f"changed at {step}")
            app.post_message(events.Key(key, None))  # as the terminal driver does
            await pilot.pause()
            shown = painted(table)
            assert shown == afresh(table), (step, key, table.scroll_offset)
            bar = table.vertical_scrollbar
            assert painted(bar) == afresh(bar), (step, key, bar.position)
            offsets.add(table.scroll_offset.y)
        assert len(offsets) > 10  # it did scroll, by one row and by pages


@pytest.mark.anyio
async def test_a_one_row_scroll_builds_two_rows_not_the_screen() -> None:
    """A `down` at the bottom of the screen scrolls by one row and builds the two rows the
    cursor left and reached (one of them the row it uncovered); the rows that only moved come
    from their kept lines, not from their cells again."""
    app = TableApp()
    async with app.run_test(size=(50, 12)) as pilot:
        table = app.query_one(LineTable)
        visible = table.size.height - 1  # the header takes a line
        for _ in range(visible - 1):
            await pilot.press("down")
        await pilot.pause()
        assert table.scroll_offset.y == 0
        built: list[int] = []
        draw = table._draw

        def counting(index: int, *args: Any) -> Strip:
            built.append(index)
            return draw(index, *args)

        table._draw = counting  # type: ignore[method-assign]
        await pilot.press("down")
        await pilot.pause()
        assert table.scroll_offset.y == 1
        assert len(built) <= 2, built
        assert painted(table) == afresh(table)
