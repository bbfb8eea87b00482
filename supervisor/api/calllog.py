"""The event `herd mcp` has the daemon write for each tool call: what was asked, and by whom.

The origin is the daemon's own reading of the caller (api/trust.py), never the client's word:
an MCP server started inside a session is recorded as that session's.
"""

from __future__ import annotations

import json
from typing import Any

from agentherd.sessions.records import Event
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.api.trust import Scope

MESSAGE_ARGUMENTS_CHARS = 200
"""A call's arguments are cut to this in the event's one-line message (`data` has them all)."""


def origin(scope: Scope) -> str:
    """`person`, or `inside session 'NAME'`: as `herd send` records who sent a text."""
    return "person" if scope.person else scope.where()


def call_event(request: dict[str, Any], scope: Scope, shown: str | None) -> Event:
    """The `mcp-call` event of one recorded call; `shown`: the session it belongs to, if any."""
    arguments = request.get("arguments") or {}
    said = json.dumps(arguments, separators=(",", ":"))
    if len(said) > MESSAGE_ARGUMENTS_CHARS:
        said = said[: MESSAGE_ARGUMENTS_CHARS - 1] + "…"
    tool = str(request["tool"])
    return Event(
        at=iso(utc_now()) or "",
        session=shown,
        kind="mcp-call",
        message=f"{tool} {said} via MCP from {scope.where()}",
        data={
            "tool": tool,
            "arguments": arguments,
            "origin": origin(scope),
            "via": "mcp",
        },
    )
