"""MCP tasks (2025-11-25) over herd's handles: the SDK's own client sends the raw requests."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import pytest
from conftest import HERD, Herd
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CreateTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    ListTasksRequest,
    ListTasksResult,
    TaskMetadata,
)
from test_mcp import worker_fleet

from agentherd.tui.mcp.tasks import RELATED_TASK, task_of

T = TypeVar("T")


def legacy_mcp(herd: Herd, talk: Callable[[Client], Awaitable[T]], mode: str = "legacy") -> T:
    """A fresh `herd mcp` process, spoken to at 2025-11-25 (the handshake) by the SDK's client."""
    params = StdioServerParameters(
        command=HERD, args=["-c", str(herd.config_path), "mcp"], cwd=str(herd.root)
    )

    async def main() -> T:
        async with Client(params, mode=mode) as client:
            return await talk(client)

    return anyio.run(main)


async def as_task(client: Client, session: str) -> CreateTaskResult:
    arguments = {"session": session}
    request = CallToolRequest(
        params=CallToolRequestParams(
            name="herd_start", arguments=arguments, task=TaskMetadata(ttl=60_000)
        )
    )
    return await client.session.send_request(request, CreateTaskResult)


async def get(client: Client, task_id: str) -> GetTaskResult:
    request = GetTaskRequest(params=GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, GetTaskResult)


async def cancel(client: Client, task_id: str) -> GetTaskResult:
    request = CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, GetTaskResult)


def test_herd_start_as_a_task_ends_in_its_result_and_a_new_server_still_knows_it(
    herd: Herd,
) -> None:
    worker_fleet(herd)
    herd.start()

    async def first(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {"capabilities": client.server_capabilities}
        tools = {t.name: t for t in (await client.list_tools()).tools}
        seen["execution"] = {name: tool.execution for name, tool in tools.items()}
        seen["created"] = await as_task(client, "worker")
        task_id = seen["created"].task.task_id
        payload = GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id))
        seen["result"] = await client.session.send_request(payload, CallToolResult)
        seen["got"] = await get(client, task_id)
        seen["listed"] = await client.session.send_request(ListTasksRequest(), ListTasksResult)
        with pytest.raises(MCPError) as refused:
            await as_task(client, "nope")  # no task begun: the tool's refusal, as an error
        seen["refused"] = str(refused.value)
        # Never required: the same tool called plainly answers as before.
        plain = await client.call_tool("herd_start", {"session": "sleeper"})
        seen["plain"] = plain.structured_content
        return seen

    seen = legacy_mcp(herd, first)
    tasks = seen["capabilities"].tasks
    assert tasks is not None and tasks.requests.tools.call is not None and tasks.cancel is not None
    assert seen["execution"]["herd_start"].task_support == "optional"
    assert seen["execution"]["herd_list"] is None
    created = seen["created"].task
    assert (created.task_id, created.status, created.ttl) == ("worker/1", "working", None)
    result: CallToolResult = seen["result"]
    assert result.structured_content == {
        "handle": "worker/1",
        "session": "worker",
        "state": "completed",
        "task_state": "completed",
    }
    assert not result.is_error and result.meta[RELATED_TASK] == {"taskId": "worker/1"}
    got = seen["got"]
    assert (got.task_id, got.status, got.status_message) == ("worker/1", "completed", "completed")
    assert {t.task_id for t in seen["listed"].tasks} == {"worker/1"}
    assert "no session named 'nope'" in seen["refused"], seen["refused"]
    assert seen["plain"]["handle"] == "sleeper/1"  # a plain call: no task, its usual result

    async def second(client: Client) -> dict[str, Any]:
        seen = {
            "earlier": await get(client, "worker/1"),
            "cancelled": await cancel(client, "sleeper/1"),
        }
        with pytest.raises(MCPError) as again:
            await cancel(client, "sleeper/1")
        seen["again"] = str(again.value)
        with pytest.raises(MCPError) as unknown:
            await get(client, "worker/9")
        seen["unknown"] = str(unknown.value)
        return seen

    # A new `herd mcp` never saw these tasks: the daemon's store answers for them.
    seen = legacy_mcp(herd, second)
    assert (seen["earlier"].task_id, seen["earlier"].status) == ("worker/1", "completed")
    cancelled = seen["cancelled"]
    assert (cancelled.status, cancelled.status_message) == ("cancelled", "stopped (user)")
    assert "already ended" in seen["again"], seen["again"]
    assert "worker/9" in seen["unknown"], seen["unknown"]
    asked = [e["data"]["tool"] for e in herd.events(kind="mcp-call")]
    assert {"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"} <= set(asked)


