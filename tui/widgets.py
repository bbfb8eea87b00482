"""The dashboard's widgets: the session table (changed cells only) and the two modal screens."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from agentherd.sessions.status import SessionStatus
from agentherd.tui.rows import COLUMNS, LAST_MIN_CHARS, Cell, row_cells


class SessionTable(DataTable[Text]):
    """One row per session, keyed by name; `show` touches only the cells that changed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._cells: dict[str, dict[str, Cell]] = {}

    def on_mount(self) -> None:
        """Add the columns once."""
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    @property
    def selected_session(self) -> str | None:
        """The name of the session under the cursor, or None when the table is empty."""
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return str(row_key.value)

    def _last_width(self) -> int:
        """Characters left for the last output once every other column has its width."""
        others = sum(
            column.get_render_width(self)
            for column in self.columns.values()
            if column.key.value != "last"
        )
        room = self.scrollable_content_region.width - others - 2 * self.cell_padding
        return max(LAST_MIN_CHARS, room)

    def show(self, statuses: list[SessionStatus]) -> None:
        """Bring the rows up to date with these statuses, updating only what differs."""
        width = self._last_width()
        seen = set()
        for status in statuses:
            name = status.session
            seen.add(name)
            cells = row_cells(status, width)
            old = self._cells.get(name)
            if old is None:
                self.add_row(*(Text(t, style=s) for t, s in cells.values()), key=name)
            else:
                for key, cell in cells.items():
                    if old.get(key) != cell:
                        self.update_cell(name, key, Text(cell[0], style=cell[1]), update_width=True)
            self._cells[name] = cells
        for name in set(self._cells) - seen:
            self.remove_row(name)
            del self._cells[name]


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question; y confirms, n or Escape cancels."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Cancel", show=False),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        """The question in a small box."""
        with Vertical(classes="dialog"):
            yield Static(self.question, id="question")
            yield Static("[b]y[/b] yes    [b]n[/b] no", classes="hint")

    def action_answer(self, answer: bool) -> None:
        """Close the dialog with the answer."""
        self.dismiss(answer)


class HelpScreen(ModalScreen[None]):
    """The keys of the dashboard, as currently bound; any of Escape, q or ? closes it."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("question_mark", "close", "Close", show=False),
    ]

    def __init__(self, lines: list[tuple[str, str]]) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        """A table of key and what it does."""
        width = max((len(key) for key, _ in self.lines), default=1)
        text = "\n".join(
            f"[b]{escape(key.ljust(width))}[/b]  {escape(what)}" for key, what in self.lines
        )
        with Vertical(classes="dialog"):
            yield Static("herd dashboard keys", classes="title")
            yield Static(text)
            yield Static("Escape closes", classes="hint")

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
