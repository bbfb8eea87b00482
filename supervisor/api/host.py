"""What the control API needs of the daemon that serves it: the daemon's narrow face."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from agentherd.sessions.config import HerdConfig
from agentherd.sessions.records import Event
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.session import fleetstart
from agentherd.supervisor.session.context import Context, Timings
from agentherd.supervisor.session.supervisor import SessionSupervisor


class Host(Protocol):
    """What the control API needs of the daemon that serves it (supervisor/daemon.py)."""

    @property
    def sessions(self) -> Mapping[str, SessionSupervisor]:
        """The fleet's sessions by name, in herd.toml's order."""
        ...

    @property
    def store(self) -> Store | None:
        """The state store (None before the daemon serves)."""
        ...

    @property
    def ctx(self) -> Context | None:
        """What the sessions share (None before the daemon serves)."""
        ...

    @property
    def changed(self) -> anyio.Event:
        """Set at the next event written."""
        ...

    @property
    def reconciled(self) -> anyio.Event:
        """Set once every session has reconciled its stored state with what still runs."""
        ...

    @property
    def fleet_starts(self) -> fleetstart.InFlight:
        """`herd up`s under way."""
        ...

    @property
    def task_group(self) -> TaskGroup | None:
        """The daemon's task group, for work that outlives a request."""
        ...

    @property
    def timings(self) -> Timings: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def config(self) -> HerdConfig: ...

    @property
    def started_at(self) -> str | None: ...

    @property
    def reconcile_passes(self) -> int: ...

    async def run_logged(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run background work whose failure is logged."""
        ...

    async def reload(self) -> dict[str, list[str]]:
        """Read herd.toml again."""
        ...

    def commit_daemon_event(self, kind: str, message: str) -> None:
        """Write a daemon event (no session) and announce it."""
        ...

    def commit_event(self, event: Event) -> None:
        """Write an event that changes no session's state, and announce it."""
        ...

    def request_shutdown(self) -> None:
        """Leave the serve loop; agents keep running."""
        ...
