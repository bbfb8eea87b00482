"""The `subscribe` stream with `changes`: one full snapshot, then only what changed.

A subscriber used to get every session's status up to twenty times a second; with 200 busy
sessions that cost the daemon (building and encoding 200 statuses each time) and the dashboard
(decoding and validating them) far more than what changed. Now the first message carries every
session; each later one only the sessions whose status differs from what this subscriber was
last sent, the names removed, the order when it changed and the fleet's spend when it changed.
Each message has a sequence number one above the last: a client that sees a gap asks again and
gets a full snapshot.

Most changes of a busy fleet are output: a line read bumps a session's version. Building the
whole status for each (plan, progress, warnings, spend) was most of what a subscribed dashboard
cost the daemon, so a session whose versions since the last build were all output reads gets
only its output fields taken again (`OUTPUT_FIELDS`; the spend too when it can have moved). A
subscriber that asks with `patches` gets, for a session it already has, only the fields that
differ (`patched`), so neither side encodes nor decodes the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.status import LogsStatus, SessionStatus
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.session.spend import has_limits

if TYPE_CHECKING:
    from agentherd.supervisor.api.server import Sender
    from agentherd.supervisor.session.budgets import BudgetKeeper
    from agentherd.supervisor.session.supervisor import SessionSupervisor

CHANGES_INTERVAL_S = 0.1
"""A subscriber gets at most ten change messages a second; changes in between are coalesced."""

SWEEP_INTERVAL_S = 30.0
"""Every session's status is built again this often and compared with what was sent, so a
change that did not bump a session's version still reaches the dashboard."""

FLEET_INTERVAL_S = 5.0
"""The fleet's spend (summed over every session) is taken for subscribers this often: each
sum walks every session, and a dashboard's header needs no fresher totals. A fleet budget
with limits is summed by the budget pass anyway; this only reads it."""

OUTPUT_FIELDS = ("last_line", "logs")
"""What reading output changes in a status, besides the spend (`SPEND_FIELDS`)."""

SPEND_FIELDS = ("usage", "usage_total", "budget")
"""Taken again with the output when the agent's reported usage moved or a limit is set (the
budget's wall time and projection move with the clock)."""


@dataclass
class Built:
    """One session's status JSON and what it was built from."""

    supervisor: SessionSupervisor
    version: int
    output_version: int
    usage: Usage | None
    """The run's reported usage when the spend fields were last taken."""
    status: dict[str, Any]


class StatusCache:
    """Each session's status JSON (without `fleet`), built again only when its version moved,
    and only its output fields when nothing but output moved.

    Shared by every subscriber: ten dashboards cost one status build per change, not ten.
    """

    def __init__(self) -> None:
        self._entries: dict[str, Built] = {}

    def get(self, supervisor: SessionSupervisor, fresh: bool = False) -> dict[str, Any]:
        """The session's status JSON; `fresh` builds it again whatever its version says."""
        name = supervisor.config.name
        entry = self._entries.get(name)
        version, output_version = supervisor.version, supervisor.output_version
        if not fresh and entry is not None and entry.supervisor is supervisor:
            if entry.version == version:
                return entry.status
            if version - entry.version == output_version - entry.output_version:
                patched = self._output_read(entry)
                if patched is not None:
                    return patched
        status = supervisor.status(with_fleet=False).to_json()
        status.pop("fleet", None)  # sent once per message, not once per session
        if entry is not None and entry.status == status:
            status = entry.status  # the same object: subscribers skip it by identity
        self._entries[name] = Built(
            supervisor, version, output_version, _reported_usage(supervisor), status
        )
        return status

    def _output_read(self, entry: Built) -> dict[str, Any] | None:
        """The status with its output fields taken again (None: a whole build is needed)."""
        supervisor = entry.supervisor
        run = supervisor.run
        if run is None:
            return None
        fields: dict[str, Any] = {
            "last_line": run.last_line,
            "logs": LogsStatus(
                bytes=supervisor.follower.log_bytes(), cap_bytes=supervisor.config.log_max_bytes
            ),
        }
        usage = _reported_usage(supervisor)
        if usage != entry.usage or has_limits(supervisor.config.budget):
            fields.update(supervisor.spend.status_fields(supervisor.spend_inputs()))
        dumped = SessionStatus(session=supervisor.config.name, **fields).to_json()
        status = {**entry.status, **{key: dumped[key] for key in fields}}
        if status == entry.status:
            status = entry.status
        entry.version, entry.output_version = supervisor.version, supervisor.output_version
        entry.usage, entry.status = usage, status
        return status

    def forget_removed(self, names: set[str]) -> None:
        """Drop the sessions herd.toml no longer has."""
        for name in set(self._entries) - names:
            del self._entries[name]


def _reported_usage(supervisor: SessionSupervisor) -> Usage | None:
    """What the running agent reported so far (None without a run)."""
    run = supervisor.run
    return run.parser.usage if run is not None else None


class Subscriber:
    """What one subscriber was last sent: the messages it gets say only what differs."""

    def __init__(self, cache: StatusCache, patches: bool = False) -> None:
        self.cache = cache
        self.patches = patches
        """Send only the differing fields of a session the subscriber already has."""
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
        sent only when it differs from the one this subscriber has (with `patches`, only the
        fields that differ).
        """
        changed = []
        patched = []
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
            if self.patches and last is not None:
                differ = {key: value for key, value in status.items() if last.get(key) != value}
                patched.append({"session": name, **differ})
            else:
                changed.append(status)
        removed = [name for name in self.sent if name not in sessions]
        for name in removed:
            del self.sent[name]
            self.versions.pop(name, None)
        message: dict[str, Any] = {}
        if patched:
            message["patched"] = patched
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


async def stream_changes(
    sessions: Mapping[str, SessionSupervisor],
    budgets: BudgetKeeper,
    cache: StatusCache,
    send: Sender,
    patches: bool = False,
) -> None:
    """Serve one `subscribe` with `changes` (and `patches`) until the client goes away.

    `sessions` is the daemon's own mapping (a reload changes it); `budgets` sums the fleet's spend.
    """
    subscriber = Subscriber(cache, patches)
    fleet = budgets.fleet_json()
    await send(stream=subscriber.full(dict(sessions), fleet))
    now = anyio.current_time()
    next_sweep, next_fleet = now + SWEEP_INTERVAL_S, now + FLEET_INTERVAL_S
    while True:
        await anyio.sleep(CHANGES_INTERVAL_S)
        now = anyio.current_time()
        sweep = now >= next_sweep
        if sweep:
            next_sweep = now + SWEEP_INTERVAL_S
            cache.forget_removed(set(sessions))
        if now >= next_fleet:
            next_fleet = now + FLEET_INTERVAL_S
            fleet = budgets.fleet_json()
        message = subscriber.changes(dict(sessions), fleet, sweep)
        if message is not None:
            await send(stream=message)
