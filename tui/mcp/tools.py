"""The tools of `herd mcp`, each one request (or two) to the daemon, recorded with its origin.

No approve or reject: a person answers an approval (the dashboard, `herd approve`), never the
calling agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from agentherd.sessions.states import TERMINAL_STATES, WAIT_TIMEOUT_EXIT, State, task_state
from agentherd.supervisor.api.opargs import MAX_MESSAGE_CHARS
from agentherd.tui.mcp.link import WAIT_MARGIN_S, Link
from agentherd.tui.mcp.logtail import readable_tail
from agentherd.tui.mcp.shapes import (
    EventItem,
    Events,
    Fleet,
    Logs,
    Report,
    Sent,
    SessionBrief,
    Started,
    Status,
    Stopped,
    Waited,
)

MAX_WAIT_S = 50.0
"""herd_wait returns by this: clients time a tool call out after about a minute."""
MAX_EVENTS = 1000
"""herd_events returns at most this many events a call; page on with `next_since`."""
MAX_LOG_LINES = 500
"""herd_logs returns at most this many lines."""

Name = Annotated[
    str, Field(min_length=1, max_length=200, description="the session's name in herd.toml")
]
Target = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="a session's name (its current task) or a task's handle, NAME/N",
    ),
]

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
ACT = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
ENDS_WORK = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def brief(status: dict[str, Any]) -> SessionBrief:
    """The fields an orchestrator decides on, from a `herd status --json` object."""
    plan = status.get("plan") or {}
    usage = status.get("usage") or {}
    return SessionBrief(
        session=status["session"],
        handle=status.get("handle"),
        state=status["state"],
        task_state=status["task_state"],
        reason=status.get("reason"),
        run=status.get("run") or 0,
        restarts=status.get("restarts") or 0,
        plan_passing=plan.get("passing"),
        plan_total=plan.get("total"),
        cost_usd=usage.get("cost_usd"),
        total_tokens=usage.get("total_tokens") or 0,
        warnings=[w["kind"] for w in status.get("warnings") or []],
    )


def register(server: MCPServer, link: Link) -> None:
    """Add every tool to `server`."""

    @server.tool(annotations=READ)
    async def herd_list() -> Fleet:
        """Every session you may see, with its state, task handle, plan and spend."""
        await link.record("herd_list", None, {})
        return Fleet(sessions=[brief(s) for s in await link.call("ls")])

    @server.tool(annotations=READ)
    async def herd_status(target: Target) -> Status:
        """One session's status (or an earlier task's, given its handle NAME/N)."""
        await link.record("herd_status", _session_of(target), {"target": target})
        status = await link.call("status", target=target)
        full = "warnings" in status  # an earlier task's status has only its own fields
        return Status(brief=brief(status) if full else None, status=status)

    @server.tool(annotations=ACT)
    async def herd_start(
        session: Name,
        now: Annotated[
            bool, Field(description="start at once, even before its `after` sessions completed")
        ] = False,
    ) -> Started:
        """Begin a task on a session; returns at once with its handle (wait on it with
        herd_wait). A session already running returns its current handle; a link of a chain
        (`after`) waits `queued` until the sessions before it completed."""
        await link.record("herd_start", session, {"session": session, "now": now or None})
        return _started(await link.call("start", name=session, now=now))

    @server.tool(annotations=ACT)
    async def herd_send(
        session: Name,
        text: Annotated[
            str,
            Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="the next prompt"),
        ],
    ) -> Sent:
        """Give a headless session its next prompt, in the same conversation (as `herd send`):
        a run under way takes it when it ends, else a run begins with it at once."""
        # The event log keeps how long the text was, never its words (as `herd send` does).
        await link.record("herd_send", session, {"session": session, "chars": len(text)})
        reply = await link.call("send", name=session, text=text)
        return Sent(
            session=reply["session"],
            message_id=reply["message_id"],
            outcome=reply["outcome"],
            handle=reply.get("handle"),
            run=reply.get("run"),
        )

    @server.tool(annotations=READ)
    async def herd_wait(
        target: Target,
        until: Annotated[
            list[State] | None,
            Field(description="states that end the wait early (default: only the task's end)"),
        ] = None,
        timeout_s: Annotated[
            float, Field(ge=0, le=MAX_WAIT_S, description="give up after this, at most 50")
        ] = 30.0,
    ) -> Waited:
        """Wait until a task ends (completed, failed or stopped), or reaches one of `until`;
        when the timeout passes first, returns the current state with timed_out true (call
        again to wait on)."""
        arguments = {"target": target, "until": until, "timeout_s": timeout_s}
        await link.record("herd_wait", _session_of(target), arguments)
        socket_timeout_s = timeout_s + WAIT_MARGIN_S
        if until:
            # The daemon waits on a session's state (`herd wait NAME --until`): an ended task's
            # handle answers with its end, a live one is the session's current task.
            if "/" in target and await _has_ended(link, target):
                until = None
            else:
                target = _session_of(target)
        states = [s.value for s in until] if until else None
        reply = await link.call(
            "wait", socket_timeout_s, target=target, until=states, timeout_s=timeout_s
        )
        state = State(reply["state"])
        timed_out = reply["exit"] == WAIT_TIMEOUT_EXIT
        return Waited(
            handle=reply["handle"],
            session=_session_of(reply["handle"]),
            state=state,
            task_state=task_state(state),
            reason=reply.get("reason"),
            ended=state in TERMINAL_STATES and not timed_out,
            timed_out=timed_out,
        )

    @server.tool(annotations=READ)
    async def herd_events(
        since: Annotated[int, Field(ge=0, description="only events after this seq")] = 0,
        session: Annotated[Name | None, Field(description="only this session's")] = None,
        kinds: Annotated[list[str] | None, Field(max_length=64, description="only these")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_EVENTS)] = 100,
    ) -> Events:
        """herd's event log after a cursor, oldest first: task starts and ends, runs,
        checkpoints, verifications, warnings. Pass `next_since` back to read on."""
        arguments = {"since": since, "session": session, "kinds": kinds, "limit": limit}
        await link.record("herd_events", session, arguments)
        found = await link.call("events", since=since, session=session, kinds=kinds, limit=limit)
        events = [EventItem.model_validate(e) for e in found]
        return Events(events=events, next_since=max([since, *(e.seq for e in events)]))

    @server.tool(annotations=READ)
    async def herd_logs(
        session: Name,
        lines: Annotated[int, Field(ge=1, le=MAX_LOG_LINES)] = 50,
        run: Annotated[
            int | None, Field(ge=1, description="a run's number (default: latest)")
        ] = None,
    ) -> Logs:
        """The last lines of a run's output, each made readable: agents' JSON events
        summarised, escape sequences and control bytes made inert, long lines cut."""
        arguments = {"session": session, "lines": lines, "run": run}
        await link.record("herd_logs", session, arguments)
        info = await link.call("log_info", name=session, run=run)
        if info.get("path") is None:
            return Logs(session=session, run=None, live=False, lines=[], cut=False)
        shown, cut = readable_tail(Path(info["path"]), lines)
        return Logs(session=session, run=info["run"], live=info["live"], lines=shown, cut=cut)

    @server.tool(annotations=READ)
    async def herd_report(session: Name) -> Report:
        """The session's report: what changed (commits), what passed, what remains, what it
        cost, the next steps."""
        await link.record("herd_report", session, {"session": session})
        reply = await link.call("report", name=session)
        return Report(session=session, markdown=reply["markdown"], report=reply["report"])

    @server.tool(annotations=ENDS_WORK)
    async def herd_stop(
        session: Name,
        kill: Annotated[bool, Field(description="SIGKILL at once, no grace")] = False,
    ) -> Stopped:
        """End the session's task: its stop signal, the grace period, then SIGKILL. Work not
        committed stays in its worktree."""
        await link.record("herd_stop", session, {"session": session, "kill": kill})
        status = await link.call("stop", None, name=session, kill=kill)
        return Stopped(
            session=status["session"],
            state=status["state"],
            task_state=status["task_state"],
            reason=status.get("reason"),
        )

    @server.tool(annotations=ENDS_WORK)
    async def herd_restart(
        session: Name,
        from_checkpoint: Annotated[
            str | None,
            Field(
                max_length=200,
                description="last, verified or a commit: save uncommitted work on a rescue "
                "ref and reset the worktree to it first",
            ),
        ] = None,
    ) -> Started:
        """Stop the session's task, then begin a new one; returns the new handle."""
        arguments = {"session": session, "from_checkpoint": from_checkpoint}
        await link.record("herd_restart", session, arguments)
        args = {"from": from_checkpoint} if from_checkpoint else {}
        return _started(await link.call("restart", None, name=session, **args))


async def _has_ended(link: Link, handle: str) -> bool:
    """The task of `handle` has ended (only a session's current task can be under way)."""
    return State((await link.call("status", target=handle))["state"]) in TERMINAL_STATES


def _session_of(target: str) -> str:
    return target.partition("/")[0]


def _started(reply: dict[str, Any]) -> Started:
    state = State(reply["state"])
    return Started(
        handle=reply["handle"], session=reply["session"], state=state, task_state=task_state(state)
    )
