"""The report as a markdown document a person reads top to bottom; agent text made inert.

Agent text stays as it was in the JSON; here it is made inert and escaped.
"""

from __future__ import annotations

import re

from agentherd.sessions.durations import format_duration
from agentherd.sessions.money import uncounted_text, usd_text
from agentherd.sessions.prices import table_header
from agentherd.sessions.report.models import Report, UsageTotals
from agentherd.sessions.report.steps import short
from agentherd.sessions.sanitize import ELLIPSIS, inert

MAX_TAIL_LINES = 40
"""Lines of verify output shown in the markdown; the JSON keeps MAX_TAIL_CHARS."""

MAX_LIST_ITEMS = 50
"""Longer lists (files, items) are cut in the markdown, with a count of the rest."""

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~&])")
_CODE_SPAN = re.compile(r"(`[^`\n]*`)")
_ORDERED_START = re.compile(r"\d+[.)]")


def _escape(text: str) -> str:
    """Backslash-escape the characters that markdown would read as structure."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def _guard_start(text: str) -> str:
    """Escape a leading list, quote or heading marker so a line stays plain text."""
    match = _ORDERED_START.match(text)
    if match:
        return text[: match.end() - 1] + "\\" + text[match.end() - 1 :]
    return "\\" + text if text[:1] in ("-", "+", "=") else text


def _text(value: object, max_chars: int = 200) -> str:
    """Agent text as one safe markdown line: inert, single-line, cut, escaped."""
    text = " ".join(inert(str(value)).split())
    if len(text) > max_chars:
        text = text[: max_chars - 1] + ELLIPSIS
    return _guard_start(_escape(text))


def _code(value: object) -> str:
    """An inline code span that no backtick in the value can close early."""
    text = " ".join(inert(str(value)).split())
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _code_block(value: str, max_lines: int = MAX_TAIL_LINES) -> list[str]:
    """A fenced block of inert output (its last lines), fenced longer than any backtick run."""
    lines = inert(value).rstrip("\n").split("\n")[-max_lines:]
    runs = [len(run) for run in re.findall(r"`{3,}", "\n".join(lines))]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence, *lines, fence]


def _with_code(value: str) -> str:
    """A herd sentence with `code` spans: escape the prose, keep the spans."""
    text = " ".join(inert(value).split())
    parts = _CODE_SPAN.split(text)
    out = [part if index % 2 else _escape(part) for index, part in enumerate(parts)]
    return _guard_start("".join(out))


def _money(usage: UsageTotals) -> str:
    """The cost as dollars, or a plain word when no run reported one."""
    model = usage.cost_unpriced_model
    unpriced = f"no price for `{model}` (add `{table_header(model)}` to herd.toml)" if model else ""
    if usage.cost_usd is None:
        unknown = f"cost unknown: {unpriced}" if unpriced else "cost unknown"
        cut = f"; {uncounted_text(usage.uncounted_requests)}" if usage.uncounted_requests else ""
        return unknown + cut
    estimated = " (estimated)" if usage.cost_estimated else ""
    left_out = f", not counting the tokens of {unpriced}" if unpriced else ""
    cut = f"; {uncounted_text(usage.uncounted_requests)}" if usage.uncounted_requests else ""
    return f"${usage.cost_usd:,.2f}{estimated}{left_out}{cut}"


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    """'1 crash', '2 crashes'."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _verdict(verified: object) -> str:
    """How a checkpoint's verification came out, in words."""
    if verified is True:
        return "verified"
    return "fails verification" if verified is False else "not verified"


def _capped(lines: list[str]) -> list[str]:
    """Cut a markdown list to MAX_LIST_ITEMS and say how many were left out."""
    if len(lines) <= MAX_LIST_ITEMS:
        return lines
    return [*lines[:MAX_LIST_ITEMS], f"- … and {len(lines) - MAX_LIST_ITEMS} more"]


