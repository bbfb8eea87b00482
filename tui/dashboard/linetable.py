"""A table of one-line text cells with a row cursor, drawn through Textual's line API.

DataTable drops every cached rendering on each `update_cell` (its caches are keyed by an
update count), so a busy fleet made it draw every visible cell again through Rich many times
a second, and a key press waited behind that. Here each row's line is kept until one of its
cells, the column widths or the styles change, and a cell is drawn without Rich's pipeline
(`fastcell.py`). It looks as DataTable does: the same component classes and CSS, so the
app's theme and `tests/test_table_look.py` hold it to DataTable's picture.

The columns, rows and cells, and the widths the columns need, are a TableGrid (tablegrid.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agentherd.tui.dashboard.fastcell import plain_cell_line
from agentherd.tui.dashboard.tablegrid import CELL_PADDING, Column, TableGrid

HEADER_HEIGHT = 1
"""The header row's lines; it stays on top while the rows scroll."""


@lru_cache(maxsize=4096)
def cell_meta(row: int, column: int, out_of_bounds: bool = False) -> Style:
    """The meta DataTable puts on a cell (where it is): the same segments, the same picture."""
    if out_of_bounds:
        return Style.from_meta({"row": row, "column": column, "out_of_bounds": True})
    return Style.from_meta({"row": row, "column": column})


@dataclass(frozen=True)
class PaintStyles:
    """The Rich styles one paint draws with (all of them from the widget's CSS)."""

    base: Style
    header: Style
    even: Style
    odd: Style
    cursor: Style
    hover: Style
    header_hover: Style


