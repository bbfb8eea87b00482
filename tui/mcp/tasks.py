"""MCP tasks (the 2025-11-25 shapes) over herd's handles, for the clients that speak them.

A `herd_start` call carrying `params.task` answers with a task whose id is herd's handle, and
`tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` answer from the daemon: a restarted
`herd mcp` knows every task, since the daemon's store keeps them. A plain call works as before.

The SDK (mcp 2.3.0) has the task types but routes none of them: its `get_capabilities` never
declares `tasks`, and it checks a `tools/call` result against `CallToolResult`. So this is one
server middleware (the SDK's public `MCPServer(middleware=...)`), which answers before the
SDK's own lookup. The 2026-07-28 extension is `tasks_ext`, an `Extension` of the SDK.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CancelTaskRequestParams,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    PaginatedRequestParams,
)
from pydantic import BaseModel, ValidationError

from agentherd.sessions.states import TERMINAL_STATES, State, task_state
from agentherd.tui.mcp.link import WAIT_MARGIN_S, DaemonGone, Link

P = TypeVar("P", bound=BaseModel)

TASKS_VERSION = "2025-11-25"
"""The protocol version whose task shapes this middleware speaks (2026-07-28: tasks_ext)."""
TASK_TOOLS = frozenset({"herd_start"})
"""The tools a client may call as a task: the ones that begin one."""
POLL_INTERVAL_MS = 2000
"""How often a client is told to poll `tasks/get`; a task lasts minutes to hours."""
RESULT_WAIT_S = 50.0
"""`tasks/result` waits on the daemon in steps of this long until the task ends."""
RELATED_TASK = "io.modelcontextprotocol/related-task"
CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""The `tasks` server capability: list, cancel, and task-augmented `tools/call`."""


class Tasks:
    """The middleware: task requests answered from the daemon, every other request passed on."""

    def __init__(self, link: Link) -> None:
        self.link = link

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.method == "initialize":
            return _declared(await call_next(ctx))
        if ctx.protocol_version != TASKS_VERSION or ctx.session.client_params is None:
            # Another version, or no handshake yet: the SDK answers (and refuses) as it would.
            return await call_next(ctx)
        if ctx.method == "tools/list":
            return _optional(await call_next(ctx))
        if ctx.method == "tools/call" and (ctx.params or {}).get("task") is not None:
            return await self._call_as_task(ctx, call_next)
        if ctx.method == "tasks/get":
            return await self._get(_parsed(GetTaskRequestParams, ctx).task_id)
        if ctx.method == "tasks/result":
            return await self._result(_parsed(GetTaskPayloadRequestParams, ctx).task_id)
        if ctx.method == "tasks/list":
            _parsed(PaginatedRequestParams, ctx)
            return await self._list()
        if ctx.method == "tasks/cancel":
            return await self._cancel(_parsed(CancelTaskRequestParams, ctx).task_id)
        return await call_next(ctx)

    async def _call_as_task(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        """Make the call as a plain one, then answer with the task its handle names."""
        params = _parsed(CallToolRequestParams, ctx)
        if params.name not in TASK_TOOLS:
            # Only a tool that begins a task can be one; the rest answer at once, as before.
            return await call_next(ctx)
        plain = {k: v for k, v in (ctx.params or {}).items() if k != "task"}
        result = await call_next(dataclasses.replace(ctx, params=plain))
        if not isinstance(result, dict):
            return result
        if result.get("isError"):
            # No task was begun, and the caller waits for one: the refusal as an error.
            said = " ".join(part.get("text", "") for part in result.get("content") or [])
            raise MCPError(code=INVALID_PARAMS, message=said or "herd_start refused")
        structured = result["structuredContent"]
        task = await self._task(structured["handle"])
        # `content` too: the SDK's client (2.3.0) checks this reply against CallToolResult.
        text = f"herd task {task['taskId']} is {task['status']}; poll tasks/get, then tasks/result"
        return {"task": task, "content": [{"type": "text", "text": text}]}

    async def _task(self, handle: str) -> dict[str, Any]:
        return task_of(await self.status(handle))

    async def status(self, handle: str) -> dict[str, Any]:
        """herd's status of a task handle; a bad or unknown one is an INVALID_PARAMS error."""
        if "/" not in handle:
            raise MCPError(
                code=INVALID_PARAMS, message=f"{handle!r} is not a herd task id (NAME/N)"
            )
        try:
            status: dict[str, Any] = await self.link.call("status", target=handle)
        except DaemonGone:
            raise
        except ToolError as exc:  # an unknown handle, a refusal: one line for a person
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        return status

    async def _get(self, handle: str) -> dict[str, Any]:
        await self.link.record("tasks/get", session_of(handle), {"task_id": handle})
        return await self._task(handle)

    async def _list(self) -> dict[str, Any]:
        await self.link.record("tasks/list", None, {})
        statuses = await self.link.call("ls")
        return {"tasks": [task_of(s) for s in statuses if s.get("handle")]}

    async def _cancel(self, handle: str) -> dict[str, Any]:
        await self.link.record("tasks/cancel", session_of(handle), {"task_id": handle})
        status = await self.status(handle)
        if State(status["state"]) in TERMINAL_STATES:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"task {handle} already ended ({status['state']}); nothing to cancel",
            )
        await self.link.call("stop", None, name=session_of(handle))
        return await self._task(handle)

    async def _result(self, handle: str) -> dict[str, Any]:
        """The task's end as herd_start's own result shape; waits until the task ends."""
        await self.link.record("tasks/result", session_of(handle), {"task_id": handle})
        status = await self.status(handle)
        while State(status["state"]) not in TERMINAL_STATES:
            await self.link.call(
                "wait", RESULT_WAIT_S + WAIT_MARGIN_S, target=handle, timeout_s=RESULT_WAIT_S
            )
            status = await self.status(handle)
        return ended_result(status)


