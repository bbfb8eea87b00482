"""The final report of a session: what changed, what passed, what remains, what it cost.

Pure: the daemon gathers the facts into a ReportInput; `build` reads them into a Report (facts
in one pass over the events, then next steps), `build_report` gives its ``herd report --json``
object and `render_markdown` the document a person reads.
"""

from __future__ import annotations

from typing import Any

from agentherd.sessions.report import facts, markdown
from agentherd.sessions.report.models import Report, ReportInput, UsageTotals
from agentherd.sessions.report.steps import next_steps

__all__ = ["Report", "ReportInput", "build", "build_report", "render_markdown"]


def build(data: ReportInput) -> Report:
    """Read the report's facts from its input and derive the next steps from them."""
    events = facts.read_events(data)
    changed = facts.changed_facts(data)
    report = Report(
        session=data.session,
        state=data.state,
        reason=data.reason,
        handle=data.handle,
        generated_at=data.generated_at,
        agent=data.agent,
        cwd=data.cwd,
        time=facts.time_facts(data),
        changed=changed,
        passed=facts.passed_facts(data, changed.checkpoints),
        remains=facts.remains_facts(data, events.events),
        incidents=facts.incidents_facts(data, events),
        usage=facts.usage_facts(data),
        progress=facts.progress_facts(data),
        usage_total=UsageTotals(**data.usage_total) if data.usage_total else None,
        budget=data.budget,
    )
    return report.model_copy(update={"next_steps": next_steps(report)})


def build_report(data: ReportInput) -> dict[str, Any]:
    """Build the ``herd report --json`` object: stable keys, agent text as it was."""
    return build(data).model_dump(mode="json")


def render_markdown(report: Report | dict[str, Any]) -> str:
    """Render a report (or its JSON object) as markdown a person reads top to bottom."""
    if not isinstance(report, Report):
        report = Report.model_validate(report)
    return markdown.render(report)
