"""The lines of one run's output, drawn from the file by offset: only what is on screen.

A line-API widget: its height is the file's line count, and a row asks for its line's bytes
only when it is drawn, so opening, scrolling and searching a huge log cost the same as a
small one. Colours the agent wrote (SGR) are kept; every other control shows as text.
With wrap on, the scroll position counts lines (as `less` does) and each line takes the
rows it needs.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from rich.cells import get_character_cell_size
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agentherd.sessions.adapters.summary import summarize
from agentherd.sessions.sanitize import coloured_line
from agentherd.tui.dashboard.line_map import LineMap
from agentherd.tui.dashboard.logfile import IndexStep, LineReader

LINE_CHARS = 2000
"""A longer line is cut (with …) when shown; `herd logs` has all of it."""

RENDERED_KEPT = 4000
"""Rendered lines kept for redrawing: a few screens' worth, whatever the log's size."""


def render_bytes(data: bytes, raw: bool) -> Text:
    """One line as shown: stream-json summarised (unless raw), the agent's colours kept."""
    if data[:1] == b"\0":
        return Text("… (output the log cap removed to stay under log_max_bytes)", style="dim")
    stripped = data.lstrip()
    if not raw and stripped.startswith(b"{"):
        return Text(summarize(data, LINE_CHARS))
    return Text.from_ansi(coloured_line(data, LINE_CHARS, as_terminal=not raw), end="")


def _cut_every(text: Text, width: int) -> list[Text]:
    """The line in pieces of `width` cells, as a terminal wraps output (not at words)."""
    cuts, used = [], 0
    for index, character in enumerate(text.plain):
        cells = get_character_cell_size(character)
        if used + cells > width:
            cuts.append(index)
            used = 0
        used += cells
    return list(text.divide(cuts)) if cuts else [text]


