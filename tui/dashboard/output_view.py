"""A run's output, in the session screen's Output tab and the fleet view's output pane:
follows the file, holds the view when scrolled up ("+N new lines"), searches with `/`, `n`,
`N`, wraps with `w`, and switches runs (`[`, `]`, the picker `L`) and readable/raw. The lines
come from the file by offset (tui/dashboard/run_lines.py): any size. The view reads its own feed
(tui/dashboard/run_feed.py) for the session it is given."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import anyio
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Static

from agentherd.supervisor.process.ptyholder import SOCKET_NAME
from agentherd.tui.dashboard.host import host
from agentherd.tui.dashboard.line_map import find_line
from agentherd.tui.dashboard.run_feed import RunGrew, RunOpened, follow_run
from agentherd.tui.dashboard.run_lines import RunLines
from agentherd.tui.dashboard.run_picker import RunPicker

SEARCH_CHECKS = 200
"""Matches in the bytes a search checks against the line as shown (a summary may not hold
the word) before it settles for the line as written: a search never renders the whole log."""


def _via_view(action: str) -> str:
    """`next_match(1)` as the session screen's `view('next_match', 1)`."""
    name, _, args = action.partition("(")
    args = args.rstrip(")")
    return f"view('{name}', {args})" if args else f"view('{name}')"


OUTPUT_KEYS: list[Binding] = [
    Binding("slash", "search", "Search", tooltip="Search the output"),
    Binding("n", "next_match(1)", "Next", show=False, tooltip="Next match"),
    Binding("N", "next_match(-1)", "Prev", show=False, tooltip="Previous match"),
    Binding("left_square_bracket", "run(-1)", "Run -", tooltip="The previous run's output"),
    Binding("right_square_bracket", "run(1)", "Run +", tooltip="The next run's output"),
    Binding(
        "L",
        "pick_run",
        "Runs",
        id="runs",
        tooltip="Every run of the session (start, end, exit, size): pick one to read",
    ),
    Binding("v", "toggle_raw", "Raw", tooltip="Stream-json as written, or readable"),
    Binding("w", "toggle_wrap", "Wrap", tooltip="Wrap long lines, or cut them"),
    Binding("g", "top", "Top", show=False, tooltip="Jump to the first line"),
    Binding("G", "follow", "Follow", show=False, tooltip="Jump to the end, follow"),
]
"""Keys of a run's output, as actions of the view (the fleet's pane binds them while it has
the focus: tab or a click)."""


