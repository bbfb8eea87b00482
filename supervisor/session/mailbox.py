"""`herd send` for a headless session: a text the next run takes as its resume's `{message}`.

The text waits on the session's record (stored with it, so a daemon restart keeps it) until a
run takes it (launcher.py): at once when no run is under way, else the run after the current
one ends, even where the restart policy would have ended the task. A stop drops it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from agentherd.sessions import launchspec
from agentherd.sessions.records import PendingMessage
from agentherd.sessions.states import ACTIVE_STATES, TERMINAL_STATES, State
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.pen import Pen

QUEUED = "queued"
STARTED = "started"

BeginResume = Callable[[], Awaitable[None]]
"""Begin a task whose first run resumes the conversation (the session's lock held)."""


class Mailbox:
    """Keeps a session's sent message and starts the run that takes it when none would."""

    def __init__(self, ctx: Context, pen: Pen, begin_resume: BeginResume) -> None:
        self.ctx = ctx
        self.pen = pen
        self.record = pen.record
        self.begin_resume = begin_resume

    async def send(self, text: str, origin: str) -> tuple[str, PendingMessage]:
        """Queue `text` for the next run, or begin one with it; (queued | started, message).

        A second text before a run took the first joins it: the next run gets both, in order.
        """
        async with self.pen.lock:
            return await self._send(text, origin)

    async def _send(self, text: str, origin: str) -> tuple[str, PendingMessage]:
        config = self.pen.config()
        name = config.name
        if config.interactive:
            raise SessionError(
                f"{name}'s interface is not running, so nothing can be typed into it: "
                f"`herd start {name}` opens it, then send again (or `herd attach {name}`)"
            )
        if not launchspec.takes_messages(config):
            raise SessionError(
                f"{name} cannot take a message: its resume has no {launchspec.MESSAGE}; in "
                f'herd.toml, put "{launchspec.MESSAGE}" where {name}\'s resume gives the agent '
                "its prompt (`herd init --agent NAME` shows the presets)"
            )
        running = self.record.state in ACTIVE_STATES
        if not running and not self.record.agent_session_id:
            raise SessionError(
                f"{name} has no conversation to resume yet (no run named its session id); "
                f"`herd start {name}` first"
            )
        earlier = self.record.pending_message
        message = PendingMessage(
            id=earlier.id if earlier else uuid.uuid4().hex[:12],
            text=f"{earlier.text}\n\n{text}" if earlier else text,
            at=earlier.at if earlier else iso(utc_now()) or "",
            origin=origin,
        )
        self.record.pending_message = message
        when = "the next run" if running else "a run that starts now"
        queued = self.pen.event(
            "message-queued",
            f"a message from {origin} waits for {when} ({len(text)} characters)",
            self.record.run or None,
            message_id=message.id,
            origin=origin,
            chars=len(text),
        )
        if running:
            self.pen.commit(queued)
            return QUEUED, message
        try:
            self.pen.commit(queued)
            await self.begin_resume()
        except SessionError:
            self.record.pending_message = earlier
            self.pen.commit()
            raise
        return STARTED, message

    def reconciled(self) -> None:
        """A new daemon settled the session: a task that ended while a daemon died before it
        delivered the waiting message gets it now."""
        if self.record.state in TERMINAL_STATES:
            self.task_ended(State(self.record.state))

    def task_ended(self, state: State) -> None:
        """The task ended with a message still waiting: a stop drops it; otherwise a new run
        resumes the conversation with it (in a task: the caller holds the session's lock)."""
        message = self.record.pending_message
        if message is None:
            return
        if state is State.STOPPED or not self.record.agent_session_id:
            why = "the task was stopped" if state is State.STOPPED else "no conversation to resume"
            self._drop(message, why)
            return
        self.ctx.tg.start_soon(self._deliver)

    async def _deliver(self) -> None:
        """Begin the run that takes the waiting message, unless something came first."""
        async with self.pen.lock:
            message = self.record.pending_message
            if message is None or self.record.state not in (State.COMPLETED, State.FAILED):
                return
            try:
                await self.begin_resume()
            except SessionError as exc:
                self._drop(message, str(exc))

    def _drop(self, message: PendingMessage, why: str) -> None:
        """Forget the waiting message, saying so in the log."""
        self.record.pending_message = None
        self.pen.commit(
            self.pen.event(
                "message-dropped",
                f"the message sent at {message.at} (from {message.origin}) was not delivered: "
                f"{why}; `herd send` it again",
                self.record.run or None,
                message_id=message.id,
                origin=message.origin,
            )
        )
