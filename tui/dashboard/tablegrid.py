"""The session table's columns, rows and cells, and how wide each column must be.

Column widths widen at once (nothing is cut) and narrow only when `settle_widths` says so: a
narrower column redraws every row, so a fleet whose states come and go pays for it once per
settle, not once per change. Each column keeps a count of its cells' widths, so a shorter cell
never makes it measure every cell again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text

CELL_PADDING = 1
"""Blank cells on each side of a cell's text, as DataTable's default `cell_padding`."""


@dataclass
class Column:
    """A column: its key, its label and the width its text gets (padding not counted)."""

    key: str
    label: Text
    content_width: int

    @property
    def render_width(self) -> int:
        """The column's width on screen, padding included."""
        return self.content_width + 2 * CELL_PADDING


class TableGrid:
    """Rows of one-line Text cells under labelled columns, with the widths they need."""

    def __init__(self) -> None:
        self.columns: dict[str, Column] = {}
        """The columns in their order, by key."""
        self.keys: list[str] = []
        """Row keys in their order."""
        self.index: dict[str, int] = {}
        """Where each row is, by key."""
        self.cells: dict[str, dict[str, Text]] = {}
        """Each row's cells, by row key then column key."""
        self.too_wide: set[str] = set()
        """Columns a shorter cell may have left wider than they need (`settle_widths`)."""
        self._widths: dict[str, Counter[int]] = {}
        """Per column, how many cells have each width."""

    @property
    def width(self) -> int:
        """The table's width on screen: every column, padding included."""
        return sum(column.render_width for column in self.columns.values())

    def add_column(self, label: str, key: str) -> None:
        """A new last column titled `label` (as wide as the label until cells widen it)."""
        text = Text(label)
        self.columns[key] = Column(key, text, cell_len(text.plain))
        self._widths[key] = Counter()
        for cells in self.cells.values():
            cells[key] = Text()
            self._widths[key][0] += 1

    def add_row(self, cells: tuple[Text, ...], key: str) -> None:
        """A new last row with these cells (in the columns' order); columns widen to fit."""
        row: dict[str, Text] = {}
        for column, cell in zip(self.columns.values(), cells, strict=False):
            row[column.key] = cell
            width = cell_len(cell.plain)
            self._widths[column.key][width] += 1
            column.content_width = max(column.content_width, width)
        self.index[key] = len(self.keys)
        self.keys.append(key)
        self.cells[key] = row

    def clear(self, columns: bool = False) -> None:
        """No rows (and with `columns`, no columns either)."""
        self.keys.clear()
        self.index.clear()
        self.cells.clear()
        self.too_wide.clear()
        if columns:
            self.columns.clear()
            self._widths.clear()
        else:
            for column in self.columns.values():
                self._widths[column.key] = Counter()

    def row_at(self, row_index: int) -> list[Text]:
        """The cells of the row at `row_index`, in the columns' order."""
        cells = self.cells[self.keys[row_index]]
        return [cells.get(key, Text()) for key in self.columns]

    def column(self, column_key: str) -> list[Text]:
        """The cells of one column, top to bottom."""
        return [self.cells[key].get(column_key, Text()) for key in self.keys]

    def set_cell(self, row: str, column: str, text: Text, grow_only: bool = False) -> bool:
        """Put `text` in a cell; True when its column widened to fit it (every row then
        redraws). A shorter cell leaves its column as wide until `settle_widths`, or for ever
        when `grow_only` (`narrow_column` does it when it matters)."""
        cells, found = self.cells[row], self.columns[column]
        widths = self._widths[column]
        old = cells.get(column)
        if old is not None:
            was = cell_len(old.plain)
            widths[was] -= 1
            if not widths[was]:
                del widths[was]
        new = cell_len(text.plain)
        widths[new] += 1
        cells[column] = text
        if new > found.content_width:
            found.content_width = new
            return True
        if not grow_only and new < found.content_width:
            self.too_wide.add(column)
        return False

    def settle_widths(self) -> bool:
        """Fit the columns a shorter cell left too wide; True when one narrowed."""
        narrowed = False
        for key in self.too_wide:
            found = self.columns.get(key)
            if found is None:
                continue
            need = max([cell_len(found.label.plain), *self._widths[key]])
            if need < found.content_width:
                found.content_width = need
                narrowed = True
        self.too_wide.clear()
        return narrowed

    def narrow_column(self, column: str, most: int) -> bool:
        """Fit a grow-only column to what its cells hold now, counting none wider than `most`;
        False when there is no such column."""
        found = self.columns.get(column)
        if found is None:
            return False
        widest = max(self._widths[column], default=0)
        found.content_width = max(cell_len(found.label.plain), min(most, widest))
        return True
