"""The session table: column widths wider at once and narrower when they settle; rows kept.

A narrower column redraws the whole table, and DataTable measured every cell of a column
each time one cell got shorter; with 200 busy sessions that landed on key presses (60 ms of a
key's CPU). These tests hold the table to never cutting a cell, and to narrowing only when
`settle_widths` runs (the fleet view's clock does it every few seconds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from snapshot_fleet import ReplayClient, statuses, write_logs
from test_dashboard import cell, until
from textual.geometry import Region
from textual.strip import Strip

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.messages import Snapshot
from agentherd.tui.dashboard.widgets import SessionTable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def width(table: SessionTable, column: str) -> int:
    """The content width of one column."""
    return table.columns[column].content_width


@pytest.mark.anyio
async def test_a_longer_cell_widens_its_column_at_once_and_a_shorter_one_at_settle(
    tmp_path: Path,
) -> None:
    """A restart count of 123456 widens RST as it arrives; when it is gone the column keeps its
    width (no whole-table re-render per change) until the widths settle, then fits again."""
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        table._settle_at = float("inf")  # the clock must not settle behind the test's back
        before = width(table, "restarts")
        name = table.order[0]
        now = {s.session: s for s in statuses()}
        original = now[name]
        now[name] = original.model_copy(update={"restarts": 123456})
        app.post_message(Snapshot(list(now.values()), {name}))
        await until(pilot, lambda: cell(app, name, "restarts") == "123456", "the new count")
        assert width(table, "restarts") == 6 > before
        now[name] = original
        app.post_message(Snapshot(list(now.values()), {name}))
        await until(pilot, lambda: cell(app, name, "restarts") == str(original.restarts), "back")
        assert width(table, "restarts") == 6  # not narrowed for one shorter cell
        table.settle_widths()
        assert width(table, "restarts") == before


@pytest.mark.anyio
async def test_settled_widths_fit_the_widest_cell_or_the_label(tmp_path: Path) -> None:
    """After settling, every column is as wide as its widest cell or its label, no wider:
    the counts kept per column agree with the cells."""
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(200, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        table._settle_at = float("inf")
        now = {s.session: s for s in statuses()}
        for name in list(now)[:3]:
            now[name] = now[name].model_copy(update={"restarts": 4242})
            app.post_message(Snapshot(list(now.values()), {name}))
        await until(pilot, lambda: width(table, "restarts") == 4, "wider")
        now = {s.session: s for s in statuses()}
        app.post_message(Snapshot(list(now.values()), None))
        await until(
            pilot, lambda: "4242" not in [str(c) for c in table.get_column("restarts")], "back"
        )
        table.grid.too_wide.update(table.columns)  # settle every column, as if each had shrunk
        table.settle_widths()
        for key, column in table.columns.items():
            if key == "last":
                continue  # cut to the room left, not to its cells
            cells = [len(str(c)) for c in table.get_column(key)]
            assert column.content_width == max([len(column.label.plain), *cells]), key


@pytest.mark.anyio
async def test_a_cursor_move_draws_only_the_two_rows_it_touches_and_lines_look_the_same(
    tmp_path: Path,
) -> None:
    """A row's line is kept by whether the cursor is on it, not by where the cursor is: a `j`
    draws at most the row it left and the row it reached (not every visible row), and every
    line is still what the table draws with nothing kept."""
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        for key in ("j", "k"):  # the first picture (focus, the last outputs fitted) drawn
            await pilot.press(key)
        await pilot.pause()
        built: list[int] = []
        original = table._draw

        def counting(index: int, *args: Any) -> Strip:
            built.append(index)
            return original(index, *args)

        table._draw = counting  # type: ignore[method-assign]
        for key, row in (("j", 1), ("j", 2), ("j", 3), ("k", 2)):
            built.clear()
            left = table.cursor_row
            await pilot.press(key)
            await pilot.pause()
            assert table.cursor_row == row
            assert set(built) <= {left, row}, built  # those not kept yet in their new look
        width = table.size.width
        served = table.render_lines(Region(0, 0, width, table.size.height))
        table._lines.clear()
        table.refresh()
        assert served == table.render_lines(Region(0, 0, width, table.size.height))
