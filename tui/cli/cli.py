"""The `herd` command line: a thin client of the daemon's control API (its verbs are in
daemonverbs.py and sessionverbs.py)."""

from __future__ import annotations

import sys

import click

from agentherd.supervisor.api.protocol import HERD_VERSION
from agentherd.tui.cli import (
    attach,
    daemonverbs,
    diffverb,
    mcpverb,
    newverbs,
    sessionverbs,
    webverb,
)
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
    newverbs.new,
    newverbs.archive,
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
    sessionverbs.send,
    sessionverbs.logs,
    sessionverbs.events,
    sessionverbs.report,
    diffverb.diff,
    attach.attach,
    webverb.web,
    mcpverb.mcp,
):
    main.add_command(verb)


def run() -> None:
    """`herd` past the fast path: a usage mistake (an unknown option, a missing argument) is
    one `herd:` line and exit 2, as every other mistake of a person's is."""
    try:
        code = main(standalone_mode=False)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "herd"
        verb = where.partition(" ")[2]
        text = exc.format_message()
        text = text[:1].lower() + text[1:]
        said = f"{verb}: {text}" if verb else text
        click.echo(f"herd: {said} (`{where} --help` lists what it takes)", err=True)
        sys.exit(EXIT_PERSON)
    except click.ClickException as exc:
        click.echo(f"herd: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("herd: stopped", err=True)
        sys.exit(1)
    if isinstance(code, int) and code:
        sys.exit(code)
