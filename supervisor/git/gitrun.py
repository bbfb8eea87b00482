"""How herd runs git: argv lists in an environment herd controls, bounded in time.

Every function is synchronous and meant for a worker thread (`anyio.to_thread.run_sync`).
No hook, fsmonitor, pager, editor, prompt, signing or inherited GIT_DIR/GIT_INDEX_FILE
matters, and no user.name/user.email is needed. (Reads once went through GitPython: 2-3 MB of
the daemon's memory, once the modules it shares with the daemon are counted, for what one
`git log` gives.)
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentherd.supervisor.git.gitproc import (
    GitDeadline,
    GitError,
    run_bounded,
    run_prefix,
    subcommand,
)

GIT_TIMEOUT_S = 600.0
"""Upper bound for one git command: an `add -A` or checkout of a large tree takes minutes, but
no command may hold a worker thread forever."""

# Variables that would point git at another repository, index or identity than the one we
# name, or inject config: dropped from the environment of every command herd runs itself.
_INHERITED_GIT_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
)

# No prompt, pager or editor can block a worker thread; reads take no optional index lock
# (so they never race an agent's own git); messages are in English for the error text.
_QUIET_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_MERGE_AUTOEDIT": "no",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
    "LANGUAGE": "C",
}

# Config that must not change what herd's commands do, whatever the user's or repo's config
# says. `-c` is passed on to git's own child processes (e.g. the checkout of `worktree add`).
_CONFIG_ARGS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "color.ui=false",
    "-c",
    "advice.detachedHead=false",
)


class NotAGitRepo(Exception):
    """The folder is not inside a git worktree (or does not exist)."""


def first_line(stderr: bytes | str | None) -> str:
    """The most telling line of git's error output, for a one-line message."""
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else (stderr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines or ["no error output"])[0]


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a git command herd runs itself."""
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_GIT_VARS}
    env.update(_QUIET_ENV)
    if extra:
        env.update(extra)
    return env


def run_raw(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    deadline: GitDeadline | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git <args>` in `cwd` and return the result whatever its exit status.

    Bounded by GIT_TIMEOUT_S and by `deadline` (which can also cancel it): on either, git and
    every filter driver it started are killed and GitError is raised.
    """
    argv = ["git", *_CONFIG_ARGS, *args]
    return run_bounded(argv, cwd, _env(env), stdin or b"", GIT_TIMEOUT_S, deadline)


def read_prefix(
    cwd: Path, *args: str, max_bytes: int, env: Mapping[str, str] | None = None
) -> tuple[bytes, bool]:
    """The first `max_bytes` of `git <args>`'s output and whether it was cut (git then killed)."""
    argv = ["git", *_CONFIG_ARGS, *args]
    data, cut, _ = run_prefix(argv, cwd, _env(env), max_bytes, GIT_TIMEOUT_S)
    return data, cut


def run_git(
    cwd: Path, *args: str, deadline: GitDeadline | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run `git <args>` in `cwd` as herd runs every git command; the result, whatever its exit."""
    return run_raw(cwd, *args, deadline=deadline)


def run_ok(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    ok_codes: Sequence[int] = (0,),
    deadline: GitDeadline | None = None,
) -> bytes:
    """Run `git <args>` in `cwd`; its stdout, or GitError with a one-line message."""
    result = run_raw(cwd, *args, env=env, stdin=stdin, deadline=deadline)
    if result.returncode not in ok_codes:
        what = subcommand(["git", *args])
        raise GitError(f"git {what} failed in {cwd}: {first_line(result.stderr)}")
    return result.stdout


def check_rev(rev: str) -> None:
    """Refuse a revision that git would read as an option."""
    if not rev or rev.startswith("-") or "\0" in rev:
        raise ValueError(f"not a revision: {rev!r}")