def _summary(report: Report) -> str:
    """The one paragraph a person reads first."""
    passed, time = report.passed, report.time
    parts = []
    if passed.plan_total is None:
        parts.append("no plan")
    else:
        parts.append(f"{passed.plan_passing}/{passed.plan_total} plan items pass")
    if report.remains.plan_error:
        parts[-1] += " (the plan file is invalid)"
    changed = report.changed
    checkpoints, last = changed.checkpoints, changed.current()
    if last is not None:
        later = len(checkpoints) - 1 - checkpoints.index(last)
        reset = f" (reset to it: {_plural(later, 'later checkpoint')} not in the worktree)"
        parts.append(
            f"last checkpoint {_code(short(last.sha))} '{_text(last.subject, 60)}' "
            f"{_verdict(last.verified)}" + (reset if later else "")
        )
    elif checkpoints and changed.current_sha:
        parts.append(
            f"worktree reset to {_code(short(changed.current_sha))}, before every checkpoint"
        )
    else:
        parts.append("no checkpoint yet")
    if time.runs:
        wall = format_duration(time.wall_s) if time.wall_s is not None else "unknown time"
        spent = _money(report.usage)
        spent = f"{spent} spent" if report.usage.cost_usd is not None else spent
        parts.append(f"{spent} over {wall} in {_plural(time.runs, 'run')}")
    else:
        parts.append("never ran")
    crashes = len(report.incidents.crashes)
    parts.append(_plural(crashes, "crash", "crashes") if crashes else "no crashes")
    return "; ".join(parts) + "."


def _md_changed(report: Report) -> list[str]:
    """The "What changed" section."""
    changed, progress = report.changed, report.progress
    out = ["## What changed", ""]
    stat = changed.diffstat
    if stat is not None:
        out += [
            f"{_plural(stat.files, 'file')} changed, {stat.insertions} insertions(+), "
            f"{stat.deletions} deletions(-).",
            "",
        ]
    checkpoints = changed.checkpoints
    if not checkpoints:
        out += ["No checkpoint was committed.", ""]
    else:
        out += ["Checkpoints, oldest first:", ""]
        for cp in checkpoints:
            files = f" ({_plural(len(cp.files), 'file')})" if cp.files else ""
            out.append(
                f"- {_code(short(cp.sha))} {_text(cp.at, 40)} {_text(cp.subject)} "
                f"— {_verdict(cp.verified)}{files}"
            )
        out.append("")
    touched = changed.files_touched
    if touched:
        lines = [f"- {_code(path)}" for path in touched]
        out += ["Files touched:", "", *_capped(lines), ""]
    if progress.latest:
        when = f" (updated {_text(progress.updated_at, 40)})" if progress.updated_at else ""
        lines = [f"- {_text(entry, 400)}" for entry in progress.latest]
        out += [f"The agent's latest progress notes{when}:", "", *_capped(lines), ""]
    return out


def _md_passed(report: Report) -> list[str]:
    """The "What passed" section."""
    passed = report.passed
    out = ["## What passed", ""]
    if passed.plan_total is None:
        out += ["No plan was read.", ""]
    else:
        out += [f"{passed.plan_passing} of {passed.plan_total} plan items pass.", ""]
        lines = [f"- [x] {_text(item)}" for item in passed.items_passing]
        if lines:
            out += [*_capped(lines), ""]
    counts = passed.verifications
    out += [
        f"Checkpoint verifications: {counts.passed} passed, {counts.failed} failed, "
        f"{counts.pending} pending.",
        "",
    ]
    return out


def _md_remains(report: Report) -> list[str]:
    """The "What remains" section, with the verify output of the last failing checkpoint."""
    remains = report.remains
    out = ["## What remains", ""]
    failing = remains.items_failing
    if failing:
        out += ["Plan items still failing, in plan order:", ""]
        lines = [f"- [ ] {_text(item)}" for item in failing]
        out += [*_capped(lines), ""]
    elif report.passed.plan_total:
        out += ["Every plan item passes.", ""]
    if remains.plan_error:
        out += [f"The plan file is invalid: {_text(remains.plan_error, 400)}", ""]
    if remains.plan_changes:
        out += ["Changes to the plan against its baseline:", ""]
        for change in remains.plan_changes:
            out.append(
                f"- {_text(change['change'], 20)} item {int(change['index']) + 1}: "
                f"{_text(change['description'])}"
            )
        out.append("")
    if remains.open_warnings:
        out += ["Open warnings:", ""]
        for warning in remains.open_warnings:
            times = f" ×{warning.count}" if warning.count > 1 else ""
            out.append(
                f"- **{_text(warning.kind, 40)}**{times} ({_text(warning.at, 40)}): "
                f"{_text(warning.message, 400)}"
            )
        out.append("")
    failed = [cp for cp in report.changed.checkpoints if cp.verified is False]
    verification = failed[-1].verification if failed else None
    tail = verification.output_tail if verification else None
    if tail:
        out += [f"Verify output of checkpoint {_code(short(failed[-1].sha))}:", ""]
        out += [*_code_block(tail), ""]
    if len(out) == 2:
        out += ["Nothing known to remain.", ""]
    return out


