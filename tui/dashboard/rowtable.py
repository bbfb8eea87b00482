"""A DataTable whose cell updates re-render only themselves.

Textual's DataTable counts every `update_cell` into the key of every cached rendering, so one
new last-output line made it render every visible cell of the table again through Rich, and a
cell narrower than its column made it measure the whole column again. With 200 busy sessions
that was most of the dashboard's time and what a key press waited behind. Here an update drops
only its own cell's cached renderings (and its row's, put together again from the cells'); a
change of column widths still re-renders everything, as
DataTable does. textual is pinned (pyproject.toml): the cache names used here are its own.

Column widths are kept here too, from a count of each column's cell widths: DataTable measured
every cell of a column through Rich whenever one cell became narrower (60 ms for 200 rows, with
a key press waiting), and a narrower column re-renders the whole table. So a column widens at
once (nothing is cut) but narrows only when `settle_widths` says so, which the owner calls
every few seconds: a fleet whose states come and go re-renders the table once per settle at
most, not once per change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import chain
from typing import Any, TypeVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._segment_tools import line_crop
from textual._types import SegmentLines
from textual.color import Color
from textual.coordinate import Coordinate
from textual.css.styles import RenderStyles
from textual.geometry import Region
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, CellKey, ColumnKey, RowKey

from agentherd.tui.dashboard.fastcell import plain_cell_line
from agentherd.tui.dashboard.linescrollbar import LineScrollBar
from agentherd.tui.dashboard.scrollshift import can_shift, shift_lines

_T = TypeVar("_T")

OFF_CURSOR = Coordinate(-2, 0)
"""Where the row cursor is, as far as a row it is not on can tell (-1 is the header row)."""


class _PaintedStyles(RenderStyles):
    """A component's styles whose Rich style was worked out once, for one paint."""

    painted_rich_style: Style

    @property
    def rich_style(self) -> Style:
        """The Rich style as it was when the paint began."""
        return self.painted_rich_style


def _painted(styles: RenderStyles) -> RenderStyles:
    """`styles`, its Rich style worked out now and kept (only for the paint under way)."""
    rich_style = styles.rich_style
    styles.__class__ = _PaintedStyles
    assert isinstance(styles, _PaintedStyles)
    styles.painted_rich_style = rich_style
    return styles


