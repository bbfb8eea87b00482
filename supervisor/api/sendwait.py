"""The control API's waits on one session: `wait --until STATE` and `send --wait`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

from agentherd.sessions.records import RunRecord
from agentherd.sessions.states import (
    TERMINAL_STATES,
    WAIT_TIMEOUT_EXIT,
    WAIT_UNREACHABLE_EXIT,
    State,
)
from agentherd.sessions.status import SendReply, WaitReply
from agentherd.supervisor.api import sendtyped
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.session.mailbox import STARTED
from agentherd.supervisor.session.supervisor import SessionSupervisor

POLL_S = 1.0
"""A wait looks again at least this often, even when no event was written."""

SETTLED = TERMINAL_STATES | {State.IDLE}
"""States a session leaves only when someone starts it: a wait for another state ends there."""


def wanted_states(names: list[str]) -> frozenset[State]:
    """The states `--until` names; bad-request naming the unknown one and the known ones."""
    known = {state.value: state for state in State}
    for name in names:
        if name not in known:
            raise ApiError(
                "bad-request",
                f"wait --until: {name!r} is not a state; states: {', '.join(known)}",
            )
    return frozenset(known[name] for name in names)


async def until_state(
    supervisor: SessionSupervisor,
    wanted: frozenset[State],
    timeout_s: float | None,
    changed: Callable[[], anyio.Event],
) -> WaitReply:
    """Wait until the session is in one of `wanted`: exit 0; WAIT_TIMEOUT_EXIT after
    `timeout_s`; WAIT_UNREACHABLE_EXIT once it settled elsewhere with nothing to start it."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        record = supervisor.record
        handle = record.handle or supervisor.config.name
        state = State(record.state)
        if state in wanted:
            return WaitReply(handle=handle, state=state, reason=record.reason, exit=0)
        if state in SETTLED and record.pending_message is None:
            # A message that waits still starts a run (mailbox.py): not settled yet.
            exit_code = WAIT_UNREACHABLE_EXIT
            return WaitReply(handle=handle, state=state, reason=record.reason, exit=exit_code)
        remaining_s = None if deadline is None else deadline - time.monotonic()
        if remaining_s is not None and remaining_s <= 0:
            exit_code = WAIT_TIMEOUT_EXIT
            return WaitReply(handle=handle, state=state, reason=record.reason, exit=exit_code)
        event = changed()
        with anyio.move_on_after(min(remaining_s or POLL_S, POLL_S)):
            await event.wait()


async def send(
    supervisor: SessionSupervisor,
    store: Store,
    request: dict[str, Any],
    origin: str,
    changed: Callable[[], anyio.Event],
) -> SendReply:
    """Hand the text to the session; with `wait`, answer once the run that took it ended (an
    interactive run's terminal: typed into it, and answered once the agent's turn ended)."""
    if sendtyped.interactive(supervisor):
        return await sendtyped.send_typed(supervisor, request, origin, changed)
    name = supervisor.config.name
    outcome, message = await supervisor.mailbox.send(str(request["text"]), origin)
    reply = SendReply(session=name, message_id=message.id, outcome=outcome)
    if outcome == STARTED:
        reply.handle, reply.run = supervisor.record.handle, supervisor.record.run
    if not request.get("wait"):
        return reply
    while True:
        event = changed()
        run = _run_with(store, name, message.id)
        if run is not None and run.ended_at is not None:
            await _settled(supervisor, changed)
            reply.handle, reply.run, reply.run_outcome = run.handle, run.run, run.outcome
            reply.state = State(supervisor.record.state)
            return reply
        if run is None and supervisor.record.pending_message is None:
            reply.state, reply.run_outcome = State(supervisor.record.state), "dropped"
            return reply
        with anyio.move_on_after(POLL_S):
            await event.wait()


def _run_with(store: Store, name: str, message_id: str) -> RunRecord | None:
    """The run that took message `message_id`, newest first (a message goes to one run)."""
    for run in reversed(store.runs(name)):
        if run.message_id == message_id:
            return run
    return None


async def _settled(supervisor: SessionSupervisor, changed: Callable[[], anyio.Event]) -> None:
    """Wait (a moment) for what the ended run leads to: the task's end, a backoff, a verdict."""
    deadline = time.monotonic() + POLL_S * 5
    while State(supervisor.record.state) in (State.RUNNING, State.STOPPING):
        if time.monotonic() > deadline:
            return
        event = changed()
        with anyio.move_on_after(POLL_S):
            await event.wait()
