"""MCP tasks for 2026-07-28 clients: the extension io.modelcontextprotocol/tasks, herd handles.

A client that negotiated 2026-07-28 and declares the extension in its capabilities gets
`herd_start` as a task (`resultType: "task"`, the task id is herd's handle), and `tasks/get`
(the task, with its result once it ended) and `tasks/cancel` (stops the session) answer from
the daemon. Any other client, or one that does not declare it, gets the plain tool: never
required. Built on the SDK's public `Extension` (mcp 2.3.0), which advertises the extension
under `capabilities.extensions` and serves its methods only at the versions named here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CancelTaskRequestParams,
    GetTaskRequestParams,
    RequestParams,
)
from pydantic import BaseModel, ConfigDict

from agentherd.sessions.states import TERMINAL_STATES, State
from agentherd.tui.mcp.link import Link
from agentherd.tui.mcp.tasks import TASK_TOOLS, Tasks, ended_result, session_of, task_of

IDENTIFIER = "io.modelcontextprotocol/tasks"
EXTENSION_VERSIONS = frozenset({"2026-07-28"})
"""The protocol versions at which herd serves the extension (2025-11-25 has tasks in core)."""


class UpdateTaskParams(RequestParams):
    """`tasks/update` params, taken as they come: herd answers every one with the same refusal."""

    model_config = ConfigDict(extra="allow")


class TasksExtension(Extension):
    """herd_start as a task, and the extension's methods, for the 2026-07-28 clients that ask."""

    identifier = IDENTIFIER

    def __init__(self, link: Link) -> None:
        self.link = link
        self.handles = Tasks(link)  # the status lookup and its one-line refusals, shared

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", GetTaskRequestParams, self._get, EXTENSION_VERSIONS),
            MethodBinding(
                "tasks/cancel", CancelTaskRequestParams, self._cancel, EXTENSION_VERSIONS
            ),
            MethodBinding("tasks/update", UpdateTaskParams, self._update, EXTENSION_VERSIONS),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        result = await call_next(ctx)
        if params.name not in TASK_TOOLS or not _asks(ctx):
            return result
        said = result.model_dump(by_alias=True) if isinstance(result, BaseModel) else result
        if not isinstance(said, dict) or said.get("isError"):
            return result  # no task was begun: the tool's own refusal, as with a plain call
        status = await self.handles.status(said["structuredContent"]["handle"])
        return {"resultType": "task", **task_of(status)}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        require_client_extension(ctx, IDENTIFIER)  # a client that did not ask gets no tasks
        handle = params.task_id
        await self.link.record("tasks/get", session_of(handle), {"task_id": handle})
        status = await self.handles.status(handle)
        task: dict[str, Any] = {"resultType": "complete", **task_of(status)}
        state = State(status["state"])
        if state in TERMINAL_STATES and state != State.STOPPED:
            # The tool's result (a failed session is a tool result with isError, not an error).
            task["result"] = ended_result(status)
        return task

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        require_client_extension(ctx, IDENTIFIER)  # a client that did not ask gets no tasks
        handle = params.task_id
        await self.link.record("tasks/cancel", session_of(handle), {"task_id": handle})
        status = await self.handles.status(handle)
        if State(status["state"]) in TERMINAL_STATES:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"task {handle} already ended ({status['state']}); nothing to cancel",
            )
        await self.link.call("stop", None, name=session_of(handle))
        return {}  # the extension's cancel is an acknowledgement; tasks/get reads the state

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        require_client_extension(ctx, IDENTIFIER)  # a client that did not ask gets no tasks
        raise MCPError(
            code=INVALID_PARAMS,
            message="a herd task waits for a person, not the caller: `herd approve NAME` or the "
            "dashboard answers it",
        )


def _asks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client negotiated an extension version and declared the extension."""
    if ctx.protocol_version not in EXTENSION_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and IDENTIFIER in capabilities.extensions)