def _md_incidents(report: Report) -> list[str]:
    """The "Incidents" section: crashes, restarts, rescued work, worktree resets."""
    incidents = report.incidents
    out = ["## Incidents", ""]
    lines = []
    for crash in incidents.crashes:
        how = _text(crash.outcome or f"exit {crash.exit}", 60)
        lines.append(f"- crash: run {crash.run} ended ({how}) at {_text(crash.at, 40)}")
    if incidents.restarts:
        lines.append(f"- {_plural(incidents.restarts, 'restart')}")
    lines += [
        f"- run {rescue.run}: uncommitted work rescued on {_code(rescue.ref)} "
        f"({_code(short(rescue.sha))})"
        for rescue in incidents.rescued
    ]
    lines += [
        f"- run {reset.run}: worktree reset to {_code(short(reset.sha))}"
        for reset in incidents.resets
    ]
    return out + (lines or ["None."]) + [""]


def _md_usage(report: Report) -> list[str]:
    """The "Usage and time" section."""
    usage, time = report.usage, report.time
    wall = format_duration(time.wall_s) if time.wall_s is not None else "unknown"
    started = _text(time.started_at, 40) if time.started_at else "never"
    return [
        "## Usage and time",
        "",
        f"- started: {started}",
        f"- wall time: {wall}; run time: {format_duration(time.run_s)} "
        f"in {_plural(time.runs, 'run')}",
        f"- cost: {_money(usage)}",
        f"- tokens: {usage.total_tokens:,} (input {usage.input_tokens:,}, "
        f"output {usage.output_tokens:,}, cache read {usage.cache_read_tokens:,}, "
        f"cache write {usage.cache_write_tokens:,})",
        f"- turns: {usage.turns:,}",
        *_md_spend(report),
        f"- agent: {_text(report.agent, 40)}; cwd: {_code(report.cwd)}",
        "",
    ]


def _md_spend(report: Report) -> list[str]:
    """The session's whole-life total, each budget limit, and where the spend is heading."""
    lines = []
    life = report.usage_total
    if life is not None:
        lines.append(
            f"- the session's whole life: {_money(life)}, {life.total_tokens:,} tokens, "
            f"{life.turns:,} turns"
        )
    budget = report.budget or {}
    for name, use in budget.items():
        if not isinstance(use, dict) or "fraction" not in use:
            continue
        mark = " (estimated)" if use.get("estimated") else ""
        lines.append(
            f"- budget {name}: {_amount(name, use.get('spent'))} of "
            f"{_amount(name, use.get('limit'))} ({float(use['fraction']):.0%}){mark}, "
            f"counting the {'whole life' if budget.get('covers') == 'life' else 'task'}"
        )
    heading = budget.get("projection")
    if isinstance(heading, dict):
        text = f"- heading: {heading.get('dimension')} runs out at {heading.get('exhausted_at')}"
        if heading.get("items_passing_by_then") is not None:
            text += f" with {heading['items_passing_by_then']}/{heading.get('plan_total')} passing"
        if heading.get("runs_out_before_plan"):
            text += ", before the plan is done"
        lines.append(text)
    return lines


def _amount(name: str, value: object) -> str:
    """A budget figure in its unit."""
    if not isinstance(value, int | float):
        return "unknown"
    if name == "cost_usd":
        return f"${usd_text(value)}"
    if name == "wall_time":
        return format_duration(float(value))
    return f"{int(value):,}"


def render(report: Report) -> str:
    """Render a report as a markdown document a person reads top to bottom."""
    title = f"# herd report: {_text(report.session, 80)} — {_text(report.state, 40)}"
    if report.reason:
        title += f" ({_text(report.reason, 80)})"
    if report.handle:
        title += f" · {_code(report.handle)}"
    steps = report.next_steps
    out = [title, "", f"_Generated {_text(report.generated_at, 40)}._", ""]
    out += [_summary(report), ""]
    out += _md_changed(report) + _md_passed(report) + _md_remains(report)
    out += _md_incidents(report) + _md_usage(report)
    out += ["## Next steps", ""]
    out += [f"{number}. {_with_code(step)}" for number, step in enumerate(steps, 1)] or ["None."]
    return "\n".join(out) + "\n"