class RunLines(ScrollView, can_focus=True):
    """One run's output file as lines; `map` says where each begins (sparse: bounded)."""

    DEFAULT_CSS = """
    RunLines { background: $surface; }
    """

    wrap: reactive[bool] = reactive(False)
    raw: reactive[bool] = reactive(False)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.path: Path | None = None
        self.reader = LineReader(None)
        self.map = LineMap(None)
        self._rendered: OrderedDict[int, Text] = OrderedDict()
        self._page_key: tuple[object, ...] | None = None
        self._page: list[Strip] = []
        self.lines_rendered = 0
        """Lines turned into text since opening (what tests bound: never the whole log)."""
        self.widest = 0
        self.mark_line: int | None = None
        """A line to highlight: the search's match."""
        self.following = True
        """The view sits at the end and keeps there as lines come (scrolling up lets go)."""

    # ----- the file -------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        """Complete lines, plus a last line still being written."""
        return self.map.line_count

    @property
    def end_bytes(self) -> int:
        """How much of the file is indexed."""
        return self.map.end_bytes

    def open(self, path: Path | None) -> None:
        """Show another file (or none), from scratch."""
        self.reader.close()
        self.path = path
        self.reader = LineReader(path)
        self.map.close()
        self.map = LineMap(path)
        self.widest = 0
        self.mark_line = None
        self._forget()
        self.virtual_size = Size(0, 0)
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.following = True

    def grow(self, step: IndexStep) -> int:
        """More of the file is indexed; returns how many lines were added."""
        before = self.line_count
        if step.restart:
            self._forget()
            self.reader.close()  # a replaced file (a compacted log) is read anew too
            self.reader = LineReader(self.path)
            before = 0
        else:
            partial = self.map.end_bytes > self.map.next_start
            if partial or step.complete == self.map.complete:
                self._rendered.pop(before - 1, None)  # the last line was still being written
        self.map.grow(step)
        self._resize()
        if self.following:
            self.keep_end()
        return self.line_count - before

    def keep_end(self) -> None:
        """To the end, now and once the new height is laid out (forced: until that layout
        Textual has no scrollbar for the new height and would refuse the scroll)."""
        self.following = True
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)
        self.call_after_refresh(self._to_end)

    def _to_end(self) -> None:
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)
            self.following = True

    def line_bytes(self, number: int) -> bytes:
        """The bytes of line `number` (read from the file)."""
        if not 0 <= number < self.line_count:
            return b""
        return self.reader.read(self.map.start_of(number), self.map.end_of(number))

    def line_text(self, number: int) -> Text:
        """Line `number` as shown, rendered once and kept while it is near the screen."""
        found = self._rendered.get(number)
        if found is not None:
            self._rendered.move_to_end(number)
            return found
        text = render_bytes(self.line_bytes(number), self.raw)
        text.expand_tabs()
        self.lines_rendered += 1
        self._rendered[number] = text
        if len(self._rendered) > RENDERED_KEPT:
            self._rendered.popitem(last=False)
        self.widest = max(self.widest, text.cell_len)
        return text

    def _forget(self) -> None:
        self._rendered.clear()
        self._page_key = None
        self._page = []

    def _resize(self) -> None:
        if self.wrap:  # the scroll position is the top line: any line may be the top one
            spare = max(0, self.scrollable_content_region.height - 1)
            self.virtual_size = Size(0, self.line_count + spare)
        else:
            # The widest line only: the view's own width, taken before the vertical
            # scrollbar claimed two columns, made a horizontal scrollbar for short lines
            # (seen in tmux), and its row hid the last line.
            self.virtual_size = Size(self.widest, self.line_count)
        self._page_key = None
        self.refresh()

    def watch_raw(self) -> None:
        self._forget()
        self.widest = 0
        self._resize()

    def watch_wrap(self) -> None:
        self.scroll_to(x=0, animate=False)
        self._resize()
        if self.following:
            self.keep_end()

    def on_resize(self) -> None:
        """A new height changes the wrapped view's spare rows."""
        self._resize()

    def on_unmount(self) -> None:
        self.reader.close()
        self.map.close()

    # ----- drawing --------------------------------------------------------------------------

    @property
    def at_end(self) -> bool:
        """The last line is on screen (new lines then scroll into view)."""
        if self.wrap:
            return self.following
        return self.following or self.scroll_offset.y >= self.max_scroll_y

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """A person scrolling up lets go of the end; scrolling back down takes it again."""
        super().watch_scroll_y(old_value, new_value)
        self.following = round(new_value) >= self.max_scroll_y

    def render_line(self, y: int) -> Strip:
        """Row `y` of the view: a line, or a part of a wrapped one."""
        width = self.scrollable_content_region.width
        style = self.rich_style
        if self.wrap:
            page = self._wrapped_page(width)
            return page[y] if y < len(page) else Strip.blank(width, style)
        scroll_x, scroll_y = self.scroll_offset
        number = scroll_y + y
        if number >= self.line_count:
            return Strip.blank(width, style)
        text = self.line_text(number)
        if text.cell_len > self.virtual_size.width:
            self._resize()
        return self._strip(text, number).crop_extend(scroll_x, scroll_x + width, style)

    def _strip(self, text: Text, number: int) -> Strip:
        line = text.copy()
        line.stylize_before(self.rich_style)
        if number == self.mark_line:
            line.stylize("reverse")
        return Strip(line.render(self.app.console), line.cell_len)

    def _wrapped_page(self, width: int) -> list[Strip]:
        """The rows on screen with wrap on; at the end the last line sits on the bottom row."""
        height = self.scrollable_content_region.height
        key = (self.scroll_offset.y, width, height, self.line_count, self.at_end, self.mark_line)
        if key == self._page_key:
            return self._page
        rows: list[Strip] = []
        if self.at_end:
            number = self.line_count - 1
            while number >= 0 and len(rows) < height:
                rows[:0] = self._wrapped(number, width)
                number -= 1
            rows = rows[-height:]
        else:
            number = self.scroll_offset.y
            while number < self.line_count and len(rows) < height:
                rows += self._wrapped(number, width)
                number += 1
            rows = rows[:height]
        self._page_key, self._page = key, rows
        return rows

    def _wrapped(self, number: int, width: int) -> list[Strip]:
        text = self.line_text(number).copy()
        text.stylize_before(self.rich_style)
        if number == self.mark_line:
            text.stylize("reverse")
        lines = _cut_every(text, max(1, width))
        return [
            Strip(line.render(self.app.console), line.cell_len).extend_cell_length(
                width, self.rich_style
            )
            for line in lines
        ] or [Strip([Segment(" " * width, self.rich_style)])]

    def shown_lines(self) -> list[str]:
        """The text of the lines on screen now (for tests and the search's check)."""
        top = self.scroll_offset.y
        height = self.scrollable_content_region.height
        return [self.line_text(n).plain for n in range(top, min(self.line_count, top + height))]
