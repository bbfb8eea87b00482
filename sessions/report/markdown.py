"""The final report of a session: what changed, what passed, what remains, what it cost.

Pure: the daemon gathers the facts into a ReportInput; build_report turns them into the
``herd report --json`` object and render_markdown into the document a person reads. Agent text
stays as it was in the JSON; the markdown makes it inert and escapes it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentherd.sessions.agent_output import Usage
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.durations import format_duration
from agentherd.sessions.plan import Plan, diff_plan
from agentherd.sessions.records import WARNING_KINDS, Event, RunRecord
from agentherd.sessions.sanitize import ELLIPSIS, inert

RESOLVED_BY: dict[str, frozenset[str]] = {
    "verify-failed": frozenset({"verify-passed"}),
    "claims-done-but-fails": frozenset({"verify-passed"}),
    "repeated-failure": frozenset({"verify-passed"}),
    "stalled": frozenset({"checkpoint", "run-started"}),
    "rate-limited": frozenset({"run-started"}),
    "plan-tampered": frozenset({"plan-approved", "plan-rejected"}),
}
"""A warning is no longer open once a later event of one of these kinds arrived."""

TERMINAL = frozenset({"stopped", "completed", "failed"})
"""States in which the task has ended, so its wall time ends with its last run."""

MAX_TAIL_CHARS = 4000
"""Verify output kept per checkpoint: the end of a test run, where the failures are."""

MAX_TAIL_LINES = 40
"""Lines of verify output shown in the markdown; the JSON keeps MAX_TAIL_CHARS."""

MAX_LIST_ITEMS = 50
"""Longer lists (files, items) are cut in the markdown, with a count of the rest."""

MAX_STEP_TEXT = 80
"""Agent text quoted inside a next step is cut to this many characters."""

_VERIFY_KEYS = ("passed", "exit_code", "timed_out", "duration_s", "started_at", "error")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~&])")
_CODE_SPAN = re.compile(r"(`[^`\n]*`)")
_ORDERED_START = re.compile(r"\d+[.)]")


class ReportInput(BaseModel):
    """Everything the report needs, gathered by the daemon; nothing here reads disk or git."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    session: str
    state: str
    reason: str | None = None
    handle: str | None = None
    generated_at: str
    task_started_at: str | None = None
    runs: list[RunRecord] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    checkpoints: list[Checkpoint] = Field(default_factory=list)
    verifications: dict[str, dict[str, Any]] = Field(default_factory=dict)
    plan_baseline: Plan | None = None
    plan_current: Plan | None = None
    plan_error: str | None = None
    progress_latest: list[str] = Field(default_factory=list)
    progress_updated_at: str | None = None
    diffstat: tuple[int, int, int] | None = None
    files_touched: list[str] = Field(default_factory=list)
    agent: str = "plain"
    cwd: str = "."


# ----- facts -------------------------------------------------------------------------------


def _parse_time(value: str | None) -> datetime | None:
    """Read an ISO-8601 time as UTC (naive means UTC); None when absent or unreadable."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    """Write a time the way the contract does: ISO-8601 UTC with a Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _task_events(data: ReportInput) -> list[Event]:
    """The events of the current task (all of them when its start is unknown)."""
    start = _parse_time(data.task_started_at)
    if start is None:
        return list(data.events)
    kept = []
    for event in data.events:
        at = _parse_time(event.at)
        if at is None or at >= start:
            kept.append(event)
    return kept


def _time(data: ReportInput) -> dict[str, Any]:
    """When the task started, how long it has lasted, and how long its runs ran."""
    now = _parse_time(data.generated_at) or datetime.now(UTC)
    starts = [t for t in (_parse_time(run.started_at) for run in data.runs) if t is not None]
    started = _parse_time(data.task_started_at) or (min(starts) if starts else None)
    run_s = 0.0
    ends: list[datetime] = []
    for run in data.runs:
        begin = _parse_time(run.started_at)
        end = _parse_time(run.ended_at)
        if end is not None:
            ends.append(end)
        if begin is not None:
            run_s += max(((end or now) - begin).total_seconds(), 0.0)
    wall_s = None
    if started is not None:
        finish = max(ends) if data.state in TERMINAL and ends else now
        wall_s = round(max((finish - started).total_seconds(), 0.0), 1)
    return {
        "started_at": _iso(started) if started else None,
        "wall_s": wall_s,
        "runs": len(data.runs),
        "last_run": max((run.run for run in data.runs), default=None),
        "run_s": round(run_s, 1),
    }