class RowCachedTable(DataTable[Text]):
    """A DataTable of Text cells; `set_cell` changes one cell at the cost of that cell only."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stale_cells: set[tuple[RowKey, ColumnKey]] = set()
        """Cells whose cached renderings (and their rows') are dropped before the next paint."""
        self._painted_widths: tuple[int, ...] = ()
        """Column widths of the last paint: cached cells are only valid at those widths."""
        self._cell_widths: dict[ColumnKey, Counter[int]] | None = None
        """Per column, how many cells have each width (None: count again from the cells)."""
        self._too_wide: set[ColumnKey] = set()
        """Columns a narrower cell may have left wider than they need: `settle_widths` fits them."""
        self._paint_styles: dict[object, Any] | None = None
        """Styles worked out during the paint under way (None: not painting)."""
        self._cell_keys: dict[tuple[RowKey, ColumnKey], set[Any]] = {}
        """Per cell, the keys its renderings are cached under (the index `_drop_stale_cells`
        reads); rows' and lines' likewise, per row."""
        self._row_keys: dict[RowKey, set[Any]] = {}
        self._line_keys: dict[RowKey, set[Any]] = {}
        self._indexed_count = -1
        """DataTable's update count the index was built under."""
        """Styles worked out during the paint under way (None: not painting)."""

    def set_cell(
        self, row: str, column: str, text: str, style: str = "", grow_only: bool = False
    ) -> None:
        """Put `text` in a cell; its column widens at once to fit it and narrows (if it may)
        at the next `settle_widths`. A `grow_only` column never narrows for a shorter cell
        (`narrow_column` does it when it matters)."""
        key, row_key = ColumnKey(column), RowKey(row)
        widths = self._column_widths(key)
        cells = self._data.get(row_key)
        if cells is not None and key in cells:
            old = cell_len(cells[key].plain)
            widths[old] -= 1
            if not widths[old]:
                del widths[old]
        new = cell_len(text)
        widths[new] += 1
        self.update_cell(row, column, Text(text, style=style))
        found = self.columns.get(key)
        if found is None:
            return
        if new > found.content_width:
            found.content_width = new
            self._require_update_dimensions = True
            self.check_idle()
        elif not grow_only and new < found.content_width:
            self._too_wide.add(key)

    def _column_widths(self, key: ColumnKey) -> Counter[int]:
        """How many of the column's cells have each width (counted again after a rebuild)."""
        if self._cell_widths is None:
            counted: dict[ColumnKey, Counter[int]] = {k: Counter() for k in self.columns}
            for cells in self._data.values():
                for column, cell in cells.items():
                    counted.setdefault(column, Counter())[cell_len(cell.plain)] += 1
            self._cell_widths = counted
        return self._cell_widths.setdefault(key, Counter())

    def settle_widths(self) -> None:
        """Fit the columns a narrower cell left too wide (one re-render of the table)."""
        narrowed = False
        for key in self._too_wide:
            found = self.columns.get(key)
            if found is None:
                continue
            widths = self._column_widths(key)
            need = max([cell_len(found.label.plain), *widths])
            if need < found.content_width:
                found.content_width = need
                narrowed = True
        self._too_wide.clear()
        if narrowed:
            self._require_update_dimensions = True
            self.check_idle()
            self.refresh()

    def narrow_column(self, column: str, most: int) -> None:
        """Fit a grow-only column to what its cells hold now, counting none wider than `most`
        (rows off screen are cut to it when scrolled to)."""
        key = ColumnKey(column)
        found = self.columns.get(key)
        if found is None:
            return
        widest = max(self._column_widths(key), default=0)
        found.content_width = max(cell_len(found.label.plain), min(most, widest))
        self._require_update_dimensions = True
        self.refresh()

    def add_row(self, *cells: Any, **kwargs: Any) -> RowKey:
        """DataTable's `add_row`; the width counts are taken again when next needed."""
        self._cell_widths = None
        return super().add_row(*cells, **kwargs)

    def clear(self, columns: bool = False) -> Any:
        """DataTable's `clear`; the width counts are taken again when next needed."""
        self._cell_widths = None
        self._too_wide.clear()
        return super().clear(columns)

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: Text,
        *,
        update_width: bool = False,
    ) -> None:
        """DataTable's `update_cell`, dropping only this cell's cached renderings."""
        row = RowKey(row_key) if isinstance(row_key, str) else row_key
        column = ColumnKey(column_key) if isinstance(column_key, str) else column_key
        if row not in self._row_locations or column not in self._column_locations:
            raise CellDoesNotExist(f"No cell exists for row_key={row!r}, column_key={column!r}.")
        self._data[row][column] = value
        index = self._row_locations.get(row)
        assert index is not None  # checked above
        self._row_renderable_cache.discard((self._update_count, index))
        self._stale_cells.add((row, column))
        if update_width:
            self._updated_cells.add(CellKey(row, column))
            self._require_update_dimensions = True
        self.refresh_row(index)

    def _drop_stale_cells(self) -> None:
        """Forget the cached renderings of the cells updated since the last paint, and of
        their rows (the other cells of a row are put together again from their cache).

        By the keys each cell, row and line was cached under (`_index`): scanning the caches'
        keys for them (10,000 cells, hashing each) took 16 ms a paint under a busy fleet.
        """
        cells = self._stale_cells
        self._index_for_now()
        for cell in cells:
            for key in self._cell_keys.pop(cell, ()):
                self._cell_render_cache.discard(key)
        for row in {row for row, _ in cells}:
            for key in self._row_keys.pop(row, ()):
                self._row_render_cache.discard(key)
            for key in self._line_keys.pop(row, ()):
                self._line_cache.discard(key)
        cells.clear()

    def _index_for_now(self) -> None:
        """Start the index afresh when DataTable dropped every rendering (a new update
        count): the keys it holds can no longer be reached."""
        if self._indexed_count != self._update_count:
            self._indexed_count = self._update_count
            self._cell_keys.clear()
            self._row_keys.clear()
            self._line_keys.clear()

    def _index(self, index: dict[Any, set[Any]], owner: object, key: object) -> None:
        """Remember that `owner` (a cell or a row) has a rendering cached under `key`."""
        self._index_for_now()
        index.setdefault(owner, set()).add(key)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> SegmentLines:
        """DataTable's cell, built directly (fastcell.py) when it is one line of plain text.

        Same cache and key as DataTable's; a cell that is not plain text, a row taller than
        one line or a row label goes through DataTable's Rich pipeline.
        """
        header = row_index == -1
        found_key = self._header_row_key if header else self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if found_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cache_key = (
            found_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._cell_render_cache.get(cache_key)
        if cached is not None:
            return cached
        self._index(self._cell_keys, (found_key, column_key), cache_key)
        line = self._plain_cell(
            row_index, column_index, found_key, base_style, width, cursor, hover
        )
        if line is None:  # DataTable caches it under the same key
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        self._cell_render_cache[cache_key] = [line]
        return [line]

    def _plain_cell(
        self,
        row_index: int,
        column_index: int,
        row_key: RowKey,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> list[Segment] | None:
        """The cell's one line built by fastcell.py, or None for DataTable to render it."""
        header = row_index == -1
        if column_index < 0:  # a row label
            return None
        if header:
            if self.header_height != 1:
                return None
        else:
            row = self.rows.get(row_key)
            if row is None or row.auto_height or row.height != 1:
                return None
        fixed = not header and (row_index < self.fixed_rows or column_index < self.fixed_columns)
        component_style, post_style = self._get_styles_to_render_cell(
            header,
            False,
            fixed,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        cell = self._get_row_renderables(row_index).cells[column_index]
        if not isinstance(cell, Text):
            return None
        meta = Style.from_meta({"row": row_index, "column": column_index})
        pre_style = base_style + meta + component_style
        return plain_cell_line(cell, width, self.cell_padding, pre_style, post_style)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """DataTable's line, cached whatever row the cursor is on (as `_render_line_in_row`).

        DataTable keys each cached line by the cursor's position, so a key that moved the
        cursor built every visible line again; here only the two rows it left and reached.
        """
        width = self.size.width
        try:
            row_key, y_offset_in_row = self._get_offsets(y)
        except LookupError:
            return Strip.blank(width, base_style)
        cursor, hover = self.cursor_coordinate, self.hover_coordinate
        if self.cursor_type == "row":
            found = self._row_locations.get(row_key)
            index = -1 if found is None else found  # the header row is -1
            cursor = cursor if cursor.row == index else OFF_CURSOR
            hover = hover if hover.row == index else OFF_CURSOR
        cache_key = (
            y,
            x1,
            x2,
            width,
            cursor,
            hover,
            base_style,
            self.cursor_type,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        if cache_key in self._line_cache:
            return self._line_cache[cache_key]
        fixed, scrollable = self._render_line_in_row(
            row_key,
            y_offset_in_row,
            base_style,
            cursor_location=self.cursor_coordinate,
            hover_location=self.hover_coordinate,
        )
        fixed_width = sum(
            column.get_render_width(self) for column in self.ordered_columns[: self.fixed_columns]
        )
        fixed_line: list[Segment] = list(chain.from_iterable(fixed)) if fixed else []
        scrollable_line: list[Segment] = list(chain.from_iterable(scrollable))
        segments = fixed_line + line_crop(scrollable_line, x1 + fixed_width, x2, width)
        strip = Strip(segments).adjust_cell_length(width, base_style).simplify()
        self._line_cache[cache_key] = strip
        self._index(self._line_keys, row_key, cache_key)
        return strip

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Any,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> Any:
        """DataTable's row rendering, cached for a row whatever row the cursor is on.

        DataTable keys a row's cached rendering by the cursor's position, so after a key moved
        the cursor every row painted (a new last output) was put together again from its cells;
        with a row cursor, only whether the cursor is on this row changes a row's look.
        """
        if self.cursor_type == "row":
            found = self._row_locations.get(row_key)
            index = -1 if found is None else found  # the header row is -1
            if cursor_location.row != index:
                cursor_location = OFF_CURSOR
            if hover_location.row != index:
                hover_location = OFF_CURSOR
        rendered = super()._render_line_in_row(
            row_key, line_no, base_style, cursor_location, hover_location
        )
        # DataTable's key for the row it just cached (textual is pinned; a test holds it)
        cache_key = (
            row_key,
            line_no,
            base_style,
            cursor_location,
            hover_location,
            self.cursor_type,
            self.show_cursor,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        self._index(self._row_keys, row_key, cache_key)
        return rendered

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """Widget's vertical scrollbar, as a LineScrollBar: a scroll by a row repaints the two
        or three lines of it the thumb moved on, not its whole height."""
        if self._vertical_scrollbar is None:
            scroll_bar = LineScrollBar(
                vertical=True, name="vertical", thickness=self.scrollbar_size_vertical
            )
            self._vertical_scrollbar = scroll_bar
            scroll_bar.display = False
            self.app._start_widget(self, scroll_bar)
        return self._vertical_scrollbar

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """DataTable's scroll; the rows that only moved keep their styled lines (scrollshift.py):
        a key that scrolls the table by a row draws one row, not every row on screen."""
        old_y, new_y = round(old_value), round(new_value)
        shift = old_y != new_y and not self.fixed_rows and can_shift(self)
        dirty_before = set(self._styles_cache._dirty_lines) if shift else set()
        super().watch_scroll_y(old_value, new_value)
        if shift:
            header = self.header_height if self.show_header else 0
            shift_lines(self, header, dirty_before, old_y, new_y)

    def render_lines(self, crop: Region) -> list[Strip]:
        """Paint, re-rendering the updated rows, or every row when a column's width moved."""
        widths = tuple(column.get_render_width(self) for column in self.ordered_columns)
        if widths != self._painted_widths:
            self._painted_widths = widths
            self._update_count += 1  # DataTable's own way to drop every cached rendering
            self._stale_cells.clear()
        elif self._stale_cells:
            self._drop_stale_cells()
        self._paint_styles = {}
        try:
            return super().render_lines(crop)
        finally:
            self._paint_styles = None

    # ----- styles worked out once per paint -----------------------------------------------
    # DataTable asks for its Rich style (a walk up the DOM combining every ancestor's CSS) for
    # every line and several times for every row it builds: 12 % of the dashboard's samples
    # under a busy fleet. Nothing restyles the table while it paints, so within one
    # `render_lines` each is worked out once; outside a paint they are asked for as usual.

    def _paint_memo(self, key: object, compute: Callable[[], _T]) -> _T:
        """`compute()`, once per paint for `key` (every time outside a paint)."""
        memo = self._paint_styles
        if memo is None:
            return compute()
        if key not in memo:
            memo[key] = compute()
        found: _T = memo[key]
        return found

    @property
    def rich_style(self) -> Style:
        """DOMNode's Rich style, once per paint."""
        return self._paint_memo("rich_style", lambda: DataTable.rich_style.fget(self))  # type: ignore[attr-defined]

    @property
    def background_colors(self) -> tuple[Color, Color]:
        """DOMNode's background colours, once per paint."""
        compute = lambda: DataTable.background_colors.fget(self)  # type: ignore[attr-defined]  # noqa: E731
        return self._paint_memo("background_colors", compute)

    def get_component_styles(self, *names: str) -> RenderStyles:
        """DOMNode's component styles; during a paint, once per paint, their Rich style too."""
        if self._paint_styles is None:
            return super().get_component_styles(*names)
        return self._paint_memo(
            ("component", names),
            lambda: _painted(super(RowCachedTable, self).get_component_styles(*names)),
        )

    def _get_row_style(self, row_index: int, base_style: Style) -> Style:
        """DataTable's row style (header, fixed, odd or even), once per paint."""
        kind = -1 if row_index == -1 else -2 if row_index < self.fixed_rows else row_index % 2
        compute = lambda: super(RowCachedTable, self)._get_row_style(row_index, base_style)  # noqa: E731
        return self._paint_memo(("row", kind, base_style), compute)
