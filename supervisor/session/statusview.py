"""A live session's `herd status --json` object: its parts' facts, built by sessions/."""

from __future__ import annotations

from typing import Any

from agentherd.sessions import status_builder
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.spending import SpendFacts
from agentherd.sessions.status import LogsStatus, SessionStatus
from agentherd.sessions.status_builder import StatusFacts
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.session.liverun import LiveRun


def live_status(
    config: SessionConfig,
    record: SessionRecord,
    live: LiveRun | None,
    last_run: RunRecord | None,
    observer: Observer,
    warnings: WarningBook,
    spend: SpendFacts,
    fleet: dict[str, Any] | None,
    log_bytes: int,
) -> SessionStatus:
    """The status of a session: `live` is its watched run, else `last_run` its stored one."""
    run = live.record if live is not None else last_run
    observed = observer.status_fields()
    plan_diff = observer.plan_diff
    return status_builder.build(
        StatusFacts(
            name=config.name,
            agent=config.agent,
            record=record,
            run=run,
            alive=live is not None and not live.exited.is_set(),
            spend=spend,
            warnings=warnings.open(),
            plan=observed["plan"],
            plan_error=observer.plan_error is not None,
            plan_tampered=bool(plan_diff.changed_items) if plan_diff is not None else None,
            progress=observed["progress"],
            checkpoint=observed["checkpoint"],
            git_note=observed["git_note"],
            last_line=live.last_line if live is not None else run.last_line if run else "",
            logs=LogsStatus(bytes=log_bytes, cap_bytes=config.log_max_bytes),
            fleet=fleet,
        )
    )
