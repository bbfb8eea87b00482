"""The seam between the fleet and whoever drives it: one interface, two implementations.

The CLI talks to a `Fleet`; the local daemon (its control socket and SQLite state) is the
default implementation, `LocalFleet`. The cluster (supervisor/cluster/, the `[cluster]` extra)
is the other. Nothing here imports the cluster's engine: the single-machine install needs no
database.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from agentherd.sessions.records import Event
from agentherd.sessions.status import (
    ReportReply,
    SendReply,
    SessionStatus,
    StartReply,
    TaskStatus,
    WaitReply,
    parse_reply,
    parse_status,
)

EVENTS_PAGE = 1000
"""Events read per request when listing the whole log."""


@runtime_checkable
class Fleet(Protocol):
    """What the CLI (and later the dashboard) asks of a fleet, local or across hosts."""

    def start(self, name: str, now: bool = False) -> StartReply:
        """Begin a task (already running: its current handle); `now`: not queued behind its
        `after` sessions."""
        ...

    def stop(self, name: str, kill: bool = False, no_wait: bool = False) -> SessionStatus:
        """End the task: stop signal and grace (or SIGKILL); waits unless `no_wait`."""
        ...

    def restart(self, name: str, from_rev: str | None = None) -> StartReply:
        """Stop, then begin a new task (from a checkpoint when `from_rev`)."""
        ...

    def control(self, verb: str, name: str, **args: Any) -> SessionStatus:
        """pause, resume, approve, reject or ack the session (`args`: ack's `kind`)."""
        ...

    def status(self, target: str | None = None) -> list[SessionStatus] | SessionStatus | TaskStatus:
        """One session (NAME), one task (NAME/N), or every session (None)."""
        ...

    def list(self) -> list[SessionStatus]:
        """Every session."""
        ...

    def events(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """The event log after `since`, oldest first, to its end."""
        ...

    def follow(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """The event log after `since`, then every new event as it comes (never ends)."""
        ...

    def wait(
        self, target: str, timeout_s: float | None = None, until: Sequence[str] | None = None
    ) -> WaitReply:
        """Block until the task ends, or with `until` the session is in one of those states
        (or `timeout_s` passes)."""
        ...

    def send(
        self, name: str, text: str, wait: bool = False, timeout_s: float | None = None
    ) -> SendReply:
        """`text` for the session's next run (or typed into its terminal); with `wait`, once
        that run (or the agent's turn) ended, or `timeout_s` passed."""
        ...

    def report(self, name: str) -> ReportReply:
        """The session's report."""
        ...


class Caller(Protocol):
    """What LocalFleet needs of a client: `Client`, or `DiskClient` for a stopped daemon."""

    def call(self, op: str, socket_timeout_s: float | None = -1.0, **args: Any) -> Any:
        """One request, its result."""
        ...

    def stream(self, op: str, **args: Any) -> Iterator[Any]:
        """One streaming request, its items."""
        ...


class LocalFleet:
    """The fleet of one machine: its daemon's control socket (or its state on disk)."""

    def __init__(self, client: Caller) -> None:
        self.client = client

    def _ask(self, op: str, **args: Any) -> Any:
        return parse_reply(op, self.client.call(op, **args))

    def start(self, name: str, now: bool = False) -> StartReply:
        """Begin a task (already running: its current handle)."""
        extra = {"now": True} if now else {}  # a daemon before chaining knows no `now`
        reply: StartReply = self._ask("start", name=name, **extra)
        return reply

    def stop(self, name: str, kill: bool = False, no_wait: bool = False) -> SessionStatus:
        """End the task; waits for the run to be gone unless `no_wait`."""
        reply: SessionStatus = self._ask(
            "stop", name=name, kill=kill, no_wait=no_wait, socket_timeout_s=None
        )
        return reply

    def restart(self, name: str, from_rev: str | None = None) -> StartReply:
        """Stop, then begin a new task."""
        reply: StartReply = self._ask(
            "restart", name=name, socket_timeout_s=None, **{"from": from_rev}
        )
        return reply

    def control(self, verb: str, name: str, **args: Any) -> SessionStatus:
        """pause, resume, approve, reject or ack the session."""
        reply: SessionStatus = self._ask(verb, name=name, **args)
        return reply

    def status(self, target: str | None = None) -> list[SessionStatus] | SessionStatus | TaskStatus:
        """One session, one task, or every session."""
        return parse_status(self.client.call("status", target=target))

    def list(self) -> list[SessionStatus]:
        """Every session."""
        reply: list[SessionStatus] = self._ask("ls")
        return reply

    def events(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """The event log after `since`, page by page."""
        while True:
            page: list[Event] = self._ask("events", since=since, session=session, limit=EVENTS_PAGE)
            yield from page
            if len(page) < EVENTS_PAGE:
                return
            since = page[-1].seq

    def follow(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """The event log after `since`, then live."""
        for item in self.client.stream("events", since=since, session=session, follow=True):
            yield Event.model_validate(item)

    def wait(
        self, target: str, timeout_s: float | None = None, until: Sequence[str] | None = None
    ) -> WaitReply:
        """Block until the task ends (or the session is in a state of `until`)."""
        extra: dict[str, Any] = {"until": list(until)} if until is not None else {}
        reply: WaitReply = self._ask(
            "wait", target=target, socket_timeout_s=None, timeout_s=timeout_s, **extra
        )
        return reply

    def send(
        self, name: str, text: str, wait: bool = False, timeout_s: float | None = None
    ) -> SendReply:
        """`text` for the session's next run (queued, or a run begun with it), or typed into
        an interactive run's terminal."""
        extra = {} if timeout_s is None else {"timeout_s": timeout_s}
        reply: SendReply = self._ask(
            "send",
            name=name,
            text=text,
            wait=wait,
            socket_timeout_s=None if wait else 120,
            **extra,
        )
        return reply

    def report(self, name: str) -> ReportReply:
        """The session's report (it may run git: a longer socket timeout)."""
        reply: ReportReply = self._ask("report", name=name, socket_timeout_s=120)
        return reply
