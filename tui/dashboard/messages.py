"""Messages the dashboard's workers post to the app; the app is the only writer of widgets."""

from __future__ import annotations

from textual.message import Message

from agentherd.sessions.status import SessionStatus


class Snapshot(Message):
    """The daemon's latest view of every session; a newer one replaces one not yet handled."""

    def __init__(self, sessions: list[SessionStatus], changed: set[str] | None = None) -> None:
        super().__init__()
        self.sessions = sessions
        self.changed = changed
        """The sessions whose status changed since the last snapshot; None: maybe every one."""

    def can_replace(self, message: Message) -> bool:
        """Only the newest snapshot matters, so a queued one is dropped for it (the newer one
        takes over the names this one changed, so no row misses its update)."""
        if not isinstance(message, Snapshot):
            return False
        if self.changed is None or message.changed is None:
            message.changed = None
        else:
            message.changed = message.changed | self.changed
        return True


class DaemonLost(Message):
    """The snapshot stream broke or could not connect; the feed keeps retrying."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

    def can_replace(self, message: Message) -> bool:
        """Repeated failures while retrying say nothing new."""
        return isinstance(message, DaemonLost)


class Loaded(Message):
    """A read for the session screen finished: what (`report`, `events`, `progress`), for whom."""

    def __init__(self, session: str, what: str, value: object) -> None:
        super().__init__()
        self.session = session
        self.what = what
        self.value = value
