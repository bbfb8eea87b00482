"""Create and archive sessions: herd.toml edited in place, then the daemon told.

The one code path of `herd new`, `herd archive` and the dashboard's new-session dialog: the
entry is checked by the loader `herd check` uses before anything is written or created, a new
worktree is made beside the repository (never inside it: the person's tree stays clean), and a
running daemon reads herd.toml again and starts the new session.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.config import (
    STATE_DIR_NAME,
    ConfigError,
    SessionConfig,
    load_config,
    parse_config,
)
from agentherd.sessions.configedit import session_names, with_archived, with_session
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.ondisk import DiskClient
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.files.paths import socket_path_for
from agentherd.supervisor.git.gitrun import GitError, run_ok

BRANCH_PREFIX = "herd/"
"""A new worktree's branch is `herd/NAME`: herd's branches stand apart from the person's."""


class NewSessionError(ValueError):
    """A person's mistake in what was asked: one line saying what to change."""


@dataclass(frozen=True)
class NewSession:
    """What `herd new` (or the dialog) asks for."""

    name: str
    agent: str = "claude"
    prompt: str | None = None
    """Replaces the preset's prompt; None keeps it."""
    repo: Path | None = None
    """Make a new worktree and branch of this repository for the session..."""
    folder: Path | None = None
    """...or work in this existing folder."""
    worktrees: Path | None = None
    """Where new worktrees go (default: `<repo>.worktrees/` beside the repository)."""
    budget_usd: float | None = None


@dataclass(frozen=True)
class Created:
    """What was made: the session's folder, its branch (a new worktree's), its first handle."""

    name: str
    cwd: Path
    branch: str | None = None
    handle: str | None = None
    """None: no daemon runs (or `start` was not asked); `herd up NAME` starts it."""


def worktree_path(repo: Path, name: str, worktrees: Path | None = None) -> Path:
    """Where a new worktree of `repo` for session `name` goes: beside the repository."""
    top = repo.resolve()
    return (worktrees or top.parent / f"{top.name}.worktrees") / name


def _entry(ask: NewSession, cwd: Path, config_dir: Path) -> dict[str, Any]:
    """The [[session]] table: the agent's preset, the folder, the prompt and the budget."""
    preset = AGENTS[ask.agent].preset
    command = list(preset.command)
    if ask.prompt:
        if preset.prompt_at is None:
            command.append(ask.prompt)
        else:
            command[preset.prompt_at] = ask.prompt
    try:
        where = os.path.relpath(cwd, config_dir)
    except ValueError:
        where = str(cwd)
    entry: dict[str, Any] = {"name": ask.name, "cwd": where, "agent": ask.agent}
    entry["command"] = command
    if preset.resume:
        entry["resume"] = list(preset.resume)
    if preset.env:
        entry["env"] = dict(preset.env)
    entry["plan"] = "feature_list.json"
    entry["progress"] = preset.progress
    if ask.budget_usd is not None:
        entry["budget"] = {"cost_usd": ask.budget_usd}
    return entry


def _checked(ask: NewSession, config_path: Path) -> tuple[str, Path]:
    """herd.toml's new text and the session's folder; NewSessionError before anything is made."""
    if ask.agent not in AGENTS:
        raise NewSessionError(f"agent: unknown {ask.agent!r}; choose one of {', '.join(AGENTS)}")
    if (ask.repo is None) == (ask.folder is None):
        raise NewSessionError("give either a repository (a new worktree) or an existing folder")
    if ask.budget_usd is not None and ask.budget_usd <= 0:
        raise NewSessionError("budget: give a positive amount of US dollars, e.g. 10")
    text = config_path.read_text(encoding="utf-8")
    if ask.name in session_names(text):
        raise NewSessionError(f"{config_path.name}: a session named {ask.name!r} exists already")
    if ask.folder is not None:
        cwd = ask.folder.resolve()
        if not cwd.is_dir():
            raise NewSessionError(f"folder: {ask.folder} is not a folder; give an existing one")
    else:
        assert ask.repo is not None
        if not (ask.repo / ".git").exists():
            raise NewSessionError(f"repository: {ask.repo} is not the top of a git repository")
        cwd = worktree_path(ask.repo, ask.name, ask.worktrees)
        if cwd.exists():
            raise NewSessionError(f"worktree: {cwd} exists already; choose another name")
    new_text = with_session(text, _entry(ask, cwd, config_path.parent))
    try:
        parse_config(new_text, config_path.resolve())
    except ConfigError as exc:
        raise NewSessionError("; ".join(str(p) for p in exc.problems)) from None
    return new_text, cwd


