"""Every session's newest status, kept from the messages of one `subscribe` with `changes`
(supervisor/api/statusfeed.py): shared by the dashboard's feed and the web view (tui/web/)."""

from __future__ import annotations

from typing import Any

from agentherd.sessions.status import SessionStatus, parse_reply


class Resync(Exception):
    """A change message did not follow the one before it: subscribe again for a full snapshot."""


class FleetMirror:
    """Every session's newest status, as the messages of one subscription describe it."""

    def __init__(self) -> None:
        self.statuses: dict[str, SessionStatus] = {}
        """In herd.toml's order, as the daemon sends them."""
        self.seq: int | None = None
        self.fleet: dict[str, Any] | None = None

    def apply(self, message: dict[str, Any]) -> set[str] | None:
        """Take one streamed item; return the sessions it changed (None: maybe every one).

        Raises Resync when a change message does not follow the last one applied.
        """
        seq = message.get("seq")
        if seq is None:  # a whole snapshot: a client that has no changes to give
            sessions = parse_reply("subscribe", message).sessions
            self.statuses = {s.session: s for s in sessions}
            return None
        if message.get("full"):
            self.fleet = message.get("fleet")
            self.statuses = {}
            for item in message.get("sessions") or []:
                status = self._status(item)
                self.statuses[status.session] = status
            self.seq = seq
            return None
        if self.seq is None or seq != self.seq + 1:
            raise Resync(f"change {seq} after {self.seq}: a message was missed")
        self.seq = seq
        if "fleet" in message:  # not a row's concern: the header reads it from any status
            self.fleet = message["fleet"]
            for status in self.statuses.values():
                status.fleet = self.fleet
        changed: set[str] = set()
        for item in message.get("changed") or []:
            status = self._status(item)
            self.statuses[status.session] = status
            changed.add(status.session)
        for item in message.get("patched") or []:
            name = item.get("session")
            old = self.statuses.get(name) if isinstance(name, str) else None
            if old is None:
                raise Resync(f"change {seq} patches {name!r}, which was never sent")
            fields = SessionStatus.model_validate(item)  # only the fields it names are set
            update = {
                key: getattr(fields, key) for key in item if key in SessionStatus.model_fields
            }
            self.statuses[name] = old.model_copy(update=update)
            changed.add(name)
        for name in message.get("removed") or []:
            self.statuses.pop(name, None)
            changed.add(name)
        order = message.get("order")
        if order is not None:
            self.statuses = {n: self.statuses[n] for n in order if n in self.statuses}
        return changed

    def _status(self, item: dict[str, Any]) -> SessionStatus:
        status = SessionStatus.model_validate(item)
        status.fleet = self.fleet
        return status
