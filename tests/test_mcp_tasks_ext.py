"""MCP tasks for 2026-07-28 clients (the extension io.modelcontextprotocol/tasks), and --tasks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

import anyio
import pytest
from conftest import HERD, Herd
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    Result,
)
from pydantic import ConfigDict, Field
from test_mcp import worker_fleet

T = TypeVar("T")
IDENTIFIER = "io.modelcontextprotocol/tasks"
ENDED = {"completed", "failed", "cancelled"}


class CreatedTask(Result):
    """The extension's `CreateTaskResult`: a task in lieu of the tool's result."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")


class ExtTask(Result):
    """The extension's `tasks/get` answer: the task, with the tool's result once it ended."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")
    result: dict[str, Any] | None = None


async def get(session: Any, task_id: str) -> ExtTask:
    request = GetTaskRequest(params=GetTaskRequestParams(task_id=task_id))
    answer: ExtTask = await session.send_request(request, ExtTask)
    return answer


class TasksClient(ClientExtension):
    """The client side: declares the extension, and polls a task to its tool result."""

    identifier = IDENTIFIER

    def __init__(self) -> None:
        self.created: list[CreatedTask] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve),)

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        task = await get(ctx.session, created.task_id)
        with anyio.fail_after(120):
            while task.status not in ENDED:
                # herd_wait is a long poll on the same handle: no sleeping between polls.
                await ctx.session.call_tool("herd_wait", {"target": created.task_id})
                task = await get(ctx.session, created.task_id)
        assert task.result is not None, task
        return CallToolResult.model_validate(task.result)


def modern_mcp(
    herd: Herd,
    talk: Callable[[Client], Awaitable[T]],
    extensions: Sequence[ClientExtension] = (),
    *flags: str,
) -> T:
    """A fresh `herd mcp` process and the SDK's client in its default mode (2026-07-28)."""
    params = StdioServerParameters(
        command=HERD, args=["-c", str(herd.config_path), "mcp", *flags], cwd=str(herd.root)
    )

    async def main() -> T:
        async with Client(params, extensions=list(extensions)) as client:
            return await talk(client)

    return anyio.run(main)


def test_a_2026_client_declaring_the_extension_gets_herd_start_as_a_task(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()
    tasks = TasksClient()

    async def talk(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {"version": client.protocol_version}
        seen["extensions"] = client.server_capabilities.extensions
        seen["result"] = await client.call_tool("herd_start", {"session": "worker"})
        seen["got"] = await get(client.session, "worker/1")
        # The task itself, unresolved: a sleeper never ends on its own.
        raw = await client.session.call_tool(
            "herd_start", {"session": "sleeper"}, allow_claimed=True
        )
        seen["sleeper"] = raw
        cancel = CancelTaskRequest(params=CancelTaskRequestParams(task_id="sleeper/1"))
        seen["ack"] = await client.session.send_request(cancel, Result)
        seen["cancelled"] = await get(client.session, "sleeper/1")
        with pytest.raises(MCPError) as update:
            await client.session.send_request(_update("worker/1"), Result)
        seen["update"] = str(update.value)
        return seen

    seen = modern_mcp(herd, talk, [tasks])
    assert seen["version"] == "2026-07-28"
    assert IDENTIFIER in (seen["extensions"] or {}), seen["extensions"]
    assert [(t.task_id, t.status) for t in tasks.created][:1] == [("worker/1", "working")]
    result: CallToolResult = seen["result"]
    assert result.structured_content == {
        "handle": "worker/1",
        "session": "worker",
        "state": "completed",
        "task_state": "completed",
    }
    got = seen["got"]
    assert (got.task_id, got.status, got.status_message) == ("worker/1", "completed", "completed")
    sleeper = seen["sleeper"]
    assert isinstance(sleeper, CreatedTask), sleeper
    assert (sleeper.task_id, sleeper.status, sleeper.status_message) == (
        "sleeper/1",
        "working",
        "running",
    )
    assert seen["ack"].model_dump(exclude_none=True, by_alias=True).keys() <= {
        "_meta",
        "resultType",
    }
    cancelled = seen["cancelled"]
    assert (cancelled.status, cancelled.status_message) == ("cancelled", "stopped (user)")
    assert "herd approve" in seen["update"], seen["update"]
    asked = [e["data"]["tool"] for e in herd.events(kind="mcp-call")]
    assert {"tasks/get", "tasks/cancel"} <= set(asked)


def _update(task_id: str) -> Any:
    """A `tasks/update` request, built from the SDK's generic request model."""
    from mcp_types import Request, RequestParams

    class UpdateParams(RequestParams):
        model_config = ConfigDict(extra="allow")

    return Request[UpdateParams, Literal["tasks/update"]](
        method="tasks/update", params=UpdateParams.model_validate({"taskId": task_id})
    )


def test_a_2026_client_without_the_extension_gets_the_plain_tool(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()

    async def talk(client: Client) -> Any:
        return (await client.call_tool("herd_start", {"session": "worker"})).structured_content

    started = modern_mcp(herd, talk)  # never required: no extension declared, the plain result
    assert started["handle"] == "worker/1", started


@pytest.mark.parametrize("mode", ["off", "2025-11-25"])
def test_the_switch_turns_the_extension_off(herd: Herd, mode: str) -> None:
    worker_fleet(herd)
    herd.start()

    async def talk(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {"extensions": client.server_capabilities.extensions}
        with pytest.raises(MCPError) as unknown:
            await get(client.session, "worker/1")
        seen["get"] = str(unknown.value)
        seen["plain"] = await client.call_tool("herd_start", {"session": "worker"})
        return seen

    seen = modern_mcp(herd, talk, [TasksClient()], f"--tasks={mode}")
    assert IDENTIFIER not in (seen["extensions"] or {}), seen["extensions"]
    assert "not found" in seen["get"].lower(), seen["get"]
    assert seen["plain"].structured_content["handle"] == "worker/1"


def test_extension_only_gives_a_2025_client_no_tasks(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()
    params = StdioServerParameters(
        command=HERD,
        args=["-c", str(herd.config_path), "mcp", "--tasks=extension"],
        cwd=str(herd.root),
    )

    async def main() -> Any:
        async with Client(params, mode="legacy") as client:
            return client.server_capabilities.tasks

    assert anyio.run(main) is None


def test_a_task_waiting_for_a_person_reads_input_required_over_the_extension(herd: Herd) -> None:
    from test_agent_trust import gated

    herd.write(gated(herd))
    herd.start()

    async def talk(client: Client) -> ExtTask:
        created = await client.session.call_tool(
            "herd_start", {"session": "gated"}, allow_claimed=True
        )
        assert isinstance(created, CreatedTask), created
        await anyio.to_thread.run_sync(lambda: herd.wait_state("gated", "waiting-approval"))
        return await get(client.session, created.task_id)

    held = modern_mcp(herd, talk, [TasksClient()])
    assert (held.task_id, held.status, held.result) == ("gated/1", "input_required", None), held
    assert held.status_message == "waiting-approval (plan-tampered)", held
    assert herd.cli("reject", "gated").returncode == 0
    herd.client.call("stop", name="gated")


def test_an_unknown_task_mode_is_a_usage_error(herd: Herd) -> None:
    worker_fleet(herd)
    done = herd.cli("mcp", "--tasks=2099")
    assert done.returncode == 2 and "--tasks" in done.stderr, done.stderr
