"""The session screen's Events tab: the open warnings above the session's newest events.

It keeps what it was given and writes it once composed: the session screen composes this tab
after its first paint (Textual's `Lazy`) unless the screen opens on it."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log, Static


class EventsTab(Vertical):
    """The open warnings (one line each) and the event log."""

    def __init__(self, shown: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ready = False
        """Mounted: drawn now on every change (Textual's `is_mounted` is False in `on_mount`)."""
        self.shown = shown
        """The log keeps this many newest lines."""
        self.lines: list[str] = []
        self.warnings = ""

    def compose(self) -> ComposeResult:
        """The warnings, the log."""
        yield Static(self.warnings, id="open-warnings", markup=False)
        yield Log(id="event-log", max_lines=self.shown)

    def on_mount(self) -> None:
        self.ready = True
        self._draw()

    def show(self, lines: list[str], warnings: str) -> None:
        """The events' lines (oldest first) and the open warnings' text ("" for none)."""
        self.lines, self.warnings = lines[-self.shown :], warnings
        if self.ready:
            self._draw()

    def _draw(self) -> None:
        self.query_one("#open-warnings", Static).update(self.warnings)
        log = self.query_one(Log)
        log.clear()
        log.write_lines(self.lines)
