"""The one status builder: facts in, `herd status --json` out.

The live daemon, the offline reader (`.herd/` with no daemon) and the cluster view each gather
what they know of a session (records, usage, budgets, open warnings, plan and progress) and
build its status here, so the same records give the same status whoever reads them: before
and after `herd down`, on this machine or across hosts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentherd.sessions import open_warnings
from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.budget import budget_json, project
from agentherd.sessions.config import Budget
from agentherd.sessions.open_warnings import WarningRecord
from agentherd.sessions.records import RunRecord, SessionRecord, TaskRecord
from agentherd.sessions.spending import (
    FleetMember,
    SpendFacts,
    counted,
    fleet_counted,
    spends,
)
from agentherd.sessions.states import ACTIVE_STATES, State, task_state
from agentherd.sessions.status import (
    CheckpointStatus,
    LogsStatus,
    PlanStatus,
    ProgressStatus,
    SessionStatus,
    TaskStatus,
    UsageStatus,
    WarningStatus,
)
from agentherd.sessions.times import iso


@dataclass(frozen=True, slots=True)
class StatusFacts:
    """Everything one session's status is built from."""

    name: str
    agent: str
    record: SessionRecord
    run: RunRecord | None
    """The current run's record, live or stored."""
    alive: bool
    """Its process runs now (its pid is shown)."""
    spend: SpendFacts
    warnings: Iterable[WarningRecord]
    """The open warning records (acknowledged ones and plan ones no longer true are dropped)."""
    plan: PlanStatus | None = None
    plan_error: bool = False
    """The plan file cannot be read now."""
    plan_tampered: bool | None = None
    """The plan differs from its baseline (None: no plan known to compare)."""
    progress: ProgressStatus | None = None
    checkpoint: CheckpointStatus | None = None
    git_note: str | None = None
    last_line: str = ""
    logs: LogsStatus | None = None
    fleet: dict[str, Any] | None = None
    account: str | None = None
    """The session's provider account (sessions/accounts.py)."""
    limit_wait: dict[str, Any] | None = None
    """The live run's agent retrying a rate limit by itself (LimitWait.to_json())."""
    archived: bool = False


def limit_json(facts: StatusFacts) -> dict[str, Any] | None:
    """The status's `limit`: parked on a rate limit by herd, or the agent retrying one."""
    record = facts.record
    if record.state == State.BACKOFF and record.reason == "rate-limit":
        parked = record.limit or {}
        return {
            "waiting": "herd",
            "account": parked.get("account") or facts.account,
            "since": facts.run.ended_at if facts.run is not None else None,
            "until": record.backoff_until,
            "resets_at": parked.get("resets_at"),
            "delay_source": parked.get("delay_source") or "guess",
            "attempt": None,
        }
    if facts.limit_wait is not None and facts.alive:
        wait = facts.limit_wait
        return {
            "waiting": "agent",
            "account": facts.account,
            "since": wait.get("since"),
            "until": wait.get("retry_at"),
            "resets_at": wait.get("retry_at"),
            "delay_source": "agent",
            "attempt": wait.get("attempt"),
        }
    return None


def message_json(record: SessionRecord) -> dict[str, Any] | None:
    """The status's `message_waiting`: what a sent text is, not its words (they can be long)."""
    message = record.pending_message
    if message is None:
        return None
    return {
        "id": message.id,
        "at": message.at,
        "origin": message.origin,
        "chars": len(message.text),
    }


