"""What the parts of a session supervisor share: its attributes and the methods they call.

`SessionSupervisor` (session.py: commands and transitions) is assembled from parts that
each own one seam: following a run (following.py), launching and restarting (launching.py)
and adoption after a daemon restart (adoption.py). This base only declares; session.py
sets every attribute and each part defines its own methods.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.adapters import Usage
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.drift import StallClock
from agentherd.sessions.lifecycle import Decision, Trigger
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import Event, RunRecord, SessionRecord, TaskRecord
from agentherd.sessions.states import State
from agentherd.supervisor.files.store import Verification
from agentherd.supervisor.git import gitops
from agentherd.supervisor.process import runid
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.liverun import LiveRun

if TYPE_CHECKING:
    from agentherd.sessions.checkpoint import Checkpoint
    from agentherd.supervisor.checks.observe import Observer
    from agentherd.supervisor.session.spend import SessionSpend, SpendInputs


class SessionParts:
    """Declarations only: the state every part reads and the methods parts call on each other."""

    config: SessionConfig
    record: SessionRecord
    ctx: Context
    run: LiveRun | None
    warnings: WarningBook
    observer: Observer
    stall: StallClock
    task_usage: Usage
    spend: SessionSpend
    older_logs_bytes: int
    version: int
    output_version: int
    preparing: gitops.GitDeadline | None
    git_warned: bool
    _lock: anyio.Lock
    _pending_restart: anyio.CancelScope | None

    # session.py: records and transitions
    def _event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        raise NotImplementedError

    def _commit(
        self,
        *events: Event,
        run: RunRecord | None = None,
        task: TaskRecord | None = None,
        checkpoint: Checkpoint | None = None,
        verification: Verification | None = None,
    ) -> list[Event]:
        raise NotImplementedError

    def _transition(
        self,
        to_state: State,
        reason: str | None,
        *events: Event,
        by: Trigger,
        run: RunRecord | None = None,
        task: TaskRecord | None = None,
    ) -> None:
        raise NotImplementedError

    def _end_task(
        self, state: State, reason: str | None, message: str, by: Trigger, *before: Event
    ) -> None:
        raise NotImplementedError

    def _task(self) -> TaskRecord | None:
        raise NotImplementedError

    def _cancel_pending_restart(self) -> None:
        raise NotImplementedError

    def on_file_change(self, kind: str) -> None:
        raise NotImplementedError

    async def stop(self, kill: bool = False, reason: str = "user") -> None:
        raise NotImplementedError

    async def _stop_locked(self, kill: bool, reason: str, end_task: bool = True) -> bool:
        raise NotImplementedError

    def make_event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        raise NotImplementedError

    def spend_inputs(self) -> SpendInputs:
        raise NotImplementedError

    # drifting.py
    def close_warning(self, kind: str, why: str, by: str) -> None:
        raise NotImplementedError

    def drift_restart_of(self, run: int) -> str | None:
        raise NotImplementedError

    def resume_drift_restart(self, record: RunRecord) -> None:
        raise NotImplementedError

    def crash_events(self, run: int, outcome: str, last_line: str) -> list[Event]:
        raise NotImplementedError

    # following.py
    def _watch(self, live: LiveRun) -> None:
        raise NotImplementedError

    def _read_output(self, live: LiveRun) -> None:
        raise NotImplementedError

    def _take_line(self, live: LiveRun, *lines: bytes) -> bool:
        raise NotImplementedError

    async def _record_exit(self, live: LiveRun) -> None:
        raise NotImplementedError

    def check_log_cap(self) -> None:
        raise NotImplementedError

    @property
    def _runs_folder(self) -> Path:
        raise NotImplementedError

    # launching.py
    async def _launch(
        self, mode: str, env_extra: dict[str, str], by: Trigger | None = None
    ) -> None:
        raise NotImplementedError

    async def _after_exit(self, live: LiveRun) -> None:
        raise NotImplementedError

    def _schedule_restart(
        self, live: LiveRun, decision: Decision, *before: Event, by: Trigger | None = None
    ) -> None:
        raise NotImplementedError

    def _arm_restart(
        self,
        delay_s: float,
        crashed: bool,
        last_run: int,
        last_exit: runid.ExitInfo | None,
        run_config: SessionConfig,
        mode: str = "command",
    ) -> None:
        raise NotImplementedError

    async def _prepare_restart(
        self, target: str | None, last_run: int, run_config: SessionConfig
    ) -> tuple[dict[str, str], str] | None:
        raise NotImplementedError

    @staticmethod
    def _identity_of(record: RunRecord) -> runid.RunIdentity:
        raise NotImplementedError

    # adoption.py
    def _config_of(self, record: RunRecord | None) -> SessionConfig:
        raise NotImplementedError
