"""`herd web`: the fleet in a browser (tui/web/), loaded only when asked for."""

from __future__ import annotations

import click

from agentherd.tui.cli.common import Failure, guarded, herd_config

DEFAULT_PORT = 4373
"""`herd` on a phone's keypad."""


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="0: any free port.")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A file holding the token a browser must bring (needed for any non-loopback --host).",
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Offer stop, restart, approve and reject (each asks first); default: read-only.",
)
@guarded
def web(host: str, port: int, token_file: str | None, allow_actions: bool) -> None:
    """Serve the fleet as web pages (read-only, on 127.0.0.1, unless told otherwise)."""
    from agentherd.supervisor.api.launcher import client_for
    from agentherd.tui.web.bind import BindRefused, plan_bind

    try:
        bind = plan_bind(host, port, token_file, allow_actions)
    except BindRefused as exc:
        raise Failure(str(exc)) from None
    config = herd_config()
    client = client_for(config)
    client.call("info")  # no daemon: one line saying how to start one, before listening

    from agentherd.tui.web.serve import serve

    try:
        serve(bind, client, [s.env for s in config.sessions])
    except BindRefused as exc:
        raise Failure(str(exc)) from None
