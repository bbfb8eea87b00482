"""The `subscribe` stream with `changes`: one full snapshot, then only what changed.

A subscriber used to get every session's status up to twenty times a second; with 200 busy
sessions that cost the daemon (building and encoding 200 statuses each time) and the dashboard
(decoding and validating them) far more than what changed. Now the first message carries every
session; each later one only the sessions whose status differs from what this subscriber was
last sent, the names removed, the order when it changed and the fleet's spend when it changed.
Each message has a sequence number one above the last: a client that sees a gap asks again and
gets a full snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.times import iso, utc_now

if TYPE_CHECKING:
    from agentherd.supervisor.daemon import Daemon
    from agentherd.supervisor.server import Sender
    from agentherd.supervisor.session import SessionSupervisor

CHANGES_INTERVAL_S = 0.1
"""A subscriber gets at most ten change messages a second; changes in between are coalesced."""

SWEEP_INTERVAL_S = 30.0
"""Every session's status is built again this often and compared with what was sent, so a
change that did not bump a session's version still reaches the dashboard."""


class StatusCache:
    """Each session's status JSON (without `fleet`), built again only when its version moved.

    Shared by every subscriber: ten dashboards cost one status build per change, not ten.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[SessionSupervisor, int, dict[str, Any]]] = {}

    def get(self, supervisor: SessionSupervisor, fresh: bool = False) -> dict[str, Any]:
        """The session's status JSON; `fresh` builds it again whatever its version says."""
        name = supervisor.config.name
        entry = self._entries.get(name)
        version = supervisor.version
        if not fresh and entry is not None and entry[0] is supervisor and entry[1] == version:
            return entry[2]
        status = supervisor.status().to_json()
        status.pop("fleet", None)  # sent once per message, not once per session
        if entry is not None and entry[2] == status:
            status = entry[2]  # the same object: subscribers skip it by identity
        self._entries[name] = (supervisor, version, status)
        return status

    def forget_removed(self, names: set[str]) -> None:
        """Drop the sessions herd.toml no longer has."""
        for name in set(self._entries) - names:
            del self._entries[name]


class Subscriber:
    """What one subscriber was last sent: the messages it gets say only what differs."""

    def __init__(self, cache: StatusCache) -> None:
        self.cache = cache
        self.seq = 0
        self.sent: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, tuple[SessionSupervisor, int]] = {}
        self.fleet: Any = None

    def full(self, sessions: dict[str, SessionSupervisor], fleet: Any) -> dict[str, Any]:
        """The first message: every session, in herd.toml's order, and the fleet's spend."""
        self.sent = {name: self.cache.get(s) for name, s in sessions.items()}
        self.versions = {name: (s, s.version) for name, s in sessions.items()}
        self.fleet = fleet
        self.seq += 1
        return {
            "seq": self.seq,
            "full": True,
            "sessions": list(self.sent.values()),
            "fleet": fleet,
            "at": iso(utc_now()),
        }

    def changes(
        self, sessions: dict[str, SessionSupervisor], fleet: Any, sweep: bool = False
    ) -> dict[str, Any] | None:
        """What changed since the last message, or None when nothing did.

        A session is looked at only when its version moved (or on a `sweep`); its status is
        sent only when it differs from the one this subscriber has.
        """
        changed = []
        for name, supervisor in sessions.items():
            seen = self.versions.get(name)
            if not sweep and seen == (supervisor, supervisor.version):
                continue
            self.versions[name] = (supervisor, supervisor.version)
            status = self.cache.get(supervisor, fresh=sweep)
            last = self.sent.get(name)
            if last is status or last == status:
                continue
            self.sent[name] = status
            changed.append(status)
        removed = [name for name in self.sent if name not in sessions]
        for name in removed:
            del self.sent[name]
            self.versions.pop(name, None)
        message: dict[str, Any] = {}
        if list(self.sent) != list(sessions):  # added, removed or reordered by a reload
            self.sent = {name: self.sent[name] for name in sessions}
            message["order"] = list(sessions)
        if fleet != self.fleet:
            self.fleet = fleet
            message["fleet"] = fleet
        if not (changed or removed or message):
            return None
        self.seq += 1
        return {
            "seq": self.seq,
            "changed": changed,
            "removed": removed,
            **message,
            "at": iso(utc_now()),
        }


async def stream_changes(daemon: Daemon, cache: StatusCache, send: Sender) -> None:
    """Serve one `subscribe` with `changes` until the client goes away."""
    ctx = daemon.ctx
    assert ctx is not None  # the socket is served only once the daemon has its context
    subscriber = Subscriber(cache)
    await send(stream=subscriber.full(dict(daemon.sessions), ctx.fleet_spend()))
    next_sweep = anyio.current_time() + SWEEP_INTERVAL_S
    while True:
        await anyio.sleep(CHANGES_INTERVAL_S)
        sweep = anyio.current_time() >= next_sweep
        if sweep:
            next_sweep = anyio.current_time() + SWEEP_INTERVAL_S
            cache.forget_removed(set(daemon.sessions))
        message = subscriber.changes(dict(daemon.sessions), ctx.fleet_spend(), sweep)
        if message is not None:
            await send(stream=message)
