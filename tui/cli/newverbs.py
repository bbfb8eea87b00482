"""The verbs that change herd.toml's list of sessions: new and archive."""

from __future__ import annotations

from pathlib import Path

import click

from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.config import find_config
from agentherd.supervisor.api.newsession import (
    NewSession,
    NewSessionError,
    archive_session,
    create_session,
)
from agentherd.tui.cli.common import Failure, guarded


def _config_path() -> Path:
    """The herd.toml these verbs edit: -c, $HERD_CONFIG, else the nearest upward."""
    explicit = click.get_current_context().find_root().params.get("config")
    return find_config(explicit).resolve()


@click.command()
@click.argument("name")
@click.option("--agent", default="claude", show_default=True, help=f"{', '.join(AGENTS)}.")
@click.option("--prompt", default=None, help="The task, instead of the preset's prompt.")
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Make a new worktree and branch herd/NAME of this repository.",
)
@click.option(
    "--worktrees",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where new worktrees go (default: REPO.worktrees/ beside the repository).",
)
@click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Work in this existing folder instead.",
)
@click.option("--budget-usd", type=float, default=None, help="A cost budget for each task.")
@click.option("--no-start", is_flag=True, help="Only write herd.toml, even when a daemon runs.")
@guarded
def new(
    name: str,
    agent: str,
    prompt: str | None,
    repo: Path | None,
    worktrees: Path | None,
    folder: Path | None,
    budget_usd: float | None,
    no_start: bool,
) -> None:
    """Add a session to herd.toml (in a new worktree, or a folder) and start it."""
    path = _config_path()
    ask = NewSession(name, agent, prompt, repo, folder, worktrees, budget_usd)
    try:
        made = create_session(path, ask, start=not no_start)
    except NewSessionError as exc:
        raise Failure(str(exc)) from None
    branch = f" on branch {made.branch}" if made.branch else ""
    click.echo(f"{path.name}: added {made.name}, working in {made.cwd}{branch}")
    if made.handle:
        click.echo(made.handle)
    else:
        click.echo(f"herd: start it with `herd up {made.name}`", err=True)


@click.command()
@click.argument("name")
@click.option("--undo", is_flag=True, help="Bring an archived session back.")
@guarded
def archive(name: str, undo: bool) -> None:
    """Put a finished session away: out of the fleet view and `herd ls`, its history kept."""
    path = _config_path()
    try:
        archive_session(path, name, archived=not undo)
    except NewSessionError as exc:
        raise Failure(str(exc)) from None
    if undo:
        click.echo(f"{name}: back in the fleet")
    else:
        click.echo(f"{name}: archived; `herd ls --all` shows it, `herd archive --undo {name}`")
