"""Resources of `herd mcp`: a session's plan, progress, checkpoints and spend, as JSON."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from agentherd.tui.mcp.link import Link

PREFIX = "herd://sessions/{session}/"
"""Every resource is one session's: `herd://sessions/NAME/plan` and so on."""


def register(server: MCPServer, link: Link) -> None:
    """Add the per-session resource templates to `server`."""

    async def read(what: str, session: str, build: Callable[[], Awaitable[Any]]) -> str:
        try:
            await link.record(f"resource:{what}", session, {"session": session})
            return json.dumps(await build(), indent=2)
        except ToolError as exc:
            raise ResourceError(str(exc)) from None

    @server.resource(PREFIX + "plan", mime_type="application/json")
    async def plan(session: str) -> str:
        """The plan: items passing and failing, forbidden changes, the counts."""

        async def build() -> Any:
            report = (await link.call("report", name=session))["report"]
            passed, remains = report.get("passed") or {}, report.get("remains") or {}
            return {
                "session": session,
                "passing": passed.get("plan_passing"),
                "total": passed.get("plan_total"),
                "items_passing": passed.get("items_passing", []),
                "items_failing": remains.get("items_failing", []),
                "changes": remains.get("plan_changes", []),
                "error": remains.get("plan_error"),
            }

        return await read("plan", session, build)

    @server.resource(PREFIX + "progress", mime_type="application/json")
    async def progress(session: str) -> str:
        """The progress file's latest entries and when it last changed."""

        async def build() -> Any:
            status = await link.call("status", target=session)
            return {"session": session, **(status.get("progress") or {})}

        return await read("progress", session, build)

    @server.resource(PREFIX + "checkpoints", mime_type="application/json")
    async def checkpoints(session: str) -> str:
        """The task's checkpoints (commits), each with its files and verification."""

        async def build() -> Any:
            report = (await link.call("report", name=session))["report"]
            changed = report.get("changed") or {}
            return {"session": session, "checkpoints": changed.get("checkpoints", [])}

        return await read("checkpoints", session, build)

    @server.resource(PREFIX + "spend", mime_type="application/json")
    async def spend(session: str) -> str:
        """Tokens, cost and turns of the current task and the session's life, its budget,
        and its spend over time."""

        async def build() -> Any:
            status = await link.call("status", target=session)
            samples = (await link.call("spend", name=session))["samples"]
            return {
                "session": session,
                "usage": status.get("usage"),
                "usage_total": status.get("usage_total"),
                "budget": status.get("budget"),
                "samples": samples,
            }

        return await read("spend", session, build)
