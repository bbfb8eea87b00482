"""The report's facts, read from a ReportInput in one pass over its events (linear in them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.open_warnings import CLOSED_BY, CLOSED_EVENT
from agentherd.sessions.plan import diff_plan
from agentherd.sessions.records import WARNING_KINDS, Event
from agentherd.sessions.report.models import (
    Changed,
    CheckpointFacts,
    Crash,
    Diffstat,
    Incidents,
    OpenWarning,
    Passed,
    ProgressFacts,
    Remains,
    ReportInput,
    Rescue,
    Reset,
    TimeFacts,
    UsageTotals,
    VerificationCounts,
    VerificationFacts,
)
from agentherd.sessions.times import iso_seconds, parse_iso

RESOLVED_BY = CLOSED_BY
"""A warning is no longer open once a later event of one of these kinds arrived (the same
rule the status's warning records follow)."""

TERMINAL = frozenset({"stopped", "completed", "failed"})
"""States in which the task has ended, so its wall time ends with its last run."""

MAX_TAIL_CHARS = 4000
"""Verify output kept per checkpoint: the end of a test run, where the failures are."""

_VERIFY_KEYS = ("passed", "exit_code", "timed_out", "duration_s", "started_at", "error")


@dataclass
class EventFacts:
    """The current task's events in order, and the incidents among them."""

    events: list[Event] = field(default_factory=list)
    crashes: list[Crash] = field(default_factory=list)
    rescued: list[Rescue] = field(default_factory=list)
    resets: list[Reset] = field(default_factory=list)


def read_events(data: ReportInput) -> EventFacts:
    """Keep the current task's events and sort out its incidents, visiting each event once."""
    start = parse_iso(data.task_started_at)
    asked_to_stop = {run.run for run in data.runs if run.stop_requested}
    facts = EventFacts()
    for event in data.events:
        if start is not None:
            moment = parse_iso(event.at)
            if moment is not None and moment < start:
                continue
        facts.events.append(event)
        kind = event.kind
        if kind == "run-exited":
            outcome = event.data.get("outcome")
            if outcome != "success" and event.run not in asked_to_stop:
                facts.crashes.append(
                    Crash(
                        run=event.run,
                        exit=event.data.get("exit_code"),
                        signal=event.data.get("signal"),
                        outcome=outcome,
                        at=event.at,
                    )
                )
        elif kind == "rescue-saved":
            facts.rescued.append(
                Rescue(ref=event.data.get("ref"), sha=event.data.get("sha"), run=event.run)
            )
        elif kind == "worktree-reset":
            facts.resets.append(Reset(sha=event.data.get("sha"), run=event.run, at=event.at))
    return facts


def open_warnings(data: ReportInput, events: list[Event], tampered: bool) -> list[OpenWarning]:
    """The task's warnings still open: the latest of each kind, with how often it came.

    A warning is closed by a later event of a kind in RESOLVED_BY. Once one is closed, every
    earlier warning of its kind is too, so one walk from the end finds the open ones: each
    kind's open warnings are those after its last closed one.
    """
    kinds_after: set[str] = set()
    closed: set[str] = set()
    newest: dict[str, Event] = {}
    counts: dict[str, int] = {}
    oldest_at: dict[str, int] = {}
    for position in range(len(events) - 1, -1, -1):
        event = events[position]
        kind = event.kind
        if kind in WARNING_KINDS and kind not in closed:
            if RESOLVED_BY.get(kind, frozenset()) & kinds_after or f"closed:{kind}" in kinds_after:
                closed.add(kind)
            else:
                newest.setdefault(kind, event)
                counts[kind] = counts.get(kind, 0) + 1
                oldest_at[kind] = position
        kinds_after.add(kind)
        if kind == CLOSED_EVENT:  # names the warning whose cause is gone
            kinds_after.add(f"closed:{event.data.get('kind')}")
    if data.plan_error is None:
        newest.pop("plan-invalid", None)
    if not tampered and data.plan_baseline is not None and data.plan_current is not None:
        newest.pop("plan-tampered", None)
    # Ties in time keep the order in which each kind's open warnings began.
    kinds = sorted(newest, key=lambda kind: (str(newest[kind].at), oldest_at[kind]))
    return [
        OpenWarning(kind=kind, message=newest[kind].message, at=newest[kind].at, count=counts[kind])
        for kind in kinds
    ]


def time_facts(data: ReportInput) -> TimeFacts:
    """When the task started, how long it has lasted, and how long its runs ran."""
    now = parse_iso(data.generated_at) or datetime.now(UTC)
    starts = [t for t in (parse_iso(run.started_at) for run in data.runs) if t is not None]
    started = parse_iso(data.task_started_at) or (min(starts) if starts else None)
    run_s = 0.0
    ends: list[datetime] = []
    for run in data.runs:
        begin = parse_iso(run.started_at)
        end = parse_iso(run.ended_at)
        if end is not None:
            ends.append(end)
        if begin is not None:
            run_s += max(((end or now) - begin).total_seconds(), 0.0)
    wall_s = None
    if started is not None:
        finish = max(ends) if data.state in TERMINAL and ends else now
        wall_s = round(max((finish - started).total_seconds(), 0.0), 1)
    return TimeFacts(
        started_at=iso_seconds(started) if started else None,
        wall_s=wall_s,
        runs=len(data.runs),
        last_run=max((run.run for run in data.runs), default=None),
        run_s=round(run_s, 1),
    )


def _verification(result: dict[str, Any] | None) -> VerificationFacts | None:
    """The verification result of one checkpoint, with its output tail cut to the end."""
    if not isinstance(result, dict):
        return None
    tail = result.get("output_tail")
    return VerificationFacts(
        **{key: result.get(key) for key in _VERIFY_KEYS},
        output_tail=tail[-MAX_TAIL_CHARS:] if isinstance(tail, str) else None,
    )


def _verified(checkpoint: Checkpoint, result: dict[str, Any] | None) -> bool | None:
    """The checkpoint's own verdict, else the verification result's, else None (pending)."""
    if checkpoint.verified is not None:
        return checkpoint.verified
    passed = result.get("passed") if isinstance(result, dict) else None
    return passed if isinstance(passed, bool) else None


def changed_facts(data: ReportInput) -> Changed:
    """Checkpoints (oldest first), the diffstat and the files touched."""
    checkpoints = []
    for checkpoint in data.checkpoints:
        result = data.verifications.get(checkpoint.sha)
        checkpoints.append(
            CheckpointFacts(
                sha=checkpoint.sha,
                at=iso_seconds(checkpoint.at),
                subject=checkpoint.subject,
                verified=_verified(checkpoint, result),
                files=list(checkpoint.files),
                insertions=checkpoint.insertions,
                deletions=checkpoint.deletions,
                verification=_verification(result),
            )
        )
    diffstat = None
    if data.diffstat is not None:
        files, insertions, deletions = data.diffstat
        diffstat = Diffstat(files=files, insertions=insertions, deletions=deletions)
    return Changed(
        checkpoints=checkpoints,
        diffstat=diffstat,
        files_touched=list(data.files_touched),
        current_sha=standing_sha(data.events, data.checkpoints),
    )


def standing_sha(events: list[Event], checkpoints: list[Checkpoint]) -> str | None:
    """The commit the worktree stands on: that of the newest checkpoint or worktree reset
    among the session's events (a restart from an earlier checkpoint moves it back, and
    records no checkpoint) unless a checkpoint was committed after that reset, else the
    newest checkpoint's."""
    newest = checkpoints[-1] if checkpoints else None
    for event in reversed(events):
        if event.kind in ("checkpoint", "worktree-reset"):
            sha = event.data.get("sha")
            if not isinstance(sha, str) or not sha:
                continue
            reset_at = parse_iso(event.at) if event.kind == "worktree-reset" else None
            if newest is not None and reset_at is not None and newest.at > reset_at:
                return newest.sha  # committed after the reset (its event was not read)
            return sha
    return newest.sha if newest else None


def passed_facts(data: ReportInput, checkpoints: list[CheckpointFacts]) -> Passed:
    """Plan items passing now, and how the checkpoints' verifications came out."""
    plan = data.plan_current or data.plan_baseline
    verdicts = [checkpoint.verified for checkpoint in checkpoints]
    return Passed(
        plan_passing=plan.passing if plan else None,
        plan_total=plan.total if plan else None,
        items_passing=[item.description for item in plan.items if item.passes] if plan else [],
        verifications=VerificationCounts(
            passed=verdicts.count(True),
            failed=verdicts.count(False),
            pending=sum(1 for verdict in verdicts if verdict is None),
        ),
    )


def remains_facts(data: ReportInput, events: list[Event]) -> Remains:
    """Failing plan items in plan order, open warnings, plan changes and a plan error."""
    plan = data.plan_current or data.plan_baseline
    changes: list[dict[str, Any]] = []
    if data.plan_baseline is not None and data.plan_current is not None:
        diff = diff_plan(data.plan_baseline, data.plan_current)
        changes = [change.to_json() for change in diff.changed_items]
    return Remains(
        items_failing=[item.description for item in plan.items if not item.passes] if plan else [],
        open_warnings=open_warnings(data, events, bool(changes)),
        plan_changes=changes,
        plan_error=data.plan_error,
    )


def incidents_facts(data: ReportInput, facts: EventFacts) -> Incidents:
    """Crashes (runs that ended badly without being asked to stop), restarts, rescues, resets."""
    task_runs = [run for run in data.runs if data.handle and run.handle == data.handle]
    counted = task_runs or data.runs
    return Incidents(
        crashes=facts.crashes,
        restarts=max(len(counted) - 1, 0),
        rescued=facts.rescued,
        resets=facts.resets,
    )


def usage_facts(data: ReportInput) -> UsageTotals:
    """Usage summed over runs (separate processes); cost None only if no run reported one."""
    total = Usage()
    for run in data.runs:
        total = total + Usage.from_json(run.usage)
    return UsageTotals(**total.to_json())


def progress_facts(data: ReportInput) -> ProgressFacts:
    """The agent's latest progress notes."""
    return ProgressFacts(updated_at=data.progress_updated_at, latest=list(data.progress_latest))
