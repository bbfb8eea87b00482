"""`herd mcp`: the fleet as an MCP server on stdin and stdout, for an orchestrating agent."""

from __future__ import annotations

import click

from agentherd.tui.cli.common import guarded, herd_config


@click.command()
@click.option(
    "--start-daemon",
    is_flag=True,
    help="Start the daemon when a call finds none running (never from inside a session).",
)
@click.option(
    "--tasks",
    "tasks",
    type=click.Choice(["both", "2025-11-25", "extension", "off"]),
    default="both",
    show_default=True,
    help="Which MCP task shapes herd_start may answer with: 2025-11-25 (core), extension "
    "(io.modelcontextprotocol/tasks, 2026-07-28), both (each to the clients that speak it), off.",
)
@guarded
def mcp(start_daemon: bool, tasks: str) -> None:
    """Serve MCP over stdio: herd's tools and resources for an agent (docs/mcp.md)."""
    config = herd_config()  # a bad herd.toml is one line and exit 2, before any MCP
    from agentherd.tui.mcp.server import serve  # the SDK loads only for this verb

    serve(config, start_daemon, tasks)
