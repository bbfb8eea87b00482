"""A one-line table cell as segments, without Rich's render pipeline.

DataTable renders each cell through `Console.render_lines(Styled(Padding(text)))`: measuring,
wrapping, splitting into lines, cropping and styling every segment, ~0.1 ms a cell. With 200
busy sessions the fleet's updates re-render a few dozen cells a second and every key two rows,
and that pipeline was most of the dashboard's CPU (py-spy: `_render_cell` 30 % of samples). A
plain single-line Text (what the session table holds) needs none of it: the same segments are
built here directly. Anything else (spans, new lines, tabs, a justify or overflow of its own)
returns None, and the caller renders it as DataTable does; tests compare both for equality.
"""

from __future__ import annotations

from functools import lru_cache

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text


@lru_cache(maxsize=256)
def _parsed(style: str) -> Style:
    """A cell's style string parsed once (the table has a handful of them)."""
    return Style.parse(style) if style else Style.null()


def plain_cell_line(
    text: Text, width: int, padding: int, pre_style: Style, post_style: Style
) -> list[Segment] | None:
    """The segments Rich draws for `text` in a cell `width` cells wide with `padding` on each
    side, `pre_style` under it and `post_style` over it; None when `text` is not plain."""
    inner = width - 2 * padding
    plain = text.plain
    if (
        inner < 1
        or padding < 1
        or text.spans
        or text.justify not in (None, "default", "left")
        or text.overflow not in (None, "fold")
        or "\n" in plain
        or "\t" in plain
        or "\r" in plain
    ):
        return None
    edge = pre_style + post_style
    own = text.style if isinstance(text.style, Style) else _parsed(text.style)
    length = cell_len(plain)
    if length > inner:  # Rich truncates a line that does not fit ("fold" on one line)
        plain, length = set_cell_size(plain, inner), inner
    pad = Segment(" " * padding, edge)
    line = [pad]
    if plain:  # with no style anywhere Rich leaves the text's own segment unstyled (None)
        styled = pre_style or own or post_style
        line.append(Segment(plain, pre_style + own + post_style if styled else None))
    elif not own:  # as Rich: an empty unstyled line keeps its empty segment, a styled one not
        line.append(Segment("", edge if pre_style or post_style else None))
    if length < inner:
        line.append(Segment(" " * (inner - length), edge))
    line.append(pad)
    return line
