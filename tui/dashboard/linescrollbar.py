"""A vertical scrollbar that, when its thumb moves, repaints only the lines that changed.

Textual's ScrollBar repaints every line of itself when its position changes, so each key that
scrolled the 200-row session table by a row restyled the scrollbar's whole height (4-8 ms of
a 20 ms key under a busy fleet), though a thumb moving by a fraction of a cell changes two or
three lines. Here the bar is worked out for the old and the new position (the same code the
scrollbar draws with: `renderer.render_bar`) and only the lines that differ are refreshed; a
change of size, hover or grab still repaints it whole, as ScrollBar does.
"""

from __future__ import annotations

from math import ceil

from textual.geometry import Region
from textual.reactive import Reactive
from textual.scrollbar import ScrollBar


class LineScrollBar(ScrollBar):
    """ScrollBar whose position change repaints only the lines whose glyph or style moved."""

    position: Reactive[float] = Reactive(0, repaint=False)

    def _bar(self, position: float) -> list[object]:
        """The bar's segments, one a line, with the thumb at `position` (as `_render_bar`)."""
        virtual_size = self.window_virtual_size
        window_size = self.window_size if self.window_size < virtual_size else 0
        bar = self.renderer.render_bar(
            size=self.size.height,
            virtual_size=ceil(virtual_size),
            window_size=ceil(window_size),
            position=position,
            thickness=self.thickness,
            vertical=True,
        )
        return list(bar.segments)

    def watch_position(self, old_value: float, new_value: float) -> None:
        """Refresh the lines the thumb left or reached (all of them if unsure)."""
        if not self.vertical or not self.is_mounted:
            self.refresh()
            return
        old, new = self._bar(old_value), self._bar(new_value)
        if len(old) != len(new) or len(new) != self.size.height:
            self.refresh()
            return
        width = self.size.width
        changed = [y for y, (was, now) in enumerate(zip(old, new, strict=True)) if was != now]
        if changed:
            self.refresh(*(Region(0, y, width, 1) for y in changed))
