"""The fleet page: the dashboard's columns and its "needs a person" order, from the same
functions the dashboard uses (tui/dashboard/rows.py, ordering.py), as an HTML table that a
phone shows as one card per session."""

from __future__ import annotations

from urllib.parse import quote

from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.ordering import needs_person, sort_statuses
from agentherd.tui.dashboard.rows import COLUMNS, fleet_summary, row_cells
from agentherd.tui.web.layout import Writer, page, style_class

LAST_CHARS = 160
"""The last output column is cut here: a page wraps, it does not scroll sideways."""


def session_href(name: str) -> str:
    """`/session/NAME`: a session's page."""
    return f"/session/{quote(name, safe='')}"


def fleet_fragment(statuses: list[SessionStatus], esc: Writer, lost: str | None = None) -> str:
    """The live part of the fleet page: its summary and its table (what the stream replaces)."""
    statuses = [s for s in statuses if not s.archived]  # `herd archive` put them away
    ordered = sort_statuses(statuses, "attention")
    columns = [(k, label) for k, label in COLUMNS if k != "host" or any(s.host for s in statuses)]
    waiting = sum(1 for s in statuses if needs_person(s))
    parts = [f'<p class="summary">{esc(fleet_summary(statuses))}</p>']
    if lost:
        parts.append(f'<p class="lost">daemon not answering: {esc(lost)}</p>')
    if waiting:
        noun = "session needs" if waiting == 1 else "sessions need"
        parts.append(f'<p class="attention-note">{waiting} {noun} a person (listed first)</p>')
    head = "".join(f'<th scope="col">{esc(label)}</th>' for _, label in columns)
    rows = []
    for status in ordered:
        cells = row_cells(status, LAST_CHARS)
        tds = []
        for key, label in columns:
            text, style = cells[key]
            inner = esc(text)
            if key == "session":
                inner = f'<a href="{esc(session_href(status.session))}">{inner}</a>'
            klass = " ".join(c for c in (f"c-{key}", style_class(style)) if c)
            tds.append(f'<td class="{klass}" data-label="{esc(label)}">{inner}</td>')
        mark = ' class="needs-person"' if needs_person(status) else ""
        rows.append(f'<tr{mark} data-session="{esc(status.session)}">{"".join(tds)}</tr>')
    parts.append(
        f'<table class="fleet"><thead><tr>{head}</tr></thead>'
        f"<tbody>\n{chr(10).join(rows)}\n</tbody></table>"
    )
    return "\n".join(parts)


def fleet_page(statuses: list[SessionStatus], esc: Writer, lost: str | None = None) -> str:
    """The whole fleet page; the script keeps `#fleet` live from `/stream`."""
    body = (
        '<header><h1>herd</h1><p class="where">the fleet, most urgent first</p></header>\n'
        f'<main id="fleet" data-stream="/stream">\n{fleet_fragment(statuses, esc, lost)}\n</main>'
    )
    return page("herd: fleet", body)
