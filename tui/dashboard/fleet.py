"""The fleet view: header with totals, the session table (sorted, filtered), details, output."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Resize
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, Static

from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.ordering import SORTS, needs_person, shown
from agentherd.tui.dashboard.output_view import FleetOutput
from agentherd.tui.dashboard.rows import COLUMNS, cut, detail_lines, fleet_summary
from agentherd.tui.dashboard.widgets import SessionTable

GIVE_WAY: tuple[tuple[str, int], ...] = (
    ("pid", 110),
    ("cost", 100),
    ("uptime", 90),
    ("checkpoint", 72),
    ("restarts", 64),
)
"""A column and the terminal width below which it gives way (least useful first)."""

SORT_KEYS = tuple(key for key, _ in SORTS)
SORT_LABELS = dict(SORTS)
DETAILS_MAX_LINES = 5
"""The details pane's lines: its max-height in app.tcss (6) less its top border."""


def columns_for(width: int, hosts: bool = False) -> tuple[str, ...]:
    """The columns that fit a terminal `width` characters wide (HOST only with `hosts`)."""
    dropped = {key for key, below in GIVE_WAY if width < below} | (set() if hosts else {"host"})
    return tuple(key for key, _ in COLUMNS if key not in dropped)


class FleetView(Vertical):
    """Every session at a glance; what is shown follows `sort_key` and `filter_text`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor(1)", "Down", show=False),
        Binding("k", "cursor(-1)", "Up", show=False),
        Binding("slash", "filter", "Filter", id="filter", tooltip="Filter by name, state, ⚠"),
        Binding(
            "o", "sort", "Sort", id="sort", tooltip="Next order: needs a person, name, state..."
        ),
        Binding("escape", "back", "Back", show=False),
    ]

    hosts = False
    """Across hosts (`[cluster]`): the HOST column shows."""
    sort_key: reactive[str] = reactive("attention")
    filter_text: reactive[str] = reactive("")

    class Selected(Message):
        """The cursor moved to another session (or the table became empty)."""

        def __init__(self, session: str | None) -> None:
            super().__init__()
            self.session = session

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.statuses: list[SessionStatus] = []
        self.notes: dict[str, str] = {}
        """A line per session shown under the details (the demo says what each agent shows)."""
        self._summary = ""
        self._details = ""
        self._details_lines = 0
        """The most lines the details pane has shown: it never shrinks (see refresh_details)."""
        self._table = SessionTable(id="sessions")

    def compose(self) -> ComposeResult:
        """Header, banner, filter (hidden until `/`), table, details, the output pane."""
        yield Static("herd: connecting…", id="summary", markup=False)
        yield Static("", id="banner", markup=False)
        yield Input(
            placeholder="filter: words of name, state, ⚠ kind; ! = needs a person", id="filter"
        )
        with Vertical(id="body"):
            yield self._table
            yield Static("", id="details", markup=False)
            yield FleetOutput(named=True, id="output-pane")

    @property
    def table(self) -> SessionTable:
        """The session table (kept, so a late message during shutdown finds it detached)."""
        return self._table

    def on_mount(self) -> None:
        """Fit the columns to the terminal."""
        self.table.set_columns(columns_for(self.app.size.width, self.hosts))

    def on_resize(self, event: Resize) -> None:
        """Columns give way on a narrow terminal, least useful first."""
        self.table.set_columns(columns_for(event.size.width, self.hosts))

    # ----- what is shown ------------------------------------------------------------------

    def show(self, statuses: list[SessionStatus], changed: set[str] | None = None) -> None:
        """New statuses from the daemon: rows (those of `changed` only, None: all), header and
        details."""
        self.statuses = statuses
        self._rows(changed)

    def _rows(self, changed: set[str] | None = None) -> None:
        rows = shown(self.statuses, self.sort_key, self.filter_text)
        self.table.show(rows, changed=changed)
        self._header(len(rows))
        self.refresh_details()

    def _header(self, rows: int) -> None:
        counts, _, rest = fleet_summary(self.statuses).partition("  ·  ")
        summary = f"herd  {counts}"
        attention = sum(1 for s in self.statuses if needs_person(s))
        if attention:  # before the totals: on a narrow terminal the header's end is cut
            summary += f"  ·  {attention} need a person"
        if self.filter_text:  # what the person chose before the totals, for the same reason
            summary += f"  ·  filter {self.filter_text!r}: {rows} shown"
        if self.sort_key != "config":
            summary += f"  ·  by {SORT_LABELS[self.sort_key]}"
        if rest:
            summary += f"  ·  {rest}"
        if summary != self._summary:
            self._summary = summary
            # One line at full width: no new layout (a layout repaints the whole screen).
            self._update("#summary", summary, layout=False)

    def refresh_details(self) -> None:
        """The few lines on where the selected session stands."""
        name = self.table.selected_session
        selected = next((s for s in self.statuses if s.session == name), None)
        lines = detail_lines(selected)
        if name in self.notes and lines:
            lines.insert(1, f"  demo: {self.notes[name]}")
        width = max(20, self.app.size.width - 2)
        # The pane keeps the tallest height it has had (up to its CSS max-height): moving the
        # cursor between sessions with more and fewer lines would otherwise change the layout,
        # which repaints the whole screen (the slowest keys under a busy fleet).
        lines = lines[:DETAILS_MAX_LINES]
        self._details_lines = max(self._details_lines, len(lines))
        lines += [""] * (self._details_lines - len(lines))
        details = "\n".join(cut(line, width) for line in lines)
        if details != self._details:
            layout = len(details.splitlines()) != len(self._details.splitlines())
            self._details = details
            self._update("#details", details, layout=layout)

    def _update(self, selector: str, text: str, layout: bool) -> None:
        """Put `text` in a Static child; none is left while the app is torn down.

        A snapshot can arrive after the children are gone (seen under load as a NoMatches
        crash at exit): it is then shown nowhere, not raised.
        """
        for widget in self.query(selector).results(Static):
            widget.update(text, layout=layout)

    def tick(self) -> None:
        """Once a second: the uptimes on screen."""
        self.table.tick()

    def set_stale(self, reason: str | None) -> None:
        """Dim the table under a banner while the daemon is unreachable (None: it is back)."""
        banner = self.query_one("#banner", Static)
        banner.set_class(reason is not None, "-visible")
        self.table.set_class(reason is not None, "-stale")
        if reason is not None:
            banner.update(reason)

    def watch_sort_key(self) -> None:
        """Re-order the rows."""
        if self.is_mounted:
            self._rows()

    def watch_filter_text(self) -> None:
        """Re-filter the rows."""
        if self.is_mounted:
            self._rows()

    # ----- events and actions -------------------------------------------------------------

    @on(SessionTable.RowHighlighted)
    def _highlighted(self, event: SessionTable.RowHighlighted) -> None:
        self.refresh_details()
        self.post_message(self.Selected(self.table.selected_session))

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.table.focus()

    def action_cursor(self, step: int) -> None:
        """j/k: move the cursor like the arrow keys."""
        table = self.table
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + step)))

    def action_filter(self) -> None:
        """Show the filter line and type into it; Enter returns to the table."""
        field = self.query_one("#filter", Input)
        field.add_class("-visible")
        field.focus()

    def action_sort(self) -> None:
        """The next order: needs a person, herd.toml, name, state, restarts, plan, cost."""
        index = SORT_KEYS.index(self.sort_key)
        self.sort_key = SORT_KEYS[(index + 1) % len(SORT_KEYS)]

    def action_back(self) -> None:
        """Escape: close the output pane, else clear the filter."""
        field = self.query_one("#filter", Input)
        if self.has_class("-output"):
            self.app.call_later(self.app.run_action, "hide_output")
        elif self.filter_text or field.has_class("-visible"):
            field.value = ""
            field.remove_class("-visible")
            self.table.focus()

    @on(SessionTable.HeaderSelected)
    def _header_clicked(self, event: SessionTable.HeaderSelected) -> None:
        key = event.column_key
        if key in SORT_LABELS:
            self.sort_key = key
