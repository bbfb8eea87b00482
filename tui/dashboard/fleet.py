"""The fleet view: header with totals, the session table (sorted, filtered), details, output."""

from __future__ import annotations

import time
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Resize
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Input, Static

from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.ordering import SORTS, moved_rows, needs_person, shown
from agentherd.tui.dashboard.output_view import FleetOutput
from agentherd.tui.dashboard.rows import COLUMNS, cut, detail_lines, fleet_summary
from agentherd.tui.dashboard.widgets import SessionTable
from agentherd.tui.render import state_text

GIVE_WAY: tuple[tuple[str, int], ...] = (
    ("pid", 110),
    ("cost", 100),
    ("uptime", 90),
    ("checkpoint", 90),
    ("restarts", 64),
)
"""A column and the terminal width below which it gives way (least useful first)."""

SORT_KEYS = tuple(key for key, _ in SORTS)
SORT_LABELS = dict(SORTS)
ORDER_HOLD_S = 1.5
"""After a key the rows keep their order this long: a session that changes state meanwhile
takes its new place only then, so `j j j p` never counts rows that moved under the cursor."""
MOVED_NAMES = 3
"""A re-sort's notice names at most this many sessions that moved."""
OUTPUT_PANE_MIN_SIZE = (100, 30)
"""From this many columns and rows the selected session's output shows under the table
without a key (seen in the demo: at 120x40 most of the screen was empty unless `l` was
pressed); below it the rows keep the screen and `l` shows the output."""
DETAILS_MAX_LINES = 5
"""The details pane's lines: its max-height in app.tcss (6) less its top border."""


def columns_for(width: int, hosts: bool = False) -> tuple[str, ...]:
    """The columns that fit a terminal `width` characters wide (HOST only with `hosts`)."""
    dropped = {key for key, below in GIVE_WAY if width < below} | (set() if hosts else {"host"})
    return tuple(key for key, _ in COLUMNS if key not in dropped)