class OutputView(Vertical):
    """One run's output; `run` None follows the newest run, a number pins that run."""

    KEYS: ClassVar[list[Binding]] = [replace(k, action=_via_view(k.action)) for k in OUTPUT_KEYS]
    """The same keys for the session screen, which binds them whatever has the focus and
    hands them here (through its `view` action, which also brings the Output tab forward)."""

    FOLLOW_HINT = "G follows"
    """How the person gets back to the end, said next to "+N new lines"."""

    run: reactive[int | None] = reactive(None)
    raw: reactive[bool] = reactive(False)
    unseen: reactive[int] = reactive(0)
    """Lines that arrived while the person was scrolled up."""

    def __init__(self, named: bool = False, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.named = named
        """The title starts with the session's name (the fleet's pane, under every row)."""
        self.session: str | None = None
        """Whose output is read (None: nobody's, the feed stopped)."""
        self.title_text = ""
        self.terminal_note = ""
        self.pattern = ""
        self.match_line: int | None = None
        self.shown_run: int | None = None
        self.latest_run = 0
        """The session's newest run number (from its status), for `[` and `]`."""

    def compose(self) -> ComposeResult:
        """Title, the lines, the search line (hidden until `/`)."""
        yield Static("", id="output-title", markup=False)
        yield RunLines(id="run-output")
        yield Input(placeholder="search the output (Enter; n/N next/previous)", id="search")

    @property
    def lines(self) -> RunLines:
        """The lines."""
        return self.query_one(RunLines)

    # ----- the feed ---------------------------------------------------------------------------

    def follow(self, session: str | None) -> None:
        """Read `session`'s output, run `run` (None: the newest, following newer ones); another
        session starts from its newest run, blank at once so no other session's lines stay;
        None stops reading."""
        if session != self.session:
            self.session = session
            self.set_reactive(OutputView.run, None)
            self.shown_run, self.latest_run, self.title_text = None, 0, "reading…"
            self.lines.open(None)
            self.unseen = 0
            self._title()
        self.workers.cancel_group(self, "run-feed")
        if session is not None:
            client = host(self.app).client
            self.run_worker(
                follow_run(client, session, self.post_message, self.run),
                group="run-feed",
                exclusive=True,
                exit_on_error=False,
            )

    def watch_run(self) -> None:
        """Another run picked: read that one."""
        if self.is_mounted and self.session is not None:
            self.follow(self.session)

    def on_run_opened(self, message: RunOpened) -> None:
        """The feed opened a run's file (only the session shown now counts)."""
        message.stop()
        if message.session == self.session:
            self.opened(message)

    def on_run_grew(self, message: RunGrew) -> None:
        """The feed indexed more lines (only the session shown now counts)."""
        message.stop()
        if message.session == self.session:
            self.grew(message)

    # ----- what the feed found --------------------------------------------------------------

    def opened(self, message: RunOpened) -> None:
        """Another run's file (a newer run while following, or the one picked)."""
        self.shown_run = message.run
        self.latest_run = max(self.latest_run, message.newest)
        self.lines.open(message.path)
        self.unseen = 0
        self.match_line = None
        if message.run is None:
            self.title_text = "waiting for the first run"
        else:
            self.title_text = f"run {message.run} of {self.latest_run}"
        # A live interactive run's terminal: its bytes read as lines are its redraws.
        held = message.path is not None and (message.path.parent / SOCKET_NAME).exists()
        self.terminal_note = "its screen: the Terminal tab (9)" if held else ""
        self._title()

    def grew(self, message: RunGrew) -> None:
        """New lines indexed; the view stays where the person scrolled to."""
        lines = self.lines
        if message.path != lines.path:
            return  # a late batch of the run shown before
        added = lines.grow(message.step)
        if lines.following:
            self.unseen = 0  # the person scrolled back down to the end
        elif added > 0:
            self.unseen += added
        self._title()

    def _title(self) -> None:
        lines = self.query_one(RunLines)
        named = self.named and self.session
        parts = [f"{self.session}: {self.title_text}" if named else self.title_text]
        # What the person is doing comes before the counts: a narrow terminal cuts the end.
        if self.pattern:
            where = f"line {self.match_line + 1:,}" if self.match_line is not None else "no match"
            parts.append(f"/{self.pattern}: {where}")
        if self.unseen:
            parts.append(f"+{self.unseen:,} new lines ({self.FOLLOW_HINT})")
        parts += [
            self.terminal_note,
            f"{lines.line_count:,} lines",
            "raw" if self.raw else "readable",
            "wrap" if lines.wrap else "",
        ]
        self.query_one("#output-title", Static).update("  ·  ".join(p for p in parts if p))

    def watch_unseen(self) -> None:
        if self.is_mounted:
            self._title()

    def watch_raw(self, raw: bool) -> None:
        if self.is_mounted:
            self.lines.raw = raw
            self._title()

    # ----- keys -----------------------------------------------------------------------------

    def action_follow(self) -> None:
        """Back to the end, following new lines again."""
        self.lines.keep_end()
        self.unseen = 0

    def action_top(self) -> None:
        """The first line of the run."""
        self.lines.following = False
        self.lines.scroll_home(animate=False, immediate=True)

    def action_toggle_wrap(self) -> None:
        """Long lines wrapped onto the next rows, or cut at the edge (scroll right to read)."""
        self.lines.wrap = not self.lines.wrap
        self._title()

    def action_search(self) -> None:
        """Open the search line."""
        field = self.query_one("#search", Input)
        field.add_class("-visible")
        field.focus()

    @on(Input.Submitted, "#search")
    def _search(self, event: Input.Submitted) -> None:
        self.pattern = event.value
        event.input.remove_class("-visible")
        self.lines.focus()
        self.match_line = None
        self.action_next_match(1)

    def action_next_match(self, step: int) -> None:
        """Jump to the next (or previous) line holding the pattern, wrapping around."""
        if self.pattern:
            self._find(step)

    @work(group="search", exclusive=True, exit_on_error=False)
    async def _find(self, step: int) -> None:
        """Search the file (in a thread, slice by slice), then show the line found."""
        lines = self.lines
        if lines.path is None or not lines.line_count:
            return
        start = self.match_line if self.match_line is not None else lines.scroll_offset.y - 1
        start = min(max(start, 0), lines.line_count - 1)
        needle = self.pattern.lower()
        first: int | None = None
        found: int | None = None
        checked: set[int] = set()
        at = start
        for _ in range(SEARCH_CHECKS):
            hit = await anyio.to_thread.run_sync(
                find_line, lines.map.copy(), self.pattern, at, step
            )
            if hit is None or hit in checked:
                break
            checked.add(hit)
            first = hit if first is None else first
            if needle in lines.line_text(hit).plain.lower():
                found = hit
                break
            at = hit
        found = found if found is not None else first  # the line as written, at worst
        if found is None:  # the match shown is the only one (seen in tmux: `n` said no match)
            found = self.match_line
        self.match_line = found
        lines.mark_line = found
        lines.refresh()
        if found is not None:
            lines.following = False
            lines.scroll_to(y=max(0, found - 2), animate=False, immediate=True)
        self._title()

    def action_run(self, step: int) -> None:
        """The previous or next run; stepping past the newest follows the newest again."""
        shown = self.run or self.shown_run or self.latest_run
        wanted = shown + step
        if not self.latest_run:
            self.notify("no run yet", timeout=2)
        elif not 1 <= wanted <= self.latest_run:  # say so: a key that does nothing looks broken
            edge = "first" if step < 0 else "newest"
            self.notify(f"run {shown} is the {edge} run", timeout=2, markup=False)
        elif wanted >= self.latest_run:
            self.run = None
        else:
            self.run = wanted

    def action_pick_run(self) -> None:
        """A list of every run of the session; the one chosen is shown (the newest follows)."""
        if self.session is None:
            return

        def chosen(run: int | None) -> None:
            if run is not None:
                self.run = None if run >= self.latest_run else run

        client = host(self.app).client
        shown = self.shown_run or self.latest_run
        path = str(self.lines.path) if self.lines.path is not None else None
        picker = RunPicker(client, self.session, shown, self.latest_run, path)
        self.app.push_screen(picker, chosen)

    def action_toggle_raw(self) -> None:
        """Readable summaries or the lines as the agent wrote them."""
        self.raw = not self.raw


class FleetOutput(OutputView):
    """The fleet view's output pane: the selected row's output, read as the Output tab reads it."""

    BINDINGS: ClassVar[list[BindingType]] = list(OUTPUT_KEYS)
    """The output's keys while the pane has the focus (the session screen binds its own, so
    that its footer leads with Back and Help)."""

    FOLLOW_HINT = "below"
    """The table keeps the focus (`G` is the pane's only once tab gives it the focus);
    scrolling down to the end follows again."""
