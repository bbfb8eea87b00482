"""The `herd` command line: a thin client of the daemon's control API (its verbs are in
daemonverbs.py and sessionverbs.py)."""

from __future__ import annotations

import click

from agentherd.supervisor.api.protocol import HERD_VERSION
from agentherd.tui.cli import daemonverbs, sessionverbs
from agentherd.tui.cli.common import (
    DAEMON_EXIT_TIMEOUT_S,
    EXIT_FORBIDDEN,
    EXIT_INTERNAL,
    EXIT_PERSON,
)
from agentherd.tui.cli.daemonverbs import left_running_line

__all__ = [
    "DAEMON_EXIT_TIMEOUT_S",
    "EXIT_FORBIDDEN",
    "EXIT_INTERNAL",
    "EXIT_PERSON",
    "left_running_line",
    "main",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c",
    "--config",
    type=click.Path(dir_okay=False),
    envvar=None,
    help="herd.toml to use (default: $HERD_CONFIG, else the nearest upward).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(HERD_VERSION, prog_name="herd")
def main(config: str | None, debug: bool) -> None:
    """herd: supervise long-running AI coding agents."""


for verb in (
    daemonverbs.init,
    daemonverbs.check,
    daemonverbs.daemon,
    daemonverbs.up,
    daemonverbs.tui,
    daemonverbs.down,
    daemonverbs.demo,
    sessionverbs.ls_,
    sessionverbs.start,
    sessionverbs.stop,
    sessionverbs.kill,
    sessionverbs.restart,
    sessionverbs.pause,
    sessionverbs.resume,
    sessionverbs.approve,
    sessionverbs.reject,
    sessionverbs.ack,
    sessionverbs.status,
    sessionverbs.wait,
    sessionverbs.logs,
    sessionverbs.events,
    sessionverbs.report,
):
    main.add_command(verb)
