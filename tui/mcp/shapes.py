"""The structured output of each `herd mcp` tool: the schemas clients and models read."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentherd.sessions.states import State


class SessionBrief(BaseModel):
    """Where one session stands, in the fields an orchestrator decides on."""

    session: str
    handle: str | None = Field(description="the current task's handle, NAME/N")
    state: State
    task_state: str = Field(description="working, input_required, completed, failed, cancelled")
    reason: str | None = None
    run: int
    restarts: int
    plan_passing: int | None = None
    plan_total: int | None = None
    cost_usd: float | None = None
    total_tokens: int
    warnings: list[str] = Field(description="kinds of the open warnings")


class Fleet(BaseModel):
    """herd_list: every session this caller may see."""

    sessions: list[SessionBrief]


class Status(BaseModel):
    """herd_status: a session (or a task, given a handle) and its whole `herd status --json`."""

    brief: SessionBrief | None = Field(description="null for an earlier task's handle")
    status: dict[str, Any] = Field(description="the object `herd status --json` prints")


class Started(BaseModel):
    """herd_start, herd_restart: the task begun; wait on its handle."""

    handle: str
    session: str
    state: State
    task_state: str


class Sent(BaseModel):
    """herd_send: what became of the text; wait on `handle` for the run that takes it."""

    session: str
    message_id: str
    outcome: str = Field(
        description="queued (a run is under way: the next one takes it) or started (a run "
        "began with it)"
    )
    handle: str | None = Field(description="the task of the run that took it, once one has")
    run: int | None = None


class Waited(BaseModel):
    """herd_wait: the state the wait ended in, and why it ended."""

    handle: str
    session: str
    state: State
    task_state: str
    reason: str | None = None
    ended: bool = Field(description="the task has ended: completed, failed or stopped")
    timed_out: bool = Field(description="the timeout passed first: `state` is the current one")


class EventItem(BaseModel):
    """One line of herd's event log."""

    seq: int
    at: str
    session: str | None = None
    run: int | None = None
    kind: str
    message: str
    data: dict[str, Any]


class Events(BaseModel):
    """herd_events: events after the cursor, oldest first."""

    events: list[EventItem]
    next_since: int = Field(description="pass as `since` for the events after these")


class Logs(BaseModel):
    """herd_logs: the last lines of a run's output, made readable (no control bytes)."""

    session: str
    run: int | None
    live: bool = Field(description="the run is still going")
    lines: list[str]
    cut: bool = Field(description="earlier output exists that is not in `lines`")


class Report(BaseModel):
    """herd_report: the session's report, as markdown and as its JSON form."""

    session: str
    markdown: str
    report: dict[str, Any]


class Stopped(BaseModel):
    """herd_stop: the session after the stop."""

    session: str
    state: State
    task_state: str
    reason: str | None = None