def _add_worktree(repo: Path, cwd: Path, branch: str) -> None:
    """`git worktree add -b BRANCH PATH HEAD`: the repository's own tree is not touched."""
    try:
        run_ok(repo, "rev-parse", "--verify", "--quiet", "HEAD")
    except GitError:
        raise NewSessionError(f"repository: {repo} has no commit yet; commit once first") from None
    try:
        run_ok(repo, "worktree", "add", "-q", "-b", branch, str(cwd), "HEAD")
    except GitError as exc:
        raise NewSessionError(f"worktree: {exc}") from None


def _daemon(config_path: Path) -> Client | None:
    """A client of the daemon serving this herd.toml, or None when none runs."""
    client = Client(socket_path_for(config_path.parent / STATE_DIR_NAME))
    return client if client.answers() else None


def create_session(config_path: Path, ask: NewSession, start: bool = True) -> Created:
    """Add the session to herd.toml (a new worktree first, when asked) and start it when a
    daemon runs; NewSessionError, with nothing written, when the result would not load."""
    new_text, cwd = _checked(ask, config_path)
    branch = None
    if ask.repo is not None:
        branch = BRANCH_PREFIX + ask.name
        cwd.parent.mkdir(parents=True, exist_ok=True)
        _add_worktree(ask.repo, cwd, branch)
    config_path.write_text(new_text, encoding="utf-8")
    client = _daemon(config_path) if start else None
    if client is None:
        return Created(ask.name, cwd, branch)
    client.call("reload")
    started = client.call("start", name=ask.name)
    return Created(ask.name, cwd, branch, handle=started["handle"])


def _state(config_path: Path, name: str, client: Client | None) -> str | None:
    """The session's state: the daemon's, else the one saved in `.herd/` (a daemon that died
    left its agents running, and the next one adopts them); None when never known."""
    reader: Client | DiskClient | None = client
    if reader is None and (config_path.parent / STATE_DIR_NAME / "state.db").is_file():
        reader = DiskClient(load_config(config_path))
    if reader is None:
        return None
    try:
        return str(reader.call("status", target=name)["state"])
    except (ApiError, ConfigError):
        return None  # not read by the daemon yet, or herd.toml is wrong: nothing of it runs


def archive_session(config_path: Path, name: str, archived: bool = True) -> bool:
    """Set (or take out) `archived` of session `name`; True when a daemon read it again.

    A running session is refused: archiving hides it, and a hidden agent would go on working.
    """
    text = config_path.read_text(encoding="utf-8")
    try:
        new_text = with_archived(text, name, archived)
    except KeyError:
        raise NewSessionError(f"{config_path.name}: no session named {name!r}") from None
    client = _daemon(config_path)
    if archived:
        state = _state(config_path, name, client)
        if state in ACTIVE_STATES:
            raise NewSessionError(
                f"{name} is {state}; stop it first (`herd stop {name}`), then archive it"
            )
    try:
        config = parse_config(new_text, config_path.resolve())
    except ConfigError as exc:
        raise NewSessionError("; ".join(str(p) for p in exc.problems)) from None
    assert isinstance(config.session(name), SessionConfig)
    if new_text != text:
        config_path.write_text(new_text, encoding="utf-8")
    if client is None:
        return False
    client.call("reload")
    return True
