"""The dashboard's widgets: the session table (changed cells only) and the confirmation."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.linetable import LineTable
from agentherd.tui.dashboard.rows import (
    COLUMNS,
    STATE_MAX_CHARS,
    STATE_WIDE_CHARS,
    WIDE_COLUMNS,
    Cell,
    row_cells,
    uptime_cell,
)
from agentherd.tui.dashboard.tablegrid import CELL_PADDING

GROW_ONLY = frozenset({"last", "uptime"})
"""Columns whose cells change all the time: they widen to fit and do not narrow for each
shorter line (measuring the whole column each time); the last output narrows on a resize."""

ROWS_PER_FRAME = 8
"""Rows the fleet's updates change in one frame: a key that lands behind a fleet repaint waits
for a few rows, not for every row 200 busy sessions changed (the rest follow, frame by frame)."""

SETTLE_WIDTHS_S = 10.0
"""Columns left too wide by a shorter cell narrow this often: each narrowing re-renders the
whole table, so a fleet whose states come and go pays it once in a while, not per change."""


class SessionTable(LineTable):
    """One row per session, keyed by name; `show` touches only the cells that changed.

    Rows are rebuilt only when the order or the set of columns changes; the clock-driven
    uptime is refreshed by `tick` for the rows on screen only, so a quiet fleet costs nothing.
    """

    BINDINGS = [
        # The table's own Enter (hidden) hid the app's from the footer: Open is shown, and
        # the `open` id lets [keys] rebind this one too.
        Binding("enter", "select_cursor", "Open", id="open", tooltip="The session screen"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cells: dict[str, dict[str, Cell]] = {}
        self._statuses: dict[str, SessionStatus] = {}
        self._order: list[str] = []
        self._fitted_width = 0
        """The width the last-output cells were cut to."""
        self._dirty: set[str] = set()
        """Rows whose status changed since their cells were last updated."""
        self.column_keys: tuple[str, ...] = tuple(key for key, _ in COLUMNS)
        self._settle_at = 0.0
        """When (monotonic s) the columns are next fitted to their cells."""
        self._step_due = False
        """A step of the fleet's changes waits for the next frame (`_step`)."""

    @property
    def order(self) -> tuple[str, ...]:
        """The session names of the rows, top to bottom, in the current sort and filter."""
        return tuple(self._order)

    def on_mount(self) -> None:
        """Add the columns once."""
        self._add_columns()

    def _add_columns(self) -> None:
        labels = dict(COLUMNS)
        for key in self.column_keys:
            self.add_column(labels[key], key=key)

    def set_columns(self, keys: tuple[str, ...]) -> None:
        """Show only these columns (a narrow terminal drops some); rows are rebuilt."""
        if keys == self.column_keys:
            return
        self.column_keys = keys
        selected = self.selected_session
        self.clear(columns=True)
        self._add_columns()
        self._cells.clear()
        self._order = []
        self.show(list(self._statuses.values()), selected)

    @property
    def selected_session(self) -> str | None:
        """The name of the session under the cursor, or None when the table is empty."""
        return self.cursor_row_key

    def _last_width(self) -> int:
        """Characters left for the last output once every other column has its width."""
        others = sum(
            column.render_width for column in self.columns.values() if column.key != "last"
        )
        room = self.scrollable_content_region.width - others - 2 * CELL_PADDING
        # Never wider than the room: a table wider than the screen scrolled sideways, its
        # scrollbar across the middle of the screen (columns give way before it comes to that).
        return max(1, room)

    def _state_chars(self) -> int:
        """Room for the state's reason: none where the uptime gave way (80 columns: the
        details under the table say it), more on a wide terminal."""
        if "uptime" not in self.column_keys:
            return 0
        return STATE_WIDE_CHARS if self.app.size.width >= WIDE_COLUMNS else STATE_MAX_CHARS

    def _shown_cells(self, status: SessionStatus, width: int) -> dict[str, Cell]:
        # Where the uptime gave way (80 columns) a reason such as "(plan-tampered)" would
        # leave the last output four characters; the details under the table say it.
        cells = row_cells(status, width, self._state_chars())
        return {key: cells[key] for key in self.column_keys if key in cells}

    def show(
        self,
        statuses: list[SessionStatus],
        keep_selected: str | None = None,
        changed: set[str] | None = None,
    ) -> None:
        """Bring the rows up to date with these statuses (in this order), changing what differs;
        with `changed`, only those sessions' rows are looked at (the others are as they were)."""
        width = self._last_width()
        self._statuses = {s.session: s for s in statuses}
        order = [s.session for s in statuses]
        if order != self._order:
            selected = keep_selected or self.selected_session
            self.clear()
            self._cells.clear()
            self._dirty.clear()
            for status in statuses:
                cells = self._shown_cells(status, width)
                self.add_row(*(Text(t, style=s) for t, s in cells.values()), key=status.session)
                self._cells[status.session] = cells
            self._order = order
            self._fitted_width = width  # every row was cut to it
            if selected in self._statuses:
                self.move_cursor(row=order.index(selected), animate=False)
            self.call_after_refresh(self.fit_last)
            return
        if changed is None or width != self._fitted_width:  # a new width cuts every row
            self._dirty.update(order)
        else:
            self._dirty.update(changed.intersection(self._statuses))
        self._fitted_width = width
        self._step_later()

    def _step_later(self) -> None:
        """Bring the changed rows on screen up to date after the next frame, a few at a time.

        After the frame, so that a key pressed meanwhile (its cursor, its details) is drawn
        first and the fleet's rows follow; a few rows a frame, so that a key landing behind a
        fleet repaint waits for a few rows only.
        """
        if not self._step_due:
            self._step_due = True
            self.call_after_refresh(self._step)

    def _step(self) -> None:
        """Update up to ROWS_PER_FRAME changed rows on screen; the rest after the next frame."""
        self._step_due = False
        if self.sync_visible(most=ROWS_PER_FRAME):
            self._step_later()

    def _visible_names(self) -> list[str]:
        """The sessions whose rows are on screen now (the header row excluded)."""
        first = max(0, int(self.scroll_offset.y))
        return self._order[first : first + max(1, self.size.height)]

    def sync_visible(self, most: int | None = None) -> bool:
        """Update the changed cells of the rows on screen (at most `most` rows); rows off
        screen wait until shown. True when changed rows on screen are left for later.

        Every cell update makes the table draw its visible rows again, so a fleet of 200
        whose last outputs all change would otherwise redraw for rows nobody sees.
        """
        width = self._fitted_width
        for name in self._visible_names():
            if name not in self._dirty:
                continue
            if most is not None:
                if most <= 0:
                    return True
                most -= 1
            self._dirty.discard(name)
            status = self._statuses.get(name)
            if status is None:
                continue
            cells = self._shown_cells(status, width)
            old = self._cells.get(name, {})
            for key, cell in cells.items():
                if old.get(key) != cell:
                    self.set_cell(name, key, *cell, grow_only=key in GROW_ONLY)
            self._cells[name] = cells
        return False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """Scrolled: rows that came into view show their newest cells."""
        super().watch_scroll_y(old_value, new_value)
        if self._dirty:
            self.call_after_refresh(self.sync_visible)

    def fit_last(self) -> None:
        """Cut the last outputs on screen again when the room left for them changed (resize, a
        wider state); rows off screen are cut when they are scrolled to."""
        width = self._last_width()
        if width == self._fitted_width or "last" not in self.column_keys:
            return
        narrower = width < self._fitted_width
        self._fitted_width = width
        visible = set(self._visible_names())
        self._dirty.update(set(self._statuses) - visible)  # cut again when scrolled to
        for name in visible:
            status = self._statuses.get(name)
            cells = self._cells.get(name)
            if status is None or cells is None:
                continue
            cell = row_cells(status, width)["last"]
            if cells.get("last") != cell:
                cells["last"] = cell
                self.set_cell(name, "last", *cell, grow_only=True)
        if narrower:  # the room shrank: so does the column, or the table would scroll sideways
            self.narrow_column("last", width)

    def _changed_shape(self) -> None:
        """A column widened (a longer state): the last outputs get the room left."""
        super()._changed_shape()
        self.call_after_refresh(self.fit_last)

    def on_resize(self) -> None:
        """A new width: the last outputs get the room there is, the states theirs."""
        self._dirty.update(self._statuses)
        self._step_later()
        self.call_after_refresh(self.fit_last)

    def tick(self) -> None:
        """Move the uptimes of the rows on screen (the only cells that change with the clock),
        a few rows a frame as the fleet's changes; every SETTLE_WIDTHS_S, narrow the columns a
        shorter cell left too wide."""
        now_s = time.monotonic()
        if now_s >= self._settle_at:
            self._settle_at = now_s + SETTLE_WIDTHS_S
            self.settle_widths()
        if "uptime" in self.column_keys:
            for name in self._visible_names():
                status, cells = self._statuses.get(name), self._cells.get(name)
                if status and cells and cells.get("uptime") != (uptime_cell(status), ""):
                    self._dirty.add(name)
        if self._dirty:
            self._step_later()


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question that names the session and what will happen; y confirms."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Cancel", show=False),
    ]

    def __init__(self, question: str, consequence: str = "") -> None:
        super().__init__()
        self.question = question
        self.consequence = consequence
        """What saying yes will do, in a sentence (plain text, shown as is)."""

    def compose(self) -> ComposeResult:
        """The question, what yes does, and the two answers, in a small box; the dialog's own
        keys in a footer over the screen's below (whose keys do nothing while it asks)."""
        with Vertical(classes="dialog"):
            yield Static(self.question, id="question", markup=False)
            if self.consequence:
                yield Static(self.consequence, id="consequence", markup=False)
            yield Static("[b]y[/b] yes    [b]n[/b] no", classes="hint")
        yield Footer()

    def action_answer(self, answer: bool) -> None:
        """Close the dialog with the answer."""
        self.dismiss(answer)
