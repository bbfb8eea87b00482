"""The session table draws its cells without Rich's pipeline and shows no stale line.

Each cell of the table is one line of plain text; tui/dashboard/fastcell.py builds its segments
directly
(Rich's measure-wrap-crop pipeline per cell was most of the dashboard's CPU under a busy
fleet). These tests hold every cell to the segments Rich's pipeline gives, and the running
dashboard's kept lines to a draw from nothing (tests/test_table_look.py holds the table's
lines to DataTable's).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from rich.console import Console
from rich.padding import Padding
from rich.style import Style
from rich.text import Text
from snapshot_fleet import ReplayClient, write_logs
from test_dashboard import until
from textual.geometry import Region
from textual.renderables.styled import Styled

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.fastcell import plain_cell_line
from agentherd.tui.dashboard.widgets import SessionTable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_plain_cells_are_the_segments_rich_draws() -> None:
    """Random one-line texts (wide, combining, emoji, empty; styled or not; longer than the
    cell or shorter) under and over random styles: the same segments as Rich's pipeline."""
    console = Console(width=200)
    rng = random.Random(13)
    alphabet = "abc xyz-_.:/✓✗…⚠世界é\u0301🙂 0123"
    styles = ["", "dim", "bold", "bold red", "yellow"]
    pres = [Style(color="red") + Style.from_meta({"row": 3, "column": 1}), Style.null()]
    posts = [Style(bgcolor="blue"), Style.null(), Style(color="white", reverse=True)]
    for _ in range(3000):
        plain = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        text, width = Text(plain, style=rng.choice(styles)), rng.randint(3, 40)
        pre, post = rng.choice(pres), rng.choice(posts)
        options = console.options.update_dimensions(width, 1).update(no_wrap=True)
        styled = Styled(Padding(text, (0, 1)), pre_style=pre, post_style=post)
        want = console.render_lines(styled, options)
        assert [plain_cell_line(text, width, 1, pre, post)] == want, (plain, width)


def test_text_that_is_not_plain_is_left_to_rich() -> None:
    """Spans, new lines and tabs are not built here (None: DataTable renders them)."""
    style = Style(color="red")
    assert plain_cell_line(Text.from_markup("[b]x[/b] y"), 10, 1, style, style) is None
    assert plain_cell_line(Text("a\nb"), 10, 1, style, style) is None
    assert plain_cell_line(Text("a\tb"), 10, 1, style, style) is None


@pytest.mark.anyio
async def test_every_cell_of_the_dashboards_table_is_plain(tmp_path: Path) -> None:
    """In the running dashboard every cell (header included) is one line of plain text, so the
    fast path (the one compared with Rich above) is the one taken for each of them."""
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        style = Style(color="red")
        checked = 0
        for row in range(table.row_count):
            for cell in table.get_row_at(row):
                assert plain_cell_line(cell, 20, 1, style, style) is not None, cell
                checked += 1
        for column in table.columns.values():
            assert plain_cell_line(column.label, 20, 1, style, style) is not None
        assert checked == 6 * len(table.columns)


@pytest.mark.anyio
async def test_a_painted_update_shows_the_new_cells_and_leaves_no_stale_line(
    tmp_path: Path,
) -> None:
    """New last outputs for some rows, painted: every line the table serves from what it kept
    is the line it builds from nothing, so a kept line of an old cell that was not dropped
    fails here; the new text is on screen."""
    from snapshot_fleet import statuses

    from agentherd.tui.dashboard.messages import Snapshot

    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(160, 40)) as pilot:
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 6, "rows")
        await pilot.press("j")
        await pilot.pause()
        now = {s.session: s for s in statuses()}
        names = table.order[:3]
        for round_ in range(3):
            for name in names:
                now[name] = now[name].model_copy(update={"last_line": f"fresh {round_} {name}"})
            app.post_message(Snapshot(list(now.values()), set(names)))
            want = f"fresh {round_} {names[0]}"
            await until(
                pilot,
                lambda want=want: str(table.get_cell(names[0], "last")) == want,
                "painted",
            )
            await pilot.pause()
            region = Region(0, 0, table.size.width, table.row_count + 1)
            served = table.render_lines(region)
            table._lines.clear()
            table.refresh()
            for y, line in enumerate(table.render_lines(region)):
                assert line == served[y], y
            text = "".join(line.text for line in served)
            assert all(f"fresh {round_} {name}" in text for name in names)
