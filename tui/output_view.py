"""A run's output in the session screen: follows the file, holds the view when scrolled up
("+N new lines"), searches with `/`, `n`, `N`, and switches runs and readable/raw."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Log, Static

from agentherd.tui.messages import LogLines

OUTPUT_MAX_LINES = 20_000
"""Lines the view holds; the rest stays in the file (`herd logs NAME --run N`)."""

BACKLOG_BYTES = 1 << 20
"""Opening a run shows its last mebibyte: thousands of lines, read in one go."""


class OutputView(Vertical):
    """One run's output; `run` None follows the newest run, a number pins that run."""

    KEYS: ClassVar[list[Binding]] = [
        Binding("slash", "view('search')", "Search", tooltip="Search the output"),
        Binding("n", "view('next_match', 1)", "Next", show=False, tooltip="Next match"),
        Binding("N", "view('next_match', -1)", "Prev", show=False, tooltip="Previous match"),
        Binding(
            "left_square_bracket", "view('run', -1)", "Run -", tooltip="The previous run's output"
        ),
        Binding("right_square_bracket", "view('run', 1)", "Run +", tooltip="The next run's output"),
        Binding("v", "view('toggle_raw')", "Raw", tooltip="Stream-json as written, or readable"),
        Binding("G", "view('follow')", "Follow", show=False, tooltip="Jump to the end, follow"),
    ]
    """Keys of the output tab; the session screen binds them (whatever has the focus) and
    hands them here."""

    run: reactive[int | None] = reactive(None)
    raw: reactive[bool] = reactive(False)
    unseen: reactive[int] = reactive(0)
    """Lines that arrived while the person was scrolled up."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.title_text = ""
        self.pattern = ""
        self.match_line: int | None = None
        self.latest_run = 0
        """The session's newest run number (from its status), for `[` and `]`."""

    def compose(self) -> ComposeResult:
        """Title, the lines, the search line (hidden until `/`)."""
        yield Static("", id="output-title", markup=False)
        yield Log(id="run-output", max_lines=OUTPUT_MAX_LINES)
        yield Input(placeholder="search the output (Enter; n/N next/previous)", id="search")

    @property
    def log_widget(self) -> Log:
        """The lines."""
        return self.query_one("#run-output", Log)

    def add(self, message: LogLines) -> None:
        """A batch from the feed; the view stays where the person scrolled to."""
        log = self.log_widget
        if message.reset:
            log.clear()
            self.unseen = 0
        at_end = log.scroll_offset.y >= log.max_scroll_y
        log.auto_scroll = at_end
        if message.lines:
            log.write_lines(message.lines)
            if not at_end:
                self.unseen += len(message.lines)
        self.title_text = message.title
        self._title()

    def _title(self) -> None:
        parts = [self.title_text, "raw" if self.raw else "readable"]
        if self.unseen:
            parts.append(f"+{self.unseen:,} new lines (G follows)")
        if self.pattern:
            where = f"line {self.match_line + 1}" if self.match_line is not None else "no match"
            parts.append(f"/{self.pattern}: {where}")
        self.query_one("#output-title", Static).update("  ·  ".join(p for p in parts if p))

    def watch_unseen(self) -> None:
        if self.is_mounted:
            self._title()

    def action_follow(self) -> None:
        """Back to the end, following new lines again."""
        log = self.log_widget
        log.auto_scroll = True
        log.scroll_end(animate=False)
        self.unseen = 0

    def action_search(self) -> None:
        """Open the search line."""
        field = self.query_one("#search", Input)
        field.add_class("-visible")
        field.focus()

    @on(Input.Submitted, "#search")
    def _search(self, event: Input.Submitted) -> None:
        self.pattern = event.value
        event.input.remove_class("-visible")
        self.log_widget.focus()
        self.match_line = None
        self.action_next_match(1)

    def action_next_match(self, step: int) -> None:
        """Jump to the next (or previous) line holding the pattern, wrapping around."""
        if not self.pattern:
            return
        log = self.log_widget
        lines = log.lines
        needle = self.pattern.lower()
        count = len(lines)
        start = self.match_line if self.match_line is not None else int(log.scroll_offset.y) - 1
        for offset in range(1, count + 1):
            index = (start + step * offset) % count if count else 0
            if needle in lines[index].lower():
                self.match_line = index
                log.auto_scroll = False
                log.scroll_to(y=max(0, index - 2), animate=False)
                break
        else:
            self.match_line = None
        self._title()

    def action_run(self, step: int) -> None:
        """The previous or next run; stepping past the newest follows the newest again."""
        shown = self.run or self.latest_run
        wanted = shown + step
        if wanted >= self.latest_run:
            self.run = None
        elif wanted >= 1:
            self.run = wanted

    def action_toggle_raw(self) -> None:
        """Readable summaries or the lines as the agent wrote them."""
        self.raw = not self.raw
