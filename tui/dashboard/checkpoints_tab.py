"""The session screen's Checkpoints tab: the session's checkpoints newest first, the one under
the cursor in detail.

It keeps what it was given and draws it once composed: the session screen composes this tab
after its first paint (Textual's `Lazy`) unless the screen opens on it."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from agentherd.sessions.sanitize import inert
from agentherd.tui.dashboard.rows import VERIFIED_MARKS, cut
from agentherd.tui.dashboard.tabtext import checkpoint_detail, line_counts, short_time

READING_CHECKPOINTS = "reading the checkpoints…"
NO_CHECKPOINTS = "no checkpoints yet: herd records each commit the agent makes"
COLUMNS = (("at", "AT"), ("sha", "SHA"), ("v", "✓"), ("files", "FILES"), ("subject", "SUBJECT"))


class CheckpointsTab(Vertical):
    """The checkpoints table and the detail of the highlighted one."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ready = False
        """Mounted: drawn now on every change (Textual's `is_mounted` is False in `on_mount`)."""
        self.checkpoints: list[dict[str, Any]] | None = None
        """Newest first, as the report lists them; None until read."""

    def compose(self) -> ComposeResult:
        """The table, the detail below it."""
        yield DataTable(id="checkpoint-table", cursor_type="row", zebra_stripes=True)
        yield Static(READING_CHECKPOINTS, id="checkpoint-detail", markup=False)

    def on_mount(self) -> None:
        self.ready = True
        table = self.query_one(DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        self._draw()

    def show(self, checkpoints: list[dict[str, Any]] | None) -> None:
        """The session's checkpoints, oldest first as the report has them (None: not read)."""
        self.checkpoints = None if checkpoints is None else list(reversed(checkpoints))
        if self.ready:
            self._draw()

    def selected(self) -> dict[str, Any] | None:
        """The checkpoint under the cursor, if any is shown."""
        if not self.ready or not self.checkpoints:
            return None
        table = self.query_one(DataTable)
        if not table.row_count or table.cursor_row >= len(self.checkpoints):
            return None
        return self.checkpoints[table.cursor_row]

    def _draw(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for checkpoint in self.checkpoints or []:
            mark, style = VERIFIED_MARKS[checkpoint.get("verified")]
            table.add_row(
                short_time(checkpoint["at"]),
                checkpoint["sha"][:10],
                Text(mark, style=style),
                f"{len(checkpoint.get('files', []))}{line_counts(checkpoint)}",
                cut(inert(checkpoint["subject"]), 80),
                key=checkpoint["sha"],
            )
        self._detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor moved: its checkpoint in detail."""
        self._detail()

    def _detail(self) -> None:
        checkpoint = self.selected()
        if self.checkpoints is None:
            text = READING_CHECKPOINTS
        else:
            text = NO_CHECKPOINTS if checkpoint is None else checkpoint_detail(checkpoint)
        self.query_one("#checkpoint-detail", Static).update(text)
