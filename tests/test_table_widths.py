"""The session table: column widths wider at once and narrower when they settle; rows cached.

A narrower column re-renders the whole table, and DataTable measured every cell of a column
each time one cell got shorter; with 200 busy sessions that landed on key presses (60 ms of a
key's CPU). These tests hold the table to never cutting a cell, and to narrowing only when
`settle_widths` runs (the fleet view's clock does it every few seconds).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from snapshot_fleet import ReplayClient, statuses, write_logs
from test_dashboard import cell, until
from textual.widgets.data_table import ColumnKey

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.messages import Snapshot
from agentherd.tui.dashboard.widgets import SessionTable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def width(table: SessionTable, column: str) -> int:
    """The content width of one column."""
    return table.columns[ColumnKey(column)].content_width


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
        name = table._order[0]
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
        await until(pilot, lambda: "4242" not in table.get_column("restarts"), "back")
        table._too_wide.update(table.columns)  # settle every column, as if each had shrunk
        table.settle_widths()
        for key, column in table.columns.items():
            if key.value == "last":
                continue  # cut to the room left, not to its cells
            cells = [len(str(c)) for c in table.get_column(key)]
            assert column.content_width == max([len(column.label.plain), *cells]), key.value


@pytest.mark.anyio
async def test_rows_cached_whatever_row_the_cursor_is_on_look_as_datatable_draws_them(
    tmp_path: Path,
) -> None:
    """A row's rendering is cached by whether the cursor is on it, not by where the cursor
    is; after moves down and up every row (cursor row included) is what DataTable draws."""
    from textual.widgets import DataTable

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        for key in ("j", "j", "k"):
            await pilot.press(key)
        await pilot.pause()
        assert table.cursor_row == 1
        style = table.rich_style
        for row_key in [*table.rows, table._header_row_key]:
            ours = table._render_line_in_row(
                row_key, 0, style, table.cursor_coordinate, table.hover_coordinate
            )
            theirs = DataTable._render_line_in_row(
                table, row_key, 0, style, table.cursor_coordinate, table.hover_coordinate
            )
            assert ours == theirs, row_key


@pytest.mark.anyio
async def test_a_cursor_move_builds_only_the_two_rows_it_touches_and_lines_look_the_same(
    tmp_path: Path,
) -> None:
    """DataTable keyed each cached line by the cursor's position, so a `j` built every visible
    line again (the per-key cost behind a 200-row table); here it builds the row it left and
    the row it reached, and every line is still what DataTable draws."""
    from textual.widgets import DataTable

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        await pilot.pause()
        built: list[object] = []
        original = table._render_line_in_row

        def counting(row_key: object, *args: object, **kwargs: object) -> object:
            built.append(row_key)
            return original(row_key, *args, **kwargs)  # type: ignore[arg-type]

        table._render_line_in_row = counting  # type: ignore[method-assign]
        await pilot.press("j")
        await pilot.pause()
        assert table.cursor_row == 1
        assert 1 <= len(set(built)) <= 2, built
        style = table.rich_style
        for y in range(table.row_count + 1):
            theirs = DataTable._render_line(table, y, 0, table.size.width, style)
            assert table._render_line(y, 0, table.size.width, style) == theirs, y
