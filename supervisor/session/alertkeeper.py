"""The fleet's notifications with the evidence (`[notifications]`): told of every event written,
it composes, deduplicates, holds and sends messages through Apprise, and signs the approval
links that herd web takes once.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from agentherd.sessions import gatelink
from agentherd.sessions.alerts import (
    RESET_KINDS,
    RESETS_ONE,
    Alert,
    Gate,
    cause_of,
    compose,
    local_minute,
)
from agentherd.sessions.notifyconfig import NotificationsConfig
from agentherd.sessions.records import Event
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.process import appriser

log = logging.getLogger("herd.notifications")

MAX_SENDING = 4
"""Messages being sent at once, fleet-wide (each a worker thread while it waits)."""

Sender = Callable[[list[str], Alert], Awaitable[str | None]]


class AlertKeeper:
    """Turns events into messages as `[notifications]` says; holds the approval links' key."""

    def __init__(
        self,
        sessions: Mapping[str, Any],
        task_group: TaskGroup,
        *,
        clock: Callable[[], float] = time.time,
        minute_of: Callable[[float], int] = local_minute,
        sender: Sender = appriser.send,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        link_ttl_s: float = gatelink.LINK_TTL_S,
        record: Callable[[Event], None] = lambda _event: None,
    ) -> None:
        self.sessions = sessions
        """The fleet's sessions: each has `status(with_fleet)`, a message's evidence."""
        self.tg = task_group
        self.clock = clock
        self.minute_of = minute_of
        self.sender = sender
        self.sleep = sleep
        self.link_ttl_s = link_ttl_s
        self.record = record
        """Writes a daemon event (no session) and announces it."""
        self.config: NotificationsConfig | None = None
        self.gate: Gate | None = None
        self.key = secrets.token_bytes(32)
        """Signs approval links; a new daemon has a new key, so old links stop working."""
        self.gates: dict[str, int] = {}
        """Each session's open approval gate (its `waiting-approval` event's seq)."""
        self.used_links: dict[str, float] = {}
        """Approval links already used, until they expire: each works once."""
        self.sending = anyio.CapacityLimiter(MAX_SENDING)
        self.timer_running = False

    def use(self, config: NotificationsConfig | None) -> None:
        """Take herd.toml's `[notifications]` (at start and on every reload)."""
        if config == self.config:
            return
        self.config = config
        quiet = config.quiet_minutes() if config else None
        old = self.gate
        self.gate = Gate(config.cooldown, quiet, self.minute_of) if config else None
        if old is not None and self.gate is not None:
            self.gate.sent, self.gate.last_at, self.gate.held = old.sent, old.last_at, old.held

    def saw(self, events: list[Event]) -> None:
        """Events just written: those herd.toml's `on` names become messages."""
        config, gate = self.config, self.gate
        if config is None or gate is None:
            return
        for event in events:
            if event.session is None:
                continue
            if event.kind in RESET_KINDS:
                gate.reset(event.session)
                self.gates.pop(event.session, None)
            if event.kind in RESETS_ONE:
                gate.reset(event.session, RESETS_ONE[event.kind])
            if event.kind == "waiting-approval":
                self.gates[event.session] = event.seq
            cause = cause_of(event)
            member = self.sessions.get(event.session)
            if cause is None or cause not in config.on or member is None:
                continue
            alert = compose(member.status(with_fleet=False), cause, event, config)
            for ready in gate.offer(alert, self.clock()):
                self.tg.start_soon(self._send, ready)
        if gate.held and not self.timer_running:
            self.timer_running = True
            self.tg.start_soon(self._release_held)

    async def _release_held(self) -> None:
        """Wait for held messages' time (a cooldown's end, quiet hours' end), send, until none."""
        try:
            while self.gate is not None and self.config is not None:
                wait_s = self.gate.next_due_s(self.clock())
                if wait_s is None:
                    return
                await self.sleep(wait_s)
                if self.gate is None or self.config is None:
                    return
                for ready in self.gate.due(self.clock(), self.config.public_url):
                    await self._send(ready)
        finally:
            self.timer_running = False

    async def _send(self, alert: Alert) -> None:
        """Send one message to every URL herd.toml names; a failure is logged, never raised."""
        config = self.config
        if config is None:
            return
        alert = self._with_gate_link(alert, config.public_url)
        urls = [os.environ[name] for name in config.urls_env if os.environ.get(name)]
        missing = [name for name in config.urls_env if not os.environ.get(name)]
        if missing:
            self._failed(alert, f"{', '.join(missing)} not set in the daemon's environment")
        if not urls:
            return
        async with self.sending:
            try:
                why = await self.sender(urls, alert)
            except Exception as exc:  # a service's failure must never reach the daemon
                why = f"{type(exc).__name__}"
        if why is not None:
            self._failed(alert, why)

    def _with_gate_link(self, alert: Alert, public_url: str | None) -> Alert:
        """An approval gate's message, its gate still open, links a signed approval link made
        now (good for `link_ttl_s` from the sending, once)."""
        name, seq = alert.session, alert.gate_seq
        if seq is None or not public_url or self.gates.get(name) != seq:
            return alert
        token = gatelink.sign(self.key, name, seq, self.clock(), self.link_ttl_s)
        return dataclasses.replace(alert, link=f"{public_url}/session/{name}/gate?link={token}")

    def _failed(self, alert: Alert, why: str) -> None:
        """Say in the event log (and the daemon's) that a message did not go, and why."""
        log.warning("notification %r not sent: %s", alert.title, why)
        message = f"{alert.title!r} not sent: {why}"
        data = {"title": alert.title, "session": alert.session or None}
        self.record(
            Event(at=iso(utc_now()) or "", kind="notification-failed", message=message, data=data)
        )

    def check_link(self, name: str, token: str, use: bool) -> str | None:
        """None when `token` is a good approval link for `name` (and, with `use`, spend it:
        a link works once); else why not."""
        now = self.clock()
        why = gatelink.refusal(self.key, token, name, now)
        if why is not None:
            return why
        self.used_links = {t: until for t, until in self.used_links.items() if until >= now}
        if token in self.used_links:
            return "this approval link was used already: open the session's page"
        if self.gates.get(name) != gatelink.gate_of(token):
            return "this approval link's gate was answered already: open the session's page"
        if use:
            self.used_links[token] = now + self.link_ttl_s
        return None
