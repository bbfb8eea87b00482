"""A live session's `herd status --json` object: its parts' facts, built by sessions/."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agentherd.sessions import status_builder
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.spending import SpendFacts
from agentherd.sessions.status import LogsStatus, SessionStatus
from agentherd.sessions.status_builder import StatusFacts
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.follower import Follower
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.spend import SessionSpend, SpendInputs


class StatusView:
    """Gathers a live session's status from the parts that know each fact; writes nothing."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        follower: Follower,
        spend: SessionSpend,
        spend_inputs: Callable[[], SpendInputs],
        observer: Observer,
        warnings: WarningBook,
    ) -> None:
        self.ctx = ctx
        self.pen = pen
        self.follower = follower
        self.spend = spend
        self.spend_inputs = spend_inputs
        self.observer = observer
        self.warnings = warnings

    def status(self, with_fleet: bool = True) -> SessionStatus:
        """`herd status --json` of the session (no `fleet` without `with_fleet`: sent once)."""
        config, run = self.pen.config(), self.follower.run
        spent = self.spend.facts(self.spend_inputs(), time.time(), projecting=True)
        last = self.follower.last_run_record() if run is None else None
        fleet = self.ctx.fleet_spend() if with_fleet else None
        view = (self.observer, self.warnings, spent, fleet, self.follower.log_bytes())
        account = self.ctx.limits.account(config)
        return live_status(config, self.pen.record, run, last, *view, account)


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
    account: str | None = None,
) -> SessionStatus:
    """The status of a session: `live` is its watched run, else `last_run` its stored one."""
    run = live.record if live is not None else last_run
    observed = observer.status_fields()
    plan_diff = observer.plan_diff
    return status_builder.build(
        StatusFacts(
            name=config.name,
            agent=config.agent,
            archived=config.archived,
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
            account=account,
            limit_wait=live.parser.limit_wait.to_json()
            if live is not None and live.parser.limit_wait is not None
            else None,
        )
    )