def fit_header(parts: list[tuple[str, int]], width: int) -> str:
    """The header's parts (text, how soon it gives way: higher first, 0 and 1 never) joined
    within `width` characters: wide separators, then narrow ones, then without the parts that
    give way first; last, the first part (the counts) is cut with an ellipsis so the parts
    that stay fit (seen in the demo: the header's end cut at 120 columns)."""
    shown = list(parts)
    while True:
        for separator in ("  ·  ", " · "):
            text = separator.join(part for part, _ in shown)
            if len(text) <= width:
                return text
        droppable = [i for i in range(1, len(shown)) if shown[i][1] > 1]
        if not droppable:
            rest = "".join(" · " + part for part, _ in shown[1:])
            return cut(shown[0][0], max(width - len(rest), 10)) + rest
        del shown[max(droppable, key=lambda i: (shown[i][1], i))]


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
        self._rows_shown = 0
        self._details = ""
        self._details_lines = 0
        """The most lines the details pane has shown: it never shrinks (see refresh_details)."""
        self._table = SessionTable(id="sessions")
        self._held_until_s = 0.0
        """Until when (monotonic s) the rows keep their order: keys are being typed."""
        self._release: Timer | None = None
        """The timer that applies a re-sort held back while keys were typed."""
        self.output_session: str | None = None
        """Whose output the pane shows (None: the pane is hidden)."""
        self.output_wanted: bool | None = None
        """The person's choice with `l` (None: none yet, the pane follows the screen's size)."""

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
        """Columns give way on a narrow terminal, least useful first; the header fits again."""
        self.table.set_columns(columns_for(event.size.width, self.hosts))
        if self.statuses:
            self._header(self._rows_shown)

    # ----- what is shown ------------------------------------------------------------------

    def show(self, statuses: list[SessionStatus], changed: set[str] | None = None) -> None:
        """New statuses from the daemon: rows (those of `changed` only, None: all), header and
        details."""
        self.statuses = statuses
        self._rows(changed)

    def hold_order(self) -> None:
        """A key was pressed: the rows keep their order until ORDER_HOLD_S after the last key."""
        self._held_until_s = time.monotonic() + ORDER_HOLD_S

    def _rows(self, changed: set[str] | None = None, chosen: bool = False) -> None:
        """The rows in the current sort and filter; a re-sort the daemon's news causes waits
        while keys are typed (`chosen`: the person asked for this order, it applies now)."""
        rows = shown(self.statuses, self.sort_key, self.filter_text)
        before = self.table.order
        after = tuple(s.session for s in rows)
        if not chosen and after != before and set(after) == set(before):
            wait_s = self._held_until_s - time.monotonic()
            if wait_s > 0:
                by_name = {s.session: s for s in rows}
                rows = [by_name[name] for name in before]
                self._release_later(wait_s)
            else:
                self._say_moved(before, after)
        self.table.show(rows, changed=changed)
        self._header(len(rows))
        self.refresh_details()

    def _release_later(self, wait_s: float) -> None:
        """Apply the held re-sort once no key has been typed for ORDER_HOLD_S."""
        if self._release is None:
            self._release = self.set_timer(wait_s, self._release_order)

    def _release_order(self) -> None:
        """The hold is over (or was extended by another key: wait again)."""
        self._release = None
        wait_s = self._held_until_s - time.monotonic()
        if wait_s > 0:
            self._release_later(wait_s)
        else:
            self._rows()

    def _say_moved(self, before: tuple[str, ...], after: tuple[str, ...]) -> None:
        """A notice naming the sessions that changed place, where to and why (their state)."""
        moved = moved_rows(before, after)
        if not moved:
            return
        by_name = {s.session: s for s in self.statuses}
        words = [
            f"{name} moved to row {after.index(name) + 1} ({state_text(by_name[name])})"
            for name in moved[:MOVED_NAMES]
        ]
        if len(moved) > MOVED_NAMES:
            words.append(f"{len(moved) - MOVED_NAMES} more")
        self.notify("; ".join(words), title="re-sorted", timeout=4, markup=False)

    def _header(self, rows: int) -> None:
        """The header: the counts, who needs a person, the filter and order, the totals; cut
        to the width by whole parts, least useful first (fit_header)."""
        self._rows_shown = rows
        counts, _, rest = fleet_summary(self.statuses).partition("  ·  ")
        parts = [(f"herd  {counts}", 0)]
        attention = sum(1 for s in self.statuses if needs_person(s))
        if attention:
            parts.append((f"{attention} need a person", 1))
        if self.filter_text:
            parts.append((f"filter {self.filter_text!r}: {rows} shown", 1))
        if self.sort_key != "config":
            # The default order goes first when room is short: it is the order a person expects.
            parts.append(
                (f"by {SORT_LABELS[self.sort_key]}", 4 if self.sort_key == "attention" else 2)
            )
        parts += [(part, 3) for part in rest.split("  ·  ") if part]
        summary = fit_header(parts, max(20, self.app.size.width - 2))
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
        """Re-order the rows (now: the person chose it)."""
        if self.is_mounted:
            self._rows(chosen=True)

    def watch_filter_text(self) -> None:
        """Re-filter the rows."""
        if self.is_mounted:
            self._rows(chosen=True)

    # ----- the output pane ------------------------------------------------------------------

    def output_shown(self) -> bool:
        """Whether the output pane belongs on screen: as `l` chose, else where there is room."""
        if self.output_wanted is not None:
            return self.output_wanted
        columns, rows = OUTPUT_PANE_MIN_SIZE
        return self.app.size.width >= columns and self.app.size.height >= rows

    def place_output(self) -> None:
        """Show the selected session's output in the pane, or hide it, as `output_shown` says."""
        if not self.table.is_attached or self.app.screen is not self.screen:
            return  # shutting down, or the session screen shows the output
        name = self.table.selected_session
        if self.output_shown() and name is not None:
            if name != self.output_session:
                self.output_session = name  # blank at once, then its newest run's lines
                self.add_class("-output")
                self.query_one(FleetOutput).follow(name)
        elif self.output_session is not None or self.has_class("-output"):
            self.hide_pane()

    def toggle_output(self) -> None:
        """`l`: show the pane, or hide it; the choice holds whatever the screen's size."""
        if self.table.selected_session is not None:
            self.output_wanted = self.output_session is None
            self.place_output()

    def hide_output(self) -> None:
        """Hide the pane until `l` shows it again."""
        self.output_wanted = False
        self.hide_pane()

    def pause_output(self) -> None:
        """Stop reading the pane's file while another screen is in front (the session screen
        reads the output itself); the layout stays, so opening a session restyles nothing here
        (hiding the pane cost a first open ~14 ms at 30 sessions); `place_output` resumes it."""
        self.query_one(FleetOutput).follow(None)
        self.output_session = None

    def hide_pane(self) -> None:
        """Hide the pane and stop reading the file; the table has the keys again."""
        self.query_one(FleetOutput).follow(None)
        self.output_session = None
        if self.has_class("-output"):
            self.remove_class("-output")
            self.table.focus()
            self.app.refresh_bindings()  # seen in tmux: the footer kept the pane's keys

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
        """Escape: clear the filter, else close the output pane (until `l`): the pane shows
        without a key on a large screen, so it must not stand between Escape and the filter."""
        field = self.query_one("#filter", Input)
        if self.filter_text or field.has_class("-visible"):
            field.value = ""
            field.remove_class("-visible")
            self.table.focus()
        elif self.has_class("-output"):
            self.app.call_later(self.app.run_action, "hide_output")

    @on(SessionTable.HeaderSelected)
    def _header_clicked(self, event: SessionTable.HeaderSelected) -> None:
        key = event.column_key
        if key in SORT_LABELS:
            self.sort_key = key