def _verification(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verification result of one checkpoint, with its output tail cut to the end."""
    if not isinstance(result, dict):
        return None
    kept = {key: result.get(key) for key in _VERIFY_KEYS}
    tail = result.get("output_tail")
    kept["output_tail"] = tail[-MAX_TAIL_CHARS:] if isinstance(tail, str) else None
    return kept


def _verified(checkpoint: Checkpoint, result: dict[str, Any] | None) -> bool | None:
    """The checkpoint's own verdict, else the verification result's, else None (pending)."""
    if checkpoint.verified is not None:
        return checkpoint.verified
    passed = result.get("passed") if isinstance(result, dict) else None
    return passed if isinstance(passed, bool) else None


def _changed(data: ReportInput) -> dict[str, Any]:
    """Checkpoints (oldest first), the diffstat and the files touched."""
    checkpoints = []
    for checkpoint in data.checkpoints:
        result = data.verifications.get(checkpoint.sha)
        checkpoints.append(
            {
                "sha": checkpoint.sha,
                "at": _iso(checkpoint.at),
                "subject": checkpoint.subject,
                "verified": _verified(checkpoint, result),
                "files": list(checkpoint.files),
                "verification": _verification(result),
            }
        )
    diffstat = None
    if data.diffstat is not None:
        files, insertions, deletions = data.diffstat
        diffstat = {"files": files, "insertions": insertions, "deletions": deletions}
    return {
        "checkpoints": checkpoints,
        "diffstat": diffstat,
        "files_touched": list(data.files_touched),
    }


def _passed(data: ReportInput, checkpoints: list[dict[str, Any]]) -> dict[str, Any]:
    """Plan items passing now, and how the checkpoints' verifications came out."""
    plan = data.plan_current or data.plan_baseline
    verdicts = [checkpoint["verified"] for checkpoint in checkpoints]
    return {
        "plan_passing": plan.passing if plan else None,
        "plan_total": plan.total if plan else None,
        "items_passing": [item.description for item in plan.items if item.passes] if plan else [],
        "verifications": {
            "passed": verdicts.count(True),
            "failed": verdicts.count(False),
            "pending": sum(1 for verdict in verdicts if verdict is None),
        },
    }


def _open_warnings(data: ReportInput, events: list[Event], tampered: bool) -> list[dict[str, Any]]:
    """The task's warnings still open: the latest of each kind, with how often it came."""
    latest: dict[str, dict[str, Any]] = {}
    for position, event in enumerate(events):
        if event.kind not in WARNING_KINDS:
            continue
        closers = RESOLVED_BY.get(event.kind, frozenset())
        if any(later.kind in closers for later in events[position + 1 :]):
            latest.pop(event.kind, None)
            continue
        count = latest.get(event.kind, {}).get("count", 0) + 1
        latest[event.kind] = {
            "kind": event.kind,
            "message": event.message,
            "at": event.at,
            "count": count,
        }
    if data.plan_error is None:
        latest.pop("plan-invalid", None)
    if not tampered and data.plan_baseline is not None and data.plan_current is not None:
        latest.pop("plan-tampered", None)
    return sorted(latest.values(), key=lambda warning: str(warning["at"]))


def _remains(data: ReportInput, events: list[Event]) -> dict[str, Any]:
    """Failing plan items in plan order, open warnings, plan changes and a plan error."""
    plan = data.plan_current or data.plan_baseline
    changes: list[dict[str, Any]] = []
    if data.plan_baseline is not None and data.plan_current is not None:
        diff = diff_plan(data.plan_baseline, data.plan_current)
        changes = [change.to_json() for change in diff.changed_items]
    return {
        "items_failing": [item.description for item in plan.items if not item.passes]
        if plan
        else [],
        "open_warnings": _open_warnings(data, events, bool(changes)),
        "plan_changes": changes,
        "plan_error": data.plan_error,
    }


def _incidents(data: ReportInput, events: list[Event]) -> dict[str, Any]:
    """Crashes (runs that ended badly without being asked to stop), restarts, rescues, resets."""
    asked_to_stop = {run.run for run in data.runs if run.stop_requested}
    crashes, rescued, resets = [], [], []
    for event in events:
        if event.kind == "run-exited":
            outcome = event.data.get("outcome")
            if outcome == "success" or event.run in asked_to_stop:
                continue
            crashes.append(
                {
                    "run": event.run,
                    "exit": event.data.get("exit_code"),
                    "signal": event.data.get("signal"),
                    "outcome": outcome,
                    "at": event.at,
                }
            )
        elif event.kind == "rescue-saved":
            rescued.append(
                {"ref": event.data.get("ref"), "sha": event.data.get("sha"), "run": event.run}
            )
        elif event.kind == "worktree-reset":
            resets.append({"sha": event.data.get("sha"), "run": event.run, "at": event.at})
    task_runs = [run for run in data.runs if data.handle and run.handle == data.handle]
    counted = task_runs or data.runs
    return {
        "crashes": crashes,
        "restarts": max(len(counted) - 1, 0),
        "rescued": rescued,
        "resets": resets,
    }


def _usage(runs: list[RunRecord]) -> dict[str, Any]:
    """Usage summed over runs (separate processes); cost None only if no run reported one."""
    total = Usage()
    for run in runs:
        total = total + Usage.from_json(run.usage)
    return total.to_json()


# ----- next steps --------------------------------------------------------------------------


def _quote(value: object, max_chars: int = MAX_STEP_TEXT) -> str:
    """Agent text fit to sit inside a next step: inert, one line, no backticks, short."""
    text = " ".join(inert(str(value)).split()).replace("`", "'")
    return text if len(text) <= max_chars else text[: max_chars - 1] + ELLIPSIS


def _short(sha: object) -> str:
    """An abbreviated sha for a sentence."""
    return _quote(sha, 40)[:7]


def _state_steps(report: dict[str, Any]) -> list[str]:
    """Steps that follow from the state itself: approval, crash loop, failure, budget, pause."""
    name, state, reason = report["session"], report["state"], report["reason"]
    crashes = report["incidents"]["crashes"]
    last_run = crashes[-1]["run"] if crashes else report["time"]["last_run"]
    logs = f"`herd logs {name} --run {last_run}`" if last_run else f"`herd logs {name}`"
    steps = []
    remains = report["remains"]
    tampered = any(warning["kind"] == "plan-tampered" for warning in remains["open_warnings"])
    if state == "waiting-approval" or remains["plan_changes"] or tampered:
        steps.append(
            "the plan was changed against its baseline: review the changes below, then "
            f"`herd approve {name}` to accept them or `herd reject {name}` to restore the plan"
        )
    if state == "failed" and reason == "crash-loop":
        steps.append(f"crash loop: look at the last run's output with {logs}")
    elif state == "failed":
        why = f" ({_quote(reason)})" if reason else ""
        steps.append(f"failed{why}: look at the last run's output with {logs}")
    if state == "stopped" and reason and reason.startswith("budget:"):
        dimension = _quote(reason.removeprefix("budget:"), 30)
        steps.append(
            f"stopped by the {dimension} budget: raise `budget.{dimension}` in herd.toml, "
            f"then `herd start {name}` to continue"
        )
    if state == "paused":
        steps.append(f"paused: `herd resume {name}` to continue")
    if state == "idle" and not report["time"]["runs"]:
        steps.append(f"never started: `herd start {name}`")
    return steps


def _work_steps(report: dict[str, Any]) -> list[str]:
    """Steps about the work: the plan file, the last checkpoint, rescued work, failing items."""
    name = report["session"]
    remains, passed = report["remains"], report["passed"]
    checkpoints = report["changed"]["checkpoints"]
    last = checkpoints[-1] if checkpoints else None
    steps = []
    if remains["plan_error"]:
        steps.append(
            f"the plan file is invalid ({_quote(remains['plan_error'])}): fix it; "
            "the last good plan counts until then"
        )
    if last is not None and last["verified"] is False:
        exit_code = (last["verification"] or {}).get("exit_code")
        how = f" (exit {exit_code})" if isinstance(exit_code, int) else ""
        steps.append(
            f"checkpoint {_short(last['sha'])} fails verification{how}: read the verify output "
            f"in `herd report {name}` and the run's output with `herd logs {name}`"
        )
    rescued = report["incidents"]["rescued"]
    if rescued:
        ref = _quote(rescued[-1]["ref"], 200)
        more = f" ({len(rescued) - 1} earlier rescues too)" if len(rescued) > 1 else ""
        steps.append(f"uncommitted work was rescued on {ref}{more}: inspect with `git show {ref}`")
    failing = remains["items_failing"]
    if failing:
        noun = "plan item still fails" if len(failing) == 1 else "plan items still fail"
        steps.append(f"{len(failing)} {noun}; next: {_quote(failing[0])}")
    elif passed["plan_total"]:
        steps.append(_all_passing_step(report["state"], last))
    return steps


def _all_passing_step(state: str, last: dict[str, Any] | None) -> str:
    """What to say when every plan item passes: done, or not yet proven by a checkpoint."""
    if last is None:
        return "every plan item passes, but no checkpoint was committed: commit the work"
    if last["verified"] is True:
        if state == "completed":
            return "completed: every plan item passes and the last checkpoint is verified"
        return f"every plan item passes and the last checkpoint is verified (still {state})"
    if last["verified"] is None:
        return f"every plan item passes, but checkpoint {_short(last['sha'])} is not verified"
    return "every plan item is marked passing, but the last checkpoint fails verification"


def _follow_steps(report: dict[str, Any], covered: bool) -> list[str]:
    """Steps for open warnings and for a task that runs on or was stopped."""
    name, state, handle = report["session"], report["state"], report["handle"]
    steps = []
    handled = {"plan-tampered", "plan-invalid"}
    warnings = [w for w in report["remains"]["open_warnings"] if w["kind"] not in handled]
    if warnings:
        kinds = ", ".join(dict.fromkeys(_quote(w["kind"], 40) for w in warnings))
        steps.append(f"{len(warnings)} open warnings ({kinds}): see `herd events --session {name}`")
    if state in ("starting", "running", "backoff", "stopping"):
        target = handle or name
        steps.append(f"still {state}: follow with `herd logs {name} -f` or `herd wait {target}`")
    elif state == "stopped" and not covered:
        steps.append(f"stopped: `herd start {name}` continues from the last checkpoint")
    return steps


def _next_steps(report: dict[str, Any]) -> list[str]:
    """Short imperative steps, most urgent first, derived from the rest of the report."""
    state_steps = _state_steps(report)
    steps = state_steps + _work_steps(report)
    steps += _follow_steps(report, covered=bool(state_steps))
    return steps


def build_report(data: ReportInput) -> dict[str, Any]:
    """Build the ``herd report --json`` object: stable keys, agent text as it was."""
    events = _task_events(data)
    changed = _changed(data)
    report: dict[str, Any] = {
        "session": data.session,
        "state": data.state,
        "reason": data.reason,
        "handle": data.handle,
        "generated_at": data.generated_at,
        "agent": data.agent,
        "cwd": data.cwd,
        "time": _time(data),
        "changed": changed,
        "passed": _passed(data, changed["checkpoints"]),
        "remains": _remains(data, events),
        "incidents": _incidents(data, events),
        "usage": _usage(data.runs),
        "progress": {"updated_at": data.progress_updated_at, "latest": list(data.progress_latest)},
    }
    report["next_steps"] = _next_steps(report)
    return report


# ----- markdown ----------------------------------------------------------------------------


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


def _money(usage: dict[str, Any]) -> str:
    """The cost as dollars, or a plain word when no run reported one."""
    cost = usage.get("cost_usd")
    if cost is None:
        return "cost unknown"
    estimated = " (estimated)" if usage.get("cost_estimated") else ""
    return f"${cost:,.2f}{estimated}"


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


def _summary(report: dict[str, Any]) -> str:
    """The one paragraph a person reads first."""
    passed, time = report["passed"], report["time"]
    parts = []
    if passed["plan_total"] is None:
        parts.append("no plan")
    else:
        parts.append(f"{passed['plan_passing']}/{passed['plan_total']} plan items pass")
    if report["remains"]["plan_error"]:
        parts[-1] += " (the plan file is invalid)"
    checkpoints = report["changed"]["checkpoints"]
    if checkpoints:
        last = checkpoints[-1]
        parts.append(
            f"last checkpoint {_code(_short(last['sha']))} '{_text(last['subject'], 60)}' "
            f"{_verdict(last['verified'])}"
        )
    else:
        parts.append("no checkpoint yet")
    if time["runs"]:
        wall = format_duration(time["wall_s"]) if time["wall_s"] is not None else "unknown time"
        spent = _money(report["usage"])
        spent = f"{spent} spent" if report["usage"]["cost_usd"] is not None else spent
        parts.append(f"{spent} over {wall} in {_plural(time['runs'], 'run')}")
    else:
        parts.append("never ran")
    crashes = len(report["incidents"]["crashes"])
    parts.append(_plural(crashes, "crash", "crashes") if crashes else "no crashes")
    return "; ".join(parts) + "."


def _md_changed(report: dict[str, Any]) -> list[str]:
    """The "What changed" section."""
    changed, progress = report["changed"], report["progress"]
    out = ["## What changed", ""]
    stat = changed["diffstat"]
    if stat is not None:
        out += [
            f"{_plural(stat['files'], 'file')} changed, {stat['insertions']} insertions(+), "
            f"{stat['deletions']} deletions(-).",
            "",
        ]
    checkpoints = changed["checkpoints"]
    if not checkpoints:
        out += ["No checkpoint was committed.", ""]
    else:
        out += ["Checkpoints, oldest first:", ""]
        for cp in checkpoints:
            files = f" ({_plural(len(cp['files']), 'file')})" if cp["files"] else ""
            out.append(
                f"- {_code(_short(cp['sha']))} {_text(cp['at'], 40)} {_text(cp['subject'])} "
                f"— {_verdict(cp['verified'])}{files}"
            )
        out.append("")
    touched = changed["files_touched"]
    if touched:
        lines = [f"- {_code(path)}" for path in touched]
        out += ["Files touched:", "", *_capped(lines), ""]
    if progress["latest"]:
        when = f" (updated {_text(progress['updated_at'], 40)})" if progress["updated_at"] else ""
        lines = [f"- {_text(entry, 400)}" for entry in progress["latest"]]
        out += [f"The agent's latest progress notes{when}:", "", *_capped(lines), ""]
    return out


def _md_passed(report: dict[str, Any]) -> list[str]:
    """The "What passed" section."""
    passed = report["passed"]
    out = ["## What passed", ""]
    if passed["plan_total"] is None:
        out += ["No plan was read.", ""]
    else:
        out += [f"{passed['plan_passing']} of {passed['plan_total']} plan items pass.", ""]
        lines = [f"- [x] {_text(item)}" for item in passed["items_passing"]]
        if lines:
            out += [*_capped(lines), ""]
    counts = passed["verifications"]
    out += [
        f"Checkpoint verifications: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['pending']} pending.",
        "",
    ]
    return out


def _md_remains(report: dict[str, Any]) -> list[str]:
    """The "What remains" section, with the verify output of the last failing checkpoint."""
    remains = report["remains"]
    out = ["## What remains", ""]
    failing = remains["items_failing"]
    if failing:
        out += ["Plan items still failing, in plan order:", ""]
        lines = [f"- [ ] {_text(item)}" for item in failing]
        out += [*_capped(lines), ""]
    elif report["passed"]["plan_total"]:
        out += ["Every plan item passes.", ""]
    if remains["plan_error"]:
        out += [f"The plan file is invalid: {_text(remains['plan_error'], 400)}", ""]
    if remains["plan_changes"]:
        out += ["Changes to the plan against its baseline:", ""]
        for change in remains["plan_changes"]:
            out.append(
                f"- {_text(change['change'], 20)} item \\[{change['index']}\\]: "
                f"{_text(change['description'])}"
            )
        out.append("")
    if remains["open_warnings"]:
        out += ["Open warnings:", ""]
        for warning in remains["open_warnings"]:
            times = f" ×{warning['count']}" if warning.get("count", 1) > 1 else ""
            out.append(
                f"- **{_text(warning['kind'], 40)}**{times} ({_text(warning['at'], 40)}): "
                f"{_text(warning['message'], 400)}"
            )
        out.append("")
    failed = [cp for cp in report["changed"]["checkpoints"] if cp["verified"] is False]
    tail = (failed[-1]["verification"] or {}).get("output_tail") if failed else None
    if tail:
        out += [f"Verify output of checkpoint {_code(_short(failed[-1]['sha']))}:", ""]
        out += [*_code_block(tail), ""]
    if len(out) == 2:
        out += ["Nothing known to remain.", ""]
    return out


def _md_incidents(report: dict[str, Any]) -> list[str]:
    """The "Incidents" section: crashes, restarts, rescued work, worktree resets."""
    incidents = report["incidents"]
    out = ["## Incidents", ""]
    lines = []
    for crash in incidents["crashes"]:
        how = _text(crash.get("outcome") or f"exit {crash['exit']}", 60)
        lines.append(f"- crash: run {crash['run']} ended ({how}) at {_text(crash['at'], 40)}")
    if incidents["restarts"]:
        lines.append(f"- {_plural(incidents['restarts'], 'restart')}")
    lines += [
        f"- run {rescue['run']}: uncommitted work rescued on {_code(rescue['ref'])} "
        f"({_code(_short(rescue['sha']))})"
        for rescue in incidents["rescued"]
    ]
    lines += [
        f"- run {reset['run']}: worktree reset to {_code(_short(reset['sha']))}"
        for reset in incidents["resets"]
    ]
    return out + (lines or ["None."]) + [""]


def _md_usage(report: dict[str, Any]) -> list[str]:
    """The "Usage and time" section."""
    usage, time = report["usage"], report["time"]
    wall = format_duration(time["wall_s"]) if time["wall_s"] is not None else "unknown"
    started = _text(time["started_at"], 40) if time["started_at"] else "never"
    return [
        "## Usage and time",
        "",
        f"- started: {started}",
        f"- wall time: {wall}; run time: {format_duration(time['run_s'])} "
        f"in {_plural(time['runs'], 'run')}",
        f"- cost: {_money(usage)}",
        f"- tokens: {usage['total_tokens']:,} (input {usage['input_tokens']:,}, "
        f"output {usage['output_tokens']:,}, cache read {usage['cache_read_tokens']:,}, "
        f"cache write {usage['cache_write_tokens']:,})",
        f"- turns: {usage['turns']:,}",
        f"- agent: {_text(report['agent'], 40)}; cwd: {_code(report['cwd'])}",
        "",
    ]


def render_markdown(report: dict[str, Any]) -> str:
    """Render a build_report object as a markdown document a person reads top to bottom."""
    title = f"# herd report: {_text(report['session'], 80)} — {_text(report['state'], 40)}"
    if report["reason"]:
        title += f" ({_text(report['reason'], 80)})"
    if report["handle"]:
        title += f" · {_code(report['handle'])}"
    steps = report["next_steps"]
    out = [title, "", f"_Generated {_text(report['generated_at'], 40)}._", ""]
    out += [_summary(report), ""]
    out += _md_changed(report) + _md_passed(report) + _md_remains(report)
    out += _md_incidents(report) + _md_usage(report)
    out += ["## Next steps", ""]
    out += [f"{number}. {_with_code(step)}" for number, step in enumerate(steps, 1)] or ["None."]
    return "\n".join(out) + "\n"
