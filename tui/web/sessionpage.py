"""A session's page: where it stands, its last output, plan, progress, checkpoints, spend against
its budget, events and report, from the texts the dashboard's session screen shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentherd.sessions.records import Event
from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.rows import STATE_STYLES, VERIFIED_MARKS, detail_lines
from agentherd.tui.dashboard.spend_chart import SpendCharts
from agentherd.tui.dashboard.tabtext import line_counts, plan_lines, progress_entries, short_time
from agentherd.tui.render import state_text
from agentherd.tui.spend import budget_cell, spend_fields
from agentherd.tui.web.actions import ACTIONS, action_href
from agentherd.tui.web.diffpage import WORK, diff_href
from agentherd.tui.web.fleetpage import session_href
from agentherd.tui.web.layout import Writer, page, pre, section, style_class
from agentherd.tui.web.logtail import Lines

EVENTS_SHOWN = 100
"""The page lists the session's newest events (the whole log: `herd events --session`)."""

CHECKPOINTS_SHOWN = 30
"""... and its newest checkpoints."""

CHART_CHARS = 64
"""The spend chart's width: a phone scrolls it sideways rather than wrap its rows."""


@dataclass
class SessionView:
    """What the page is made of, read from the daemon and the files it names."""

    status: SessionStatus
    output: Lines
    run: int | None
    events: list[Event] = field(default_factory=list)
    progress: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    markdown: str = ""
    samples: list[list[Any]] | None = None
    """The daemon's spend samples for the chart (None: not read)."""
    unreadable: list[str] = field(default_factory=list)
    """What could not be read, and why (the rest of the page still shows)."""


def head_fragment(status: SessionStatus, esc: Writer, allow_actions: bool) -> str:
    """The live top of the page: state, plan, checkpoint, progress and warnings, the actions."""
    lines = "\n".join(esc(line) for line in detail_lines(status))
    style = STATE_STYLES.get(str(status.state), "")
    parts = [
        f'<p class="state {style_class(style)}">{esc(state_text(status))}'
        f" · run {esc(status.run or '-')} · {esc(status.handle or 'no task')}</p>",
        pre(lines, attrs=' class="detail"'),
    ]
    if allow_actions:
        links = " ".join(
            f'<a class="action" href="{esc(action_href(status.session, verb))}">'
            f"{esc(action.label)}</a>"
            for verb, action in ACTIONS.items()
            if action.offered(status)
        )
        parts.append(f'<nav class="actions">{links}</nav>')
    return "\n".join(parts)


def output_lines(lines: list[str], esc: Writer) -> str:
    """Readable output lines as the `<pre>`'s content (one escaped line each)."""
    return "".join(f"{esc(line)}\n" for line in lines)


def _output(view: SessionView, esc: Writer) -> str:
    status = view.status
    attrs = (
        f' data-session="{esc(status.session)}" data-run="{esc(view.run or "")}"'
        f' data-offset="{view.output.offset}" class="output"'
    )
    text = output_lines(view.output.lines, esc) if view.run else esc("no runs yet\n")
    title = f"output of run {view.run}" if view.run else "output"
    return section(title, pre(text, "output", attrs), "output-section")


def _plan(view: SessionView, esc: Writer) -> str:
    if not view.report:
        return section("plan", "<p>not read (see below)</p>")
    return section("plan", pre(esc(plan_lines(view.report, view.status))))


def _progress(view: SessionView, esc: Writer) -> str:
    entries = list(reversed(progress_entries(view.progress)))[:5]
    text = "\n\n".join(entries) or "the progress file is empty"
    return section("progress (newest first)", pre(esc(text)))


def _checkpoints(view: SessionView, esc: Writer) -> str:
    checkpoints = list(reversed(view.report.get("changed", {}).get("checkpoints", [])))
    if not checkpoints:
        return section("checkpoints", "<p>none yet: herd records each commit the agent makes</p>")
    items = []
    for checkpoint in checkpoints[:CHECKPOINTS_SHOWN]:
        mark, style = VERIFIED_MARKS[checkpoint.get("verified")]
        files = checkpoint.get("files", [])
        line = (
            f"{short_time(checkpoint.get('at'))}  {checkpoint.get('sha', '')[:10]}  "
            f"{len(files)} file(s){line_counts(checkpoint)}  {checkpoint.get('subject', '')}"
        )
        more = ""
        check = checkpoint.get("verification") or {}
        if check and not check.get("passed"):
            why = check.get("error") or (
                "timed out" if check.get("timed_out") else f"exit {check.get('exit_code')}"
            )
            tail = "\n".join((check.get("output_tail") or "").splitlines()[-6:])
            more = pre(esc(f"verification fails: {why}\n{tail}"), attrs=' class="s-bold-red"')
        href = diff_href(view.status.session, str(checkpoint.get("sha", "")))
        items.append(
            f'<li><span class="{style_class(style)}">{esc(mark)}</span> '
            f'<a href="{esc(href)}">{esc(line)}</a>'
            f"<br><small>{esc(', '.join(files[:12]))}</small>{more}</li>"
        )
    work = f'<p><a href="{esc(diff_href(view.status.session, WORK))}">uncommitted work</a></p>'
    return section("checkpoints", f'{work}<ul class="checkpoints">{"".join(items)}</ul>')


def _spend(view: SessionView, esc: Writer) -> str:
    status = view.status
    bar, style = budget_cell(status)
    rows = [f"{label}: {value}" for label, value in spend_fields(status)]
    text = "\n".join(rows) or "nothing spent yet"
    chart = ""
    if view.samples is not None:  # the dashboard's Spend tab, drawn as text
        lines = SpendCharts(view.samples, status).lines(CHART_CHARS)
        chart = pre(esc("\n".join(line.plain for line in lines)), attrs=' class="chart"')
    return section(
        "spend against the budget",
        f'<p class="bar {style_class(style)}">{esc(bar)}</p>{pre(esc(text))}{chart}',
    )


def _events(view: SessionView, esc: Writer) -> str:
    lines = [
        f"{short_time(e.at)}  run {e.run or '-':>3}  {e.kind}: {e.message}"
        for e in reversed(view.events[-EVENTS_SHOWN:])
    ]
    warnings = [
        f"⚠ open: {w.kind} ×{w.count} since {w.opened_at or w.at}: {w.message}"
        for w in view.status.warnings
    ]
    text = "\n".join([*warnings, *lines]) or "no events"
    return section("events (newest first)", pre(esc(text)))


def session_page(view: SessionView, esc: Writer, allow_actions: bool) -> str:
    """The whole page; the script keeps the head and the output live."""
    name = view.status.session
    notes = "".join(f'<p class="lost">{esc(why)}</p>' for why in view.unreadable)
    body = "\n".join(
        [
            f'<header><p><a href="/">← fleet</a></p><h1>{esc(name)}</h1></header>',
            f'<main data-session="{esc(name)}" data-href="{esc(session_href(name))}">',
            notes,
            f'<div id="head">{head_fragment(view.status, esc, allow_actions)}</div>',
            _output(view, esc),
            _plan(view, esc),
            _progress(view, esc),
            _checkpoints(view, esc),
            _spend(view, esc),
            _events(view, esc),
            section("report", pre(esc(view.markdown or "not read"))),
            "</main>",
        ]
    )
    return page(f"herd: {name}", body)
