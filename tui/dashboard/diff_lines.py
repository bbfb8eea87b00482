"""A diff's coloured lines drawn through Textual's line API: only the lines on screen are
rendered (each once, then kept), so a file's diff of thousands of lines shows at once."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

MATCH_STYLE = "black on yellow"
"""The line a search found."""
CONTEXT_LINES = 3
"""Lines kept above a match scrolled to, so it is read in its place."""


class DiffLines(ScrollView, can_focus=True):
    """Lines of Rich Text, scrolled both ways (no wrap: a diff's columns mean something)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.lines: list[Text] = []
        self.match = -1
        self._strips: dict[int, Strip] = {}

    def set_lines(self, lines: list[Text]) -> None:
        """Show these lines from the top; no match marked."""
        self.lines, self.match = lines, -1
        self._strips.clear()
        width = max((line.cell_len for line in lines), default=0)
        self.virtual_size = Size(width, len(lines))
        self.scroll_home(animate=False)
        self.refresh()

    def mark(self, index: int) -> None:
        """Mark the line at `index` (a search's match) and scroll it into view."""
        for old in (self.match, index):
            self._strips.pop(old, None)
        self.match = index
        self.scroll_to(y=max(0, index - CONTEXT_LINES), animate=False)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        """One line of the view: its cached strip, cut to the horizontal scroll."""
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(index)
        if strip is None:
            text = self.lines[index]
            if index == self.match:
                text = text.copy()
                text.stylize(MATCH_STYLE)
            strip = Strip(list(text.render(self.app.console))).simplify()
            self._strips[index] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)