class LineTable(ScrollView, can_focus=True):
    """Rows of one-line Text cells under a fixed header, with a row cursor; `set_cell` costs
    the redraw of that one row."""

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "cursor_top", "Top", show=False),
        Binding("ctrl+end", "cursor_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "datatable--cursor",
        "datatable--hover",
        "datatable--header",
        "datatable--header-hover",
        "datatable--odd-row",
        "datatable--even-row",
    }
    """DataTable's names, so a theme written for DataTable styles this table too."""

    DEFAULT_CSS = """
    LineTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .datatable--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark {
            & > .datatable--even-row {
                background: $surface-darken-1 40%;
            }
        }
        & > .datatable--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .datatable--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .datatable--odd-row {
        }
        & > .datatable--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .datatable--header-hover {
            background: $accent 30%;
        }
        & > .datatable--hover {
            background: $block-hover-background;
        }
    }
    """
    """DataTable's CSS for the parts a row-cursor table of plain cells has."""

    class RowHighlighted(Message):
        """The cursor moved onto a row."""

        def __init__(self, table: LineTable, cursor_row: int, row_key: str) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row
            self.row_key = row_key

        @property
        def control(self) -> LineTable:
            """The table the cursor moved in."""
            return self.table

    class RowSelected(Message):
        """Enter, or a click on the cursor's row: the row was chosen."""

        def __init__(self, table: LineTable, cursor_row: int, row_key: str) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row
            self.row_key = row_key

        @property
        def control(self) -> LineTable:
            """The table the row was chosen in."""
            return self.table

    class HeaderSelected(Message):
        """A click on a column's label."""

        def __init__(self, table: LineTable, column_key: str) -> None:
            super().__init__()
            self.table = table
            self.column_key = column_key

        @property
        def control(self) -> LineTable:
            """The table whose header was clicked."""
            return self.table

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.grid = TableGrid()
        """The columns, rows and cells (tablegrid.py)."""
        self._cursor = 0
        self._hover: int | None = None
        """The row under the mouse (-1: the header), None when the keyboard moved last."""
        self._lines: dict[str, dict[tuple[bool, bool], Strip]] = {}
        """Per row, its drawn line (full width) by (cursor on it, mouse on it)."""
        self._painted: tuple[PaintStyles, tuple[int, ...], int] | None = None
        """The styles, column widths and widget width the kept lines were drawn with."""
        self._paint: PaintStyles | None = None

    # ----- the data -----------------------------------------------------------------------

    @property
    def columns(self) -> dict[str, Column]:
        """The columns in their order, by key."""
        return self.grid.columns

    @property
    def row_count(self) -> int:
        """How many rows the table has."""
        return len(self.grid.keys)

    @property
    def cursor_row(self) -> int:
        """The cursor's row (0 when the table is empty)."""
        return self._cursor

    @property
    def cursor_row_key(self) -> str | None:
        """The key of the cursor's row (None when the table is empty)."""
        keys = self.grid.keys
        return keys[self._cursor] if keys else None

    def add_column(self, label: str, *, key: str) -> None:
        """A new last column titled `label` (as wide as the label until cells widen it)."""
        self.grid.add_column(label, key)
        self._changed_shape()

    def add_row(self, *cells: Text, key: str) -> None:
        """A new last row with these cells (in the columns' order); columns widen to fit."""
        self.grid.add_row(cells, key)
        if self.row_count == 1:
            self._post_highlight()
        self._changed_shape()

    def clear(self, columns: bool = False) -> None:
        """No rows (and with `columns`, no columns either); the cursor and scroll go home."""
        self.grid.clear(columns)
        self._lines.clear()
        self._cursor = 0
        self._hover = None
        self._changed_shape()
        self.scroll_to(0, 0, animate=False, force=True)

    def get_cell(self, row_key: str, column_key: str) -> Text:
        """The cell in row `row_key` and column `column_key` (KeyError if there is none)."""
        return self.grid.cells[row_key][column_key]

    def get_row_at(self, row_index: int) -> list[Text]:
        """The cells of the row at `row_index`, in the columns' order."""
        return self.grid.row_at(row_index)

    def get_column(self, column_key: str) -> list[Text]:
        """The cells of one column, top to bottom."""
        return self.grid.column(column_key)

    def get_row_index(self, row_key: str) -> int:
        """Where row `row_key` is, top to bottom (KeyError if there is none)."""
        return self.grid.index[row_key]

    def set_cell(
        self, row: str, column: str, text: str, style: str = "", grow_only: bool = False
    ) -> None:
        """Put `text` in a cell and redraw its row; its column widens at once to fit it (all
        rows redraw) and narrows (if it may) at the next `settle_widths`."""
        if self.grid.set_cell(row, column, Text(text, style=style), grow_only):
            self._changed_shape()
            return
        self._lines.pop(row, None)
        self._refresh_row(self.grid.index[row])

    def settle_widths(self) -> None:
        """Fit the columns a shorter cell left too wide (one redraw of the table)."""
        if self.grid.settle_widths():
            self._changed_shape()

    def narrow_column(self, column: str, most: int) -> None:
        """Fit a grow-only column to what its cells hold now, counting none wider than `most`
        (rows off screen are cut to it when scrolled to)."""
        if self.grid.narrow_column(column, most):
            self._changed_shape()

    def _changed_shape(self) -> None:
        """Rows, columns or widths changed: a new virtual size and a full redraw."""
        self.virtual_size = Size(self.grid.width, self.row_count + HEADER_HEIGHT)
        self.refresh()

    # ----- the cursor -----------------------------------------------------------------------

    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True) -> None:
        """Put the cursor on row `row` (kept inside the table) and scroll it into view."""
        row = max(0, min(row, len(self.grid.keys) - 1))
        old, self._cursor = self._cursor, row
        if scroll:
            self._scroll_cursor_into_view(animate)
        if old != row:
            self._refresh_row(old)
            self._refresh_row(row)
            self._post_highlight()

    def _post_highlight(self) -> None:
        if self.grid.keys:
            self.post_message(self.RowHighlighted(self, self._cursor, self.grid.keys[self._cursor]))

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        """Scroll so that the cursor's row shows below the header (as DataTable does)."""
        region = Region(int(self.scroll_x), HEADER_HEIGHT + self._cursor, self.size.width, 1)
        spacing = Spacing(HEADER_HEIGHT, 0, 0, 0)
        self.scroll_to_region(region, animate=animate, spacing=spacing, force=True)

    def _refresh_row(self, row_index: int) -> None:
        """Redraw one row's line where it is on screen (nothing when it is off screen)."""
        y = HEADER_HEIGHT + row_index - int(self.scroll_y)
        if HEADER_HEIGHT <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def _set_hover(self, row: int | None) -> None:
        """Show the mouse's row (None: no row shows it)."""
        old, self._hover = self._hover, row
        if old == row:
            return
        for index in (old, row):
            if index == -1:
                self.refresh(Region(0, 0, self.size.width, HEADER_HEIGHT))
            elif index is not None:
                self._refresh_row(index)

    def action_cursor_up(self) -> None:
        """One row up."""
        self._set_hover(None)
        self.move_cursor(row=self._cursor - 1)

    def action_cursor_down(self) -> None:
        """One row down."""
        self._set_hover(None)
        self.move_cursor(row=self._cursor + 1)

    def action_cursor_top(self) -> None:
        """The first row."""
        self._set_hover(None)
        self.move_cursor(row=0)

    def action_cursor_bottom(self) -> None:
        """The last row."""
        self._set_hover(None)
        self.move_cursor(row=len(self.grid.keys) - 1)

    def action_page_down(self) -> None:
        """A page down: the view scrolls a page and the cursor moves as far."""
        self._set_hover(None)
        height = self.scrollable_content_region.height - HEADER_HEIGHT
        target = self._cursor + min(height + 1, len(self.grid.keys) - self._cursor) - 1
        self.scroll_relative(y=height, animate=False, force=True)
        self.move_cursor(row=target)

    def action_page_up(self) -> None:
        """A page up: the view scrolls a page and the cursor moves as far."""
        self._set_hover(None)
        height = self.scrollable_content_region.height - HEADER_HEIGHT
        target = self._cursor - min(height + 1, self._cursor + 1) + 1
        self.scroll_relative(y=-height, animate=False)
        self.move_cursor(row=target)

    def action_scroll_home(self) -> None:
        """The leftmost column."""
        self._set_hover(None)
        self.scroll_x = 0

    def action_scroll_end(self) -> None:
        """The rightmost column."""
        self._set_hover(None)
        self.scroll_x = self.max_scroll_x

    def action_select_cursor(self) -> None:
        """Choose the cursor's row."""
        self._set_hover(None)
        if self.grid.keys:
            self.post_message(self.RowSelected(self, self._cursor, self.grid.keys[self._cursor]))

    # ----- the mouse ------------------------------------------------------------------------

    def _row_at(self, event: events.MouseEvent) -> int | None:
        """The row under the mouse (-1: the header), None past the last row."""
        offset = event.get_content_offset(self)
        if offset is None:
            return None
        if offset.y < HEADER_HEIGHT:
            return -1
        row = offset.y - HEADER_HEIGHT + int(self.scroll_y)
        return row if row < len(self.grid.keys) else None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """The row under the mouse shows it."""
        self._set_hover(self._row_at(event))

    def on_leave(self, event: events.Leave) -> None:
        """The mouse left: no row shows it."""
        self._set_hover(None)

    def on_click(self, event: events.Click) -> None:
        """A click on a label selects the column; on a row moves the cursor there, and on the
        cursor's row chooses it."""
        row = self._row_at(event)
        if row == -1:
            offset = event.get_content_offset(self)
            x = (offset.x if offset else 0) + int(self.scroll_x)
            for column in self.columns.values():
                if x < column.render_width:
                    self.post_message(self.HeaderSelected(self, column.key))
                    break
                x -= column.render_width
        elif row is not None:
            event.stop()
            if row == self._cursor:
                self.action_select_cursor()
            else:
                self.move_cursor(row=row)
            self._set_hover(row)

    # ----- drawing --------------------------------------------------------------------------

    def _styles_now(self) -> PaintStyles:
        """The styles of the paint under way, from the widget's CSS."""
        style = self.get_component_rich_style
        return PaintStyles(
            base=self.rich_style,
            header=style("datatable--header"),
            even=style("datatable--even-row"),
            odd=style("datatable--odd-row"),
            cursor=style("datatable--cursor"),
            hover=style("datatable--hover"),
            header_hover=style("datatable--header-hover"),
        )

    def render_lines(self, crop: Region) -> list[Strip]:
        """Paint; the kept lines are dropped when the styles, widths or width changed."""
        paint = self._styles_now()
        shape = (paint, tuple(c.render_width for c in self.columns.values()), self.size.width)
        if shape != self._painted:
            self._painted = shape
            self._lines.clear()
        self._paint = paint
        try:
            return super().render_lines(crop)
        finally:
            self._paint = None

    def render_line(self, y: int) -> Strip:
        """Line `y` of the widget: the header, a row, or blank below the last row."""
        paint = self._paint or self._styles_now()
        width = self.size.width
        scroll_x = int(self.scroll_x)
        if y < HEADER_HEIGHT:
            line = self._header_line(paint, width)
        else:
            index = y - HEADER_HEIGHT + int(self.scroll_y)
            if index >= len(self.grid.keys):
                return Strip.blank(width, paint.base)
            line = self._row_line(index, paint, width)
        return line.crop(scroll_x, scroll_x + width).adjust_cell_length(width, paint.base)

    def _header_line(self, paint: PaintStyles, width: int) -> Strip:
        """The column labels, full width."""
        hover = paint.hover + paint.header_hover if self._hover == -1 else Style()
        labels = {column.key: column.label for column in self.columns.values()}
        return self._draw(-1, labels, paint.header, hover, width)

    def _row_line(self, index: int, paint: PaintStyles, width: int) -> Strip:
        """Row `index`, full width, from its kept line when it has one."""
        key = self.grid.keys[index]
        on_cursor, on_hover = index == self._cursor, index == self._hover
        kept = self._lines.setdefault(key, {})
        line = kept.get((on_cursor, on_hover))
        if line is None:
            row_style = paint.odd if index % 2 else paint.even
            over = Style()
            if on_hover:
                over += paint.hover
            if on_cursor:
                over += paint.cursor
            line = self._draw(index, self.grid.cells[key], row_style, over, width)
            kept[(on_cursor, on_hover)] = line
        return line

    def _draw(
        self, index: int, cells: dict[str, Text], row_style: Style, over: Style, width: int
    ) -> Strip:
        """Row `index`'s cells (-1: the header) under `row_style` with `over` (cursor, hover)
        on top, and the rest of the widget's width in the row's style."""
        post = Style.from_color(color=over.color) + Style.from_color(bgcolor=over.bgcolor)
        segments: list[Segment] = []
        used = 0
        for number, column in enumerate(self.columns.values()):
            pre = row_style + cell_meta(index, number) + over
            text = cells.get(column.key) or Text()
            cell = plain_cell_line(text, column.render_width, CELL_PADDING, pre, post)
            if cell is None:  # not one line of plain text: as plain text
                plain = Text(text.plain.replace("\n", " ").replace("\t", " "), style=text.style)
                cell = plain_cell_line(plain, column.render_width, CELL_PADDING, pre, post)
            segments.extend(cell or [])
            used += column.render_width
        rest = row_style + over + cell_meta(index, 0, out_of_bounds=True)
        segments.append(Segment(" " * max(0, width - used), rest))
        return Strip(segments).simplify()
