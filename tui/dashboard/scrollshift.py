"""A scrolled widget's styled lines moved with the scroll instead of all drawn again.

Scrolling a widget by a line marks every line of it dirty (Textual's ScrollView refreshes its
whole region), so each line goes through the widget's `render_line` and Textual's per-line
style pass again, although all but one of them only moved. Under 200 busy sessions a `j` that
scrolled the table cost the dashboard ~30 ms of CPU where one that did not cost ~8 ms, and
those keys were the p95. Here the lines that scrolled stay as they were drawn, moved to their
new place in Textual's cache of styled lines (`StylesCache`); only the lines the scroll
uncovered, and those already dirty, are drawn again. The screen is still repainted where the
widget is: what the terminal shows is the same, only the work to produce it is less.

textual is pinned (pyproject.toml): `_styles_cache`, its `_cache` and `_dirty_lines` are its
own names; tests compare a shifted table with one drawn from scratch.
"""

from __future__ import annotations

from textual.widget import Widget


def can_shift(widget: Widget) -> bool:
    """True when a styled line does not depend on where in the widget it is drawn: no border,
    outline or padding (the lines at the edges would differ)."""
    styles = widget.styles
    if any(styles.padding) or styles.has_rule("hatch"):
        return False
    edges = (*styles.border, *styles.outline)
    return all(not kind or kind in ("none", "hidden") for kind, _ in edges)


def shift_lines(
    widget: Widget, fixed_lines: int, dirty_before: set[int], old_y: int, new_y: int
) -> None:
    """After `widget` scrolled from `old_y` to `new_y` (and its refresh marked every line
    dirty), keep the styled lines that only moved: line y now shows what line y + (new_y -
    old_y) showed. `dirty_before`: the lines that were dirty before the scroll.

    The first `fixed_lines` lines (a header) do not scroll: they keep their state, as do lines
    below the widget's content (the scroll did not touch them).
    """
    cache = widget._styles_cache
    lines = cache._cache
    height = widget.size.height
    delta = new_y - old_y
    if not lines or not delta or abs(delta) >= height - fixed_lines:
        return
    kept = {y: strip for y, strip in lines.items() if not fixed_lines <= y < height}
    dirty = {y for y in cache._dirty_lines if y >= height}
    dirty.update(y for y in dirty_before if y < fixed_lines)
    for y in range(fixed_lines, height):
        source = y + delta
        if fixed_lines <= source < height and source in lines and source not in dirty_before:
            kept[y] = lines[source]
        else:
            dirty.add(y)
    lines.clear()
    lines.update(kept)
    cache._dirty_lines.clear()
    cache._dirty_lines.update(dirty)
