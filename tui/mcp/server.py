"""`herd mcp`: a stdio MCP server over the fleet; all its state is the daemon's."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from agentherd.sessions.config import HerdConfig
from agentherd.supervisor.api.protocol import HERD_VERSION
from agentherd.tui.mcp import resources, tools
from agentherd.tui.mcp.link import Link
from agentherd.tui.mcp.tasks import Tasks
from agentherd.tui.mcp.tasks_ext import TasksExtension

TASK_MODES = ("both", "2025-11-25", "extension", "off")
"""`herd mcp --tasks`: which task shapes to serve (both: each to the clients that speak it)."""

INSTRUCTIONS = (
    "herd supervises long-running coding agents, each a session of herd.toml. Start one with "
    "herd_start (it returns a task handle, NAME/N), wait on the handle with herd_wait (call it "
    "again while timed_out is true), then read herd_report. A task in waiting-approval waits "
    "for a person (`herd approve`, the dashboard): no tool answers it."
)


def build(config: HerdConfig, start_daemon: bool, tasks: str = "both") -> MCPServer:
    """The server with every tool and resource, asking the daemon of `config`."""
    link = Link(config, start_daemon)
    legacy = tasks in ("both", "2025-11-25")
    extension = tasks in ("both", "extension")
    server: MCPServer = MCPServer(
        name="herd",
        version=HERD_VERSION,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        middleware=[Tasks(link)] if legacy else [],
        extensions=[TasksExtension(link)] if extension else [],
    )
    tools.register(server, link)
    resources.register(server, link)
    return server


def serve(config: HerdConfig, start_daemon: bool, tasks: str = "both") -> None:
    """Answer MCP over stdin and stdout until the client closes them."""
    build(config, start_daemon, tasks).run("stdio")