def build(facts: StatusFacts) -> SessionStatus:
    """The session's `herd status --json` object."""
    record, run = facts.record, facts.run
    return SessionStatus(
        session=facts.name,
        handle=record.handle,
        run=record.run or None,
        state=record.state,
        task_state=task_state(record.state),
        reason=record.reason,
        pid=run.pid if run is not None and facts.alive else None,
        exit_code=run.exit_code if run is not None else None,
        signal=run.signal if run is not None else None,
        restarts=record.restarts,
        started_at=run.started_at if run is not None else None,
        ended_at=run.ended_at if run is not None else None,
        agent_session_id=record.agent_session_id,
        plan=facts.plan,
        progress=facts.progress,
        checkpoint=facts.checkpoint,
        git_note=facts.git_note,
        **spend_fields(record, facts.spend),
        fleet=facts.fleet,
        logs=facts.logs,
        warnings=warning_statuses(facts.warnings, facts.plan_error, facts.plan_tampered),
        last_line=facts.last_line,
        agent=facts.agent,
        next_restart_at=record.backoff_until if record.state == State.BACKOFF else None,
        message_waiting=message_json(record),
        limit=limit_json(facts),
        archived=facts.archived,
    )


def spend_fields(record: SessionRecord, facts: SpendFacts) -> dict[str, Any]:
    """`usage` (the task's), `usage_total` (the life's) and `budget` of the status."""
    task, life = spends(record, facts)
    budget = facts.budget
    chosen = counted(budget, task, life)
    projection = None
    if record.state in ACTIVE_STATES:
        found = project(
            budget, list(facts.samples), facts.clock_s, chosen, facts.plan_passing, facts.plan_total
        )
        if found is not None:
            projection = found.to_json(facts.now_unix_s, _iso_of_unix)
    ran = bool(record.run)
    return {
        "usage": UsageStatus(**task.usage.to_json()) if ran else None,
        "usage_total": UsageStatus(**life.usage.to_json()) if ran else None,
        "budget": budget_json(budget, chosen, projection, budget.covers),
    }


def _iso_of_unix(unix_s: float) -> str | None:
    return iso(datetime.fromtimestamp(unix_s, UTC))


def warning_statuses(
    records: Iterable[WarningRecord], plan_error: bool, plan_tampered: bool | None
) -> list[WarningStatus]:
    """The open warnings a person sees: latest event, since when, how often."""
    return [
        WarningStatus(
            seq=w.last_seq,
            kind=w.kind,
            message=w.message,
            at=w.last_at,
            count=w.count,
            opened_seq=w.opened_seq,
            opened_at=w.opened_at,
        )
        for w in open_warnings.shown(records, plan_error=plan_error, plan_tampered=plan_tampered)
    ]


def task_status(session: str, handle: str, task: TaskRecord) -> TaskStatus:
    """An earlier task's status by its handle (`api/3`), the same live and offline."""
    return TaskStatus(
        session=session,
        handle=handle,
        run=task.first_run,
        state=task.state,
        task_state=task_state(task.state),
        reason=task.reason,
        started_at=task.started_at,
        ended_at=task.ended_at,
    )


def fleet_json(budget: Budget, members: Sequence[FleetMember]) -> dict[str, Any]:
    """The status's `fleet` object: every session's task and life summed, against its budget."""
    task_usage, life_usage = Usage(), Usage()
    for member in members:
        task_usage = task_usage + member.task.usage
        life_usage = life_usage + member.life.usage
    return {
        "usage": UsageStatus(**task_usage.to_json()).to_json(),
        "usage_total": UsageStatus(**life_usage.to_json()).to_json(),
        "budget": budget_json(budget, fleet_counted(budget, members), None, budget.covers),
    }


def on_host(status: dict[str, Any], host: str) -> SessionStatus:
    """A status a host's daemon built (its `ls` row, a command's reply), naming that host."""
    return SessionStatus.model_validate({**status, "host": host})


def never_seen(name: str) -> SessionStatus:
    """A session nothing has shown yet (no host published it): idle, never run."""
    return SessionStatus(session=name)


def across_hosts(status: SessionStatus, host_alive: bool) -> SessionStatus:
    """A host's status of a session as a viewer of every host shows it: no host for one that
    never ran; reason `host-lost` while its host's lease has lapsed with the session active."""
    if status.started_at is None and status.handle is None:
        return status.model_copy(update={"host": None})
    if not host_alive and status.state in ACTIVE_STATES:
        return status.model_copy(update={"reason": "host-lost"})
    return status
