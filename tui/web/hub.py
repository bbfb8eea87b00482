"""One subscription to the daemon for every browser: the fleet's newest statuses and a version
that moves when they change, so ten open pages cost the daemon one `subscribe`."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
from pydantic import ValidationError

from agentherd.sessions.status import SessionStatus
from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.dashboard.mirror import FleetMirror, Resync

RECONNECT_S = 1.0
"""How often a lost daemon is tried again."""


class FleetHub:
    """The fleet as the daemon's `changes` stream describes it, and who waits for news."""

    def __init__(self, client: Any, reconnect_s: float = RECONNECT_S) -> None:
        self.client = client
        self.reconnect_s = reconnect_s
        self.mirror = FleetMirror()
        self.version = 0
        """Moves by one whenever the statuses change (or the daemon is lost or found)."""
        self.lost: str | None = "waiting for the daemon's first snapshot"
        """Why the statuses may be stale, or None while the subscription lives."""
        self._news = anyio.Event()

    def statuses(self) -> list[SessionStatus]:
        """Every session's newest status, in herd.toml's order."""
        return list(self.mirror.statuses.values())

    def status(self, name: str) -> SessionStatus | None:
        """One session's newest status (None: not in herd.toml)."""
        return self.mirror.statuses.get(name)

    async def newer_than(self, version: int, timeout_s: float) -> int:
        """The version once it moves past `version`, or after `timeout_s` whatever it is."""
        with anyio.move_on_after(timeout_s):
            while self.version == version:
                await self._news.wait()
        return self.version

    def _moved(self) -> None:
        self.version += 1
        news, self._news = self._news, anyio.Event()
        news.set()

    async def run(self) -> None:
        """Keep the subscription: apply each message; on a gap subscribe again; on a lost
        daemon say why and try again every `reconnect_s`."""
        while True:
            try:
                await self._follow()
                reason = "the daemon closed the connection"
            except Resync:
                continue
            except ApiError as exc:
                reason = exc.message
            except ValidationError as exc:  # a daemon of another herd version
                reason = f"a snapshot this herd cannot read ({exc.error_count()} problem(s))"
            except (OSError, anyio.BrokenResourceError) as exc:
                reason = str(exc) or type(exc).__name__
            self.lost = reason
            self._moved()
            await anyio.sleep(self.reconnect_s)

    async def _follow(self) -> None:
        source = self.client.stream("subscribe", changes=True, patches=True)
        mirror = FleetMirror()
        try:
            async for item in source:
                mirror.apply(item)
                self.mirror, self.lost = mirror, None
                self._moved()
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await source.aclose()
