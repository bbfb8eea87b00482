"""Events just written, told to the daemon's log and to every client waiting for a change."""

from __future__ import annotations

import logging

import anyio

from agentherd.sessions.records import Event

log = logging.getLogger("herd.daemon")


class News:
    """Announces written events: each to the log, and a change to everyone waiting."""

    def __init__(self) -> None:
        self.changed = anyio.Event()
        """Set (and replaced) at each announcement: `wait` and `events --follow` wait on it."""

    def announce(self, events: list[Event]) -> None:
        """Tell the log and every waiting client that these events were written."""
        for event in events:
            log.info("%s %s: %s", event.session or "-", event.kind, event.message)
        self.changed.set()
        self.changed = anyio.Event()
