"""Chains across the fleet: when a task ends, every queued link looks at its `after` again."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from anyio.abc import TaskGroup

from agentherd.sessions.chain import Link
from agentherd.sessions.records import Event, SessionRecord
from agentherd.sessions.states import State

log = logging.getLogger("herd.chains")

TASK_END_KINDS = frozenset({"completed", "failed", "stopped"})
"""The event kinds that end a task (lifecycle.task_end_kind): a link may move on at each."""


class Queued(Protocol):
    """A session as the chains see it: where it stands, and how it takes its turn."""

    record: SessionRecord
    restarting: bool
    """A restart is under way: the task it ended is followed by a new one."""

    async def advance_chain(self) -> None:
        """Look at the `after` sessions again: start, keep waiting, or end (never runs)."""
        ...


class ChainKeeper:
    """Tells queued links to look again when a task ends (or the daemon starts, or herd.toml
    is read again); each link decides for itself, under its own lock, what that means."""

    def __init__(self, sessions: Mapping[str, Queued], task_group: TaskGroup) -> None:
        self.sessions = sessions
        self.tg = task_group
        self._scheduled = False

    def links(self, names: Sequence[str]) -> dict[str, Link]:
        """Where each named session stands now (a name not in the fleet is left out); one
        being restarted is starting, not the stopped task its restart just ended."""
        found = {name: self.sessions.get(name) for name in names}
        return {
            name: Link(State.STARTING)
            if session.restarting
            else Link(session.record.state, session.record.reason)
            for name, session in found.items()
            if session is not None
        }

    def saw(self, events: Iterable[Event]) -> None:
        """Events were written: a task that ended may let a link go (or end it)."""
        if any(e.session is not None and e.kind in TASK_END_KINDS for e in events):
            self.advance_all()

    def advance_all(self) -> None:
        """Have every queued link look again, soon (once, however many ends came meanwhile)."""
        if not self._scheduled:
            self._scheduled = True
            self.tg.start_soon(self._advance)

    async def _advance(self) -> None:
        # One after another: two links of one worktree let go together must see each other's
        # start, so the second waits for the worktree instead of starting beside the first.
        self._scheduled = False
        for session in list(self.sessions.values()):
            if session.record.state != State.QUEUED:
                continue
            try:
                await session.advance_chain()
            except Exception:  # one link's bug must not take the daemon (or the others) down
                log.exception("%s: moving the queued task on failed", session.record.name)
