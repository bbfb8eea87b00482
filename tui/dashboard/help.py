"""The help screen: every key as bound now (generated from the bindings) and a legend of symbols."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KeyLine = tuple[str, str]
"""A key as shown (after [keys] rebinding) and what it does."""

LEGEND: tuple[tuple[str, str], ...] = (
    ("⚠N", "N warnings are open (stall, plan changed, scope, budget, log cap...)"),
    ("✓", "the last checkpoint passed herd's own verification"),
    ("✗", "the last checkpoint FAILS verification (enter, Checkpoints shows why)"),
    ("…", "the last checkpoint is not verified yet"),
    ("RST", "restarts after crashes in this task; yellow once there was one"),
    ("PLAN", "plan items passing / total; yellow when the agent changed the plan"),
    ("", "  against its baseline: approve or reject it"),
    ("UP", "how long the current run has been up"),
    ("COST", "the task's spend as the agent reported it; ~$ an estimate from herd's"),
    ("", "  price table; - when nothing is known (never an invented 0)"),
    ("BUDGET", "the budget dimension closest to its limit, % used; yellow at warn_at,"),
    ("", "  red when spent; ! it runs out before the plan is done"),
    ("green", "running · completed (bold)"),
    ("cyan", "starting, verifying, stopping: on its way"),
    ("yellow", "paused, backoff (waiting to restart), waiting-approval and waiting-input (bold)"),
    ("red", "failed: needs a person"),
    ("dim", "stopped, idle: at rest"),
)
"""Every symbol and colour of the fleet view, with what it means."""


def _table(rows: list[KeyLine] | tuple[tuple[str, str], ...], style: str = "b") -> Table:
    """Aligned `key  meaning` rows, the key in `style`; a long meaning wraps under itself.

    Plain text, not markup: seen in tmux, the `[` key came out as "[  [/b]"."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style=style, no_wrap=True)
    table.add_column()
    for key, what in rows:
        table.add_row(key, what.strip())  # a continuation row is indented by the grid
    return table


class HelpScreen(ModalScreen[None]):
    """The keys of the dashboard as bound now, and what each symbol means; Escape closes it."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("question_mark", "close", "Close", show=False),
    ]

    def __init__(self, lines: list[KeyLine], screen_lines: list[KeyLine] | None = None) -> None:
        super().__init__()
        self.lines = lines
        self.screen_lines = screen_lines or []

    def compose(self) -> ComposeResult:
        """Keys for the selected session, keys of this view, then the legend."""
        with VerticalScroll(classes="dialog"):
            yield Static("herd dashboard keys", classes="title")
            yield Static(_table(self.lines), id="keys")
            if self.screen_lines:
                yield Static("in this view", classes="title section")
                yield Static(_table(self.screen_lines), id="view-keys")
            yield Static("what the columns show", classes="title section")
            yield Static(_table(LEGEND, "b"), id="legend")
            yield Static("ctrl+p: command palette · Escape closes", classes="hint")

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
