"""`herd diff`: what a session's agent changed, per checkpoint and in its uncommitted work,
through a pager on a terminal; every agent-written byte made inert before it is printed."""

from __future__ import annotations

import json
import os
import sys

import click

from agentherd.sessions.diffreply import DiffReply
from agentherd.tui.cli.common import ask, guarded, reader
from agentherd.tui.cli.diffprint import lines, page, replies


@click.command()
@click.argument("name")
@click.argument("checkpoint", required=False)
@click.option(
    "--against",
    type=click.Choice(["previous", "verified"]),
    default="previous",
    show_default=True,
    help="Compare with the previous checkpoint, or with the last verified one.",
)
@click.option("--work", is_flag=True, help="Only the uncommitted work in the worktree.")
@click.option("--stat", is_flag=True, help="Only the files and their +/- counts.")
@click.option("--file", "path", default=None, metavar="PATH", help="Only this file's diff.")
@click.option("--json", "as_json", is_flag=True, help="The replies as JSON (a list).")
@guarded
def diff(
    name: str,
    checkpoint: str | None,
    against: str,
    work: bool,
    stat: bool,
    path: str | None,
    as_json: bool,
) -> None:
    """What the agent changed: by default the uncommitted work (when there is any) and the
    latest checkpoint against the one before; with CHECKPOINT (a sha prefix), that one."""
    client = reader()
    texts = not stat and not as_json
    found: list[DiffReply] = replies(
        lambda **request: ask(client, "diff", **request),
        name,
        checkpoint,
        against=against,
        texts=texts,
        work=work,
        path=path,
    )
    if as_json:
        click.echo(json.dumps([r.to_json() for r in found], indent=2))
        return
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    page("".join(line + "\n" for r in found for line in lines(r, texts, colour)))
