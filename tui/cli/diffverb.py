"""`herd diff`: what a session's agent changed, per checkpoint and in its uncommitted work,
through a pager on a terminal; every agent-written byte made inert before it is printed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import click

from agentherd.sessions.diffreply import DiffReply, stat_lines
from agentherd.sessions.sanitize import inert
from agentherd.tui.cli.common import ask, guarded, reader

DEFAULT_PAGER = "less -R"
"""The pager when $PAGER is unset: -R lets the colours through."""
_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}
_BOLD, _RESET = "\x1b[1m", "\x1b[0m"


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
    asked: dict[str, Any] = {"name": name, "against": against, "texts": texts and path is None}
    if path is not None:
        asked["file"] = path
    replies: list[DiffReply] = []
    found: DiffReply | None = None
    if work or checkpoint is None:
        found = ask(client, "diff", work=True, **asked)
        if work or found.files or found.error or not found.checkpoints:
            replies.append(found)
    if not work and (checkpoint is not None or (found is not None and found.checkpoints)):
        replies.append(ask(client, "diff", checkpoint=checkpoint, **asked))
    if as_json:
        click.echo(json.dumps([r.to_json() for r in replies], indent=2))
        return
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    page("".join(line + "\n" for r in replies for line in _lines(r, texts, colour)))


def _lines(reply: DiffReply, texts: bool, colour: bool) -> Iterator[str]:
    """One reply as the lines printed: the stat, then each file's diff; all of it inert."""
    for number, line in enumerate(stat_lines(reply)):
        yield _BOLD + inert(line) + _RESET if colour and number == 0 else inert(line)
    if not texts:
        return
    for change in reply.files:
        shown = reply.texts.get(change.path)
        if shown is None:
            continue
        yield ""
        for line in shown.text.splitlines():
            yield _painted(inert(line), colour)
        if shown.truncated:
            yield f"[{inert(change.path)}: truncated here; the rest of its diff is not shown]"
    if reply.texts_truncated:
        left = len(reply.files) - len(reply.texts)
        yield (
            f"[truncated: {left} more files not shown (the diff passes the reply's bound); "
            f"`herd diff {reply.session} --file PATH` shows one]"
        )
    yield ""


def _painted(line: str, colour: bool) -> str:
    """A diff line in git's colours on a terminal: additions green, removals red."""
    if not colour:
        return line
    if line.startswith(("diff --git", "+++", "---", "index ")):
        return _BOLD + line + _RESET
    code = _COLOURS.get(line[:1])
    return code + line + _RESET if code else line


def page(text: str) -> None:
    """Print `text`, through $PAGER (default `less -R`) when stdout is a terminal."""
    if not sys.stdout.isatty():
        sys.stdout.write(text)
        return
    argv = shlex.split(os.environ.get("PAGER") or DEFAULT_PAGER)
    try:
        pager = subprocess.Popen(argv, stdin=subprocess.PIPE)
    except OSError:
        sys.stdout.write(text)
        return
    assert pager.stdin is not None
    try:
        pager.stdin.write(text.encode("utf-8", "replace"))
        pager.stdin.close()
    except BrokenPipeError:  # the person quit the pager before the end
        pass
    pager.wait()
