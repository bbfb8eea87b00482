"""Run `herd web`: check the bind, make sure a daemon answers, listen, serve until Ctrl-C."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterable

import uvicorn

from agentherd.supervisor.api.client import AsyncClient, Client
from agentherd.tui.dashboard.feeds import quiet_cancelled_wakeups
from agentherd.tui.web.app import build
from agentherd.tui.web.bind import Bind, listen
from agentherd.tui.web.layout import Redactor, Writer, secret_values

GRACEFUL_SHUTDOWN_S = 2.0
"""Ctrl-C ends open streams after this long: a browser reconnects by itself."""

MAX_CONNECTIONS = 64
"""More open connections than this are answered 503: one person's phones and tabs fit."""


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    """The server on this loop, without the harmless error of a socket read cancelled at
    Ctrl-C (the streams' daemon reads: anyio's race, as in the dashboard)."""
    quiet_cancelled_wakeups(asyncio.get_running_loop())
    await server.serve(sockets=[sock])


def serve(bind: Bind, socket_client: Client, session_env: Iterable[dict[str, str]]) -> None:
    """Serve the fleet of the daemon behind `socket_client` until interrupted."""
    sock = listen(bind)
    port = sock.getsockname()[1]
    host = f"[{bind.host}]" if ":" in bind.host else bind.host
    address = f"http://{host}:{port}/"
    if bind.token is not None:
        address += "?token=<the token in your --token-file>"
    mode = "actions on (--allow-actions)" if bind.allow_actions else "read-only"
    print(f"herd web: {address} ({mode}; Ctrl-C stops)", flush=True)
    esc = Writer(Redactor(secret_values(session_env)))
    app = build(AsyncClient(socket_client.socket_path), bind, esc)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        proxy_headers=False,
        server_header=False,
        limit_concurrency=MAX_CONNECTIONS,
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN_S),
        ws="none",
    )
    server = uvicorn.Server(config)
    try:
        asyncio.run(_serve(server, sock))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    sys.stdout.flush()
