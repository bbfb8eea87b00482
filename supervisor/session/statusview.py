"""A live session's `herd status --json` object, from the parts that know each field."""

from __future__ import annotations

from typing import Any

from agentherd.sessions import open_warnings
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.states import State, task_state
from agentherd.sessions.status import LogsStatus, SessionStatus, WarningStatus
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.session.liverun import LiveRun


def live_status(
    config: SessionConfig,
    record: SessionRecord,
    live: LiveRun | None,
    last_run: RunRecord | None,
    observer: Observer,
    warnings: WarningBook,
    spent: dict[str, Any],
    fleet: dict[str, Any] | None,
    log_bytes: int,
) -> SessionStatus:
    """The status of a session: `live` is its watched run, else `last_run` its stored one."""
    run = live.record if live is not None else last_run
    alive = live is not None and not live.exited.is_set()
    observed = observer.status_fields()
    plan_diff = observer.plan_diff
    shown = open_warnings.shown(
        warnings.open(),
        plan_error=observer.plan_error is not None,
        plan_tampered=bool(plan_diff.changed_items) if plan_diff is not None else None,
    )
    last_line = live.last_line if live is not None else run.last_line if run else ""
    return SessionStatus(
        session=config.name,
        handle=record.handle,
        run=record.run or None,
        state=record.state,
        task_state=task_state(record.state),
        reason=record.reason,
        pid=run.pid if run is not None and alive else None,
        exit_code=run.exit_code if run is not None else None,
        signal=run.signal if run is not None else None,
        restarts=record.restarts,
        started_at=run.started_at if run is not None else None,
        ended_at=run.ended_at if run is not None else None,
        agent_session_id=record.agent_session_id,
        plan=observed["plan"],
        progress=observed["progress"],
        checkpoint=observed["checkpoint"],
        git_note=observed["git_note"],
        usage=spent["usage"],
        budget=spent["budget"],
        usage_total=spent["usage_total"],
        fleet=fleet,
        logs=LogsStatus(bytes=log_bytes, cap_bytes=config.log_max_bytes),
        warnings=[
            WarningStatus(
                seq=w.last_seq,
                kind=w.kind,
                message=w.message,
                at=w.last_at,
                count=w.count,
                opened_seq=w.opened_seq,
                opened_at=w.opened_at,
            )
            for w in shown
        ],
        last_line=last_line,
        agent=config.agent,
        next_restart_at=record.backoff_until if record.state == State.BACKOFF else None,
    )