def ended_result(status: dict[str, Any]) -> dict[str, Any]:
    """An ended task's result, in herd_start's own shape, from its `herd status --json`."""
    handle = status["handle"]
    state = State(status["state"])
    ended = {
        "handle": handle,
        "session": status["session"],
        "state": state.value,
        "task_state": task_state(state),
    }
    said = f"herd task {handle} ended {message(status)}; read herd_report for what it did"
    return {
        "content": [{"type": "text", "text": said}],
        "structuredContent": ended,
        "isError": state == State.FAILED,
        "_meta": {RELATED_TASK: {"taskId": handle}},
    }


def task_of(status: dict[str, Any]) -> dict[str, Any]:
    """A task (2025-11-25 wire shape) from a `herd status --json` object of a session or task."""
    state = State(status["state"])
    now = datetime.now(UTC).isoformat()
    created = status.get("started_at") or now
    return {
        "taskId": status["handle"],
        "status": task_state(state),
        "statusMessage": message(status),
        "createdAt": created,
        "lastUpdatedAt": status.get("ended_at") or created,
        "ttl": None,  # herd keeps every task's record: never expires
        "pollInterval": POLL_INTERVAL_MS,
    }


def message(status: dict[str, Any]) -> str:
    """herd's own state, with its reason: `stopped (user)`, `waiting-approval`."""
    reason = status.get("reason")
    return f"{status['state']} ({reason})" if reason else str(status["state"])


def _declared(result: HandlerResult) -> HandlerResult:
    """The `initialize` result with the `tasks` capability, when 2025-11-25 was agreed."""
    if isinstance(result, dict) and result.get("protocolVersion") == TASKS_VERSION:
        capabilities = dict(result.get("capabilities") or {})
        capabilities["tasks"] = CAPABILITY
        return {**result, "capabilities": capabilities}
    return result


def _optional(result: HandlerResult) -> HandlerResult:
    """`tools/list` with the task tools marked `taskSupport: optional` (never required)."""
    if not isinstance(result, dict):
        return result
    tools = [
        {**tool, "execution": {"taskSupport": "optional"}}
        if tool.get("name") in TASK_TOOLS
        else tool
        for tool in result.get("tools") or []
    ]
    return {**result, "tools": tools}


def _parsed(model: type[P], ctx: ServerRequestContext[Any, Any]) -> P:
    try:
        return model.model_validate(ctx.params or {}, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "params"
        raise MCPError(
            code=INVALID_PARAMS, message=f"{ctx.method}: {where}: {first['msg']}"
        ) from None


def session_of(handle: str) -> str:
    return handle.partition("/")[0]