def test_a_2026_client_gets_the_plain_tools_and_no_tasks(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()

    async def talk(client: Client) -> dict[str, Any]:
        seen: dict[str, Any] = {"version": client.protocol_version}
        seen["tasks"] = client.server_capabilities.tasks
        with pytest.raises(MCPError) as unknown:
            await get(client, "worker/1")
        seen["get"] = str(unknown.value)
        seen["plain"] = (await client.call_tool("herd_start", {"session": "worker"})).is_error
        return seen

    seen = legacy_mcp(herd, talk, mode="auto")
    assert (seen["version"], seen["tasks"], seen["plain"]) == ("2026-07-28", None, False)
    # It did not declare the extension (test_mcp_tasks_ext.py): its methods are not for it.
    assert "did not declare required extension" in seen["get"].lower(), seen["get"]


def test_a_task_waiting_for_a_person_reads_input_required_with_its_reason(herd: Herd) -> None:
    from test_agent_trust import gated

    herd.write(gated(herd))
    herd.start()

    async def talk(client: Client) -> GetTaskResult:
        task_id = (await as_task(client, "gated")).task.task_id
        await anyio.to_thread.run_sync(lambda: herd.wait_state("gated", "waiting-approval"))
        return await get(client, task_id)

    held = legacy_mcp(herd, talk)
    assert (held.task_id, held.status) == ("gated/1", "input_required"), held
    assert held.status_message == "waiting-approval (plan-tampered)", held
    assert herd.cli("reject", "gated").returncode == 0
    herd.client.call("stop", name="gated")


def test_no_daemon_is_an_error_that_says_so(herd: Herd) -> None:
    worker_fleet(herd)  # and no daemon: `herd mcp` does not start one unless told

    async def talk(client: Client) -> list[str]:
        said = []
        for request in (
            ListTasksRequest(),
            GetTaskRequest(params=GetTaskRequestParams(task_id="worker/1")),
        ):
            with pytest.raises(MCPError) as failed:
                await client.session.send_request(request, ListTasksResult)
            said.append(str(failed.value))
        return said

    for said in legacy_mcp(herd, talk):
        assert "no herd daemon is running" in said and "herd up" in said, said


def test_no_task_is_answered_before_the_handshake(herd: Herd) -> None:
    worker_fleet(herd)
    herd.start()
    asked = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "worker/1"}}

    async def main() -> dict[str, Any]:
        command = [HERD, "-c", str(herd.config_path), "mcp"]
        async with await anyio.open_process(command, cwd=herd.root) as server:
            assert server.stdin is not None and server.stdout is not None
            await server.stdin.send(json.dumps(asked).encode() + b"\n")
            with anyio.fail_after(30):
                said = b""
                while not said.endswith(b"\n"):
                    said += await server.stdout.receive()
            await server.stdin.aclose()
            with anyio.fail_after(30):
                await server.wait()
        return dict(json.loads(said))

    reply = anyio.run(main)
    # Not found, or (the extension serves tasks/get) the SDK's refusal of a served method
    # before the handshake: either way an error, and no task.
    assert "result" not in reply and reply["error"]["code"] in (METHOD_NOT_FOUND, INVALID_PARAMS)


@pytest.mark.parametrize(
    ("state", "reason", "status", "message"),
    [
        ("running", None, "working", "running"),
        ("waiting-approval", "plan-change", "input_required", "waiting-approval (plan-change)"),
        ("waiting-input", "idle-prompt", "input_required", "waiting-input (idle-prompt)"),
        ("failed", "crash-loop", "failed", "failed (crash-loop)"),
        ("stopped", "user", "cancelled", "stopped (user)"),
        ("queued", "after:schema", "working", "queued (after:schema)"),
    ],
)
def test_herd_states_map_to_task_states_with_the_reason(
    state: str, reason: str | None, status: str, message: str
) -> None:
    found = {"handle": "api/3", "session": "api", "state": state, "reason": reason}
    task = task_of({**found, "started_at": "2026-12-04T00:00:00+00:00"})
    assert (task["taskId"], task["status"], task["statusMessage"]) == ("api/3", status, message)
    assert task["createdAt"] == task["lastUpdatedAt"] == "2026-12-04T00:00:00+00:00"
