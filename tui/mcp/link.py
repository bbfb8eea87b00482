"""The MCP server's line to the daemon: one socket request per call, no state of its own.

Every failure becomes a `ToolError` whose one line says what to do, so a model reads it and
the server goes on (a killed daemon, an unknown session, a refusal from inside a session).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import anyio
from mcp.server.mcpserver.exceptions import ToolError

from agentherd.sessions.config import HerdConfig
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.launcher import client_for, ensure_daemon
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.process.runid import TAG_VAR

CALL_TIMEOUT_S = 30.0
"""A request that is not a wait gets this long for its reply (a report reads git)."""

WAIT_MARGIN_S = 10.0
"""A wait's socket outlasts its timeout by this much: the daemon answers at the timeout."""

ARGUMENT_CHARS = 512
"""A recorded argument's text is cut here: the event log keeps what was asked, not a file."""


class DaemonGone(ToolError):
    """The daemon closed the connection mid-request (it was killed, or it is restarting)."""


class Link:
    """Asks the daemon of one herd.toml; starts it first only when `start_daemon`."""

    def __init__(self, config: HerdConfig, start_daemon: bool) -> None:
        self.config = config
        self.start_daemon = start_daemon

    def _client(self) -> Client:
        client = client_for(self.config)
        if not self.start_daemon or client.answers():
            return client
        if os.environ.get(TAG_VAR):
            # A daemon started from inside a run would live in that run's process tree.
            raise ToolError(
                "no herd daemon is running, and this MCP server runs inside a herd session: "
                "it does not start one; a person runs `herd up`"
            )
        return ensure_daemon(self.config)[0]

    def _call(self, op: str, timeout_s: float | None, args: dict[str, Any]) -> Any:
        try:
            return self._client().call(op, socket_timeout_s=timeout_s, **args)
        except ApiError as exc:
            raise _tool_error(exc) from None
        except TimeoutError:
            raise ToolError(f"the herd daemon did not answer {op} within {timeout_s}s") from None
        except OSError as exc:
            raise DaemonGone(_gone(f"{type(exc).__name__}: {exc}")) from None

    async def call(
        self, op: str, socket_timeout_s: float | None = CALL_TIMEOUT_S, **args: Any
    ) -> Any:
        """The daemon's reply to `op`, asked from a worker thread (the client blocks);
        `socket_timeout_s` None waits as long as the daemon takes (a stop)."""
        work = functools.partial(self._call, op, socket_timeout_s, args)
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    async def record(self, tool: str, about: str | None, arguments: dict[str, Any]) -> None:
        """Put the call in herd's event log; the daemon adds who asked."""
        given = {k: _recorded(v) for k, v in arguments.items() if v is not None}
        await self.call("mcp_call", tool=tool, about=about, arguments=given)


def _recorded(value: Any) -> Any:
    """An argument as the event log keeps it: plain JSON, long text cut."""
    if isinstance(value, list):
        return [str(item)[:ARGUMENT_CHARS] for item in value][:64]
    if isinstance(value, str | int | float | bool):
        return value[:ARGUMENT_CHARS] if isinstance(value, str) else value
    return str(value)[:ARGUMENT_CHARS]


def _gone(detail: str) -> str:
    return (
        f"the herd daemon went away during the request ({detail}); its agents keep running. "
        "A person restarts it with `herd up`; then ask again (handles survive the restart)"
    )


def _tool_error(exc: ApiError) -> ToolError:
    """The daemon's refusal as a tool error; a closed connection as the daemon gone."""
    if exc.code == "internal" and "closed the connection" in exc.message:
        return DaemonGone(_gone(exc.message))
    if exc.code == "no-daemon":
        return ToolError(
            "no herd daemon is running here; a person starts one with `herd up` "
            "(or runs this server as `herd mcp --start-daemon`)"
        )
    return ToolError(f"{exc.code}: {exc.message}")
