"""How a session's parts have a change written: through the session's one commit.

The parts (follower, launcher, restarts, completer, adopter, drift, holder, desk) never hold
the session; they get this bundle: its record and lock, its writing methods and a way to read
its config. `SessionSupervisor` alone implements the methods: it is the only writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.records import Event, RunRecord, SessionRecord, TaskRecord
from agentherd.sessions.states import State
from agentherd.supervisor.files.store import Verification


class MakeEvent(Protocol):
    """An event of the session (`run` names the run it is about)."""

    def __call__(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event: ...


class Commit(Protocol):
    """Write the session record with events (and a run or task record) in one transaction."""

    def __call__(
        self,
        *events: Event,
        run: RunRecord | None = None,
        task: TaskRecord | None = None,
        checkpoint: Checkpoint | None = None,
        verification: Verification | None = None,
    ) -> list[Event]: ...


class Transition(Protocol):
    """Move to `to_state` if the lifecycle table allows it, committed with its events."""

    def __call__(
        self,
        to_state: State,
        reason: str | None,
        *events: Event,
        by: Trigger,
        run: RunRecord | None = None,
        task: TaskRecord | None = None,
    ) -> None: ...


class EndTask(Protocol):
    """Record how the current task ended, with its event, in one transaction."""

    def __call__(
        self, state: State, reason: str | None, message: str, by: Trigger, *before: Event
    ) -> None: ...


@dataclass(frozen=True)
class Pen:
    """The session's record, its lock, and its writing methods, as its parts may use them."""

    record: SessionRecord
    """The session's lasting state: set a field, then commit it (never store it elsewhere)."""
    lock: anyio.Lock
    """The session's lock: a part that changes the state from a task of its own holds it."""
    event: MakeEvent
    commit: Commit
    transition: Transition
    end_task: EndTask
    touch: Callable[[bool], None]
    """Something visible changed that needs no event (True: output was read)."""
    config: Callable[[], SessionConfig]
    """The session's config as it is now (a reload replaces it)."""
