"""Which repository a folder is in and where its HEAD points, from `.git` when it can."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentherd.sessions.checkpoint import GitPaths
from agentherd.supervisor.git import gitfiles
from agentherd.supervisor.git.gitproc import GitDeadline, GitError
from agentherd.supervisor.git.gitrun import NotAGitRepo, first_line, run_ok, run_raw


@dataclass(frozen=True)
class Repo:
    """The worktree top and git folder a read runs against (found without running git)."""

    top: Path
    git_dir: Path


def _is_git_dir(path: Path) -> bool:
    """True when `path` is itself a git folder (HEAD, objects, refs), e.g. a bare repository."""
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _dot_git_target(top: Path) -> Path | None:
    """The git folder `top/.git` stands for: the folder itself, or a `gitdir:` file's target."""
    dot_git = top / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text("utf-8", "replace")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    return (top / text[len("gitdir:") :].strip()).absolute()


def open_repo(worktree: Path) -> Repo:
    """The worktree holding `worktree`, searched upwards as git does; raises NotAGitRepo.

    No process runs: one read costs one git command. A bare repository (or a git folder
    itself) is refused, as it has no worktree to checkpoint.
    """
    path = Path(worktree).absolute()
    if not path.is_dir():
        raise NotAGitRepo(f"not a git repository: {worktree}")
    for here in (path, *path.parents):
        if _is_git_dir(here):
            raise NotAGitRepo(f"not a git worktree (a bare repository): {worktree}")
        git_dir = _dot_git_target(here)
        if git_dir is not None:
            return Repo(top=here, git_dir=git_dir)
    raise NotAGitRepo(f"not a git repository: {worktree}")


def read(repo: Repo, *args: str, ok_codes: Sequence[int] = (0,)) -> tuple[int, bytes]:
    """Run a read-only `git <args>` against `repo`; (exit status, stdout)."""
    # GIT_DIR/GIT_WORK_TREE pin the command to this repo whatever the daemon inherited.
    pins = {"GIT_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(repo.top)}
    result = run_raw(repo.top, *args, env=pins)
    if result.returncode not in ok_codes:
        if b"not a git repository" in result.stderr:
            raise NotAGitRepo(f"not a git repository: {repo.top} ({first_line(result.stderr)})")
        raise GitError(f"git {args[0]} failed in {repo.top}: {first_line(result.stderr)}")
    return result.returncode, result.stdout


def git_paths(worktree: Path) -> GitPaths:
    """Where the git data of the worktree holding `worktree` lives; raises NotAGitRepo."""
    path = Path(worktree).absolute()
    if not path.is_dir():
        raise NotAGitRepo(f"not a git repository: {path} (no such folder)")
    result = run_raw(path, "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    lines = result.stdout.split(b"\n")
    if result.returncode != 0 or len(lines) < 3:
        raise NotAGitRepo(f"not a git worktree: {path} ({first_line(result.stderr)})")
    top, git_dir, common = (Path(os.fsdecode(line)) for line in lines[:3])
    return GitPaths(
        worktree=top.resolve(),
        git_dir=git_dir.resolve(),
        common_dir=(path / common).resolve(),  # relative to `path` when git prints it so
    )


def repo_paths(worktree: Path) -> GitPaths:
    """`git_paths`, read from the files when the layout is plain (no git process)."""
    return gitfiles.find_paths(worktree) or git_paths(worktree)


def is_git_repo(path: Path) -> bool:
    """True when `path` is inside a git worktree."""
    try:
        repo_paths(path)
    except NotAGitRepo:
        return False
    return True


def head_sha(worktree: Path, paths: GitPaths | None = None) -> str | None:
    """The sha HEAD points at, or None before the first commit (from the files when it can)."""
    paths = paths or repo_paths(worktree)
    sha = gitfiles.head_sha(paths)
    return head_or_none(paths.worktree) if sha == gitfiles.UNKNOWN else sha


def head_or_none(top: Path, deadline: GitDeadline | None = None) -> str | None:
    """The sha HEAD points at by git, or None before the first commit."""
    out = run_ok(
        top, "rev-parse", "-q", "--verify", "HEAD^{commit}", ok_codes=(0, 1), deadline=deadline
    ).strip()
    return out.decode("ascii") if out else None


def inside(top: Path, paths: Sequence[Path]) -> list[str]:
    """The `paths` that lie in the worktree `top`, relative to it; others are dropped."""
    found = []
    for path in paths:
        try:
            found.append(str(Path(path).resolve().relative_to(top.resolve())))
        except ValueError:
            continue
    return found


class RepoChanged(GitError):
    """The folder is no longer in the repository its task began in: nothing is rescued or reset."""


def identity(worktree: Path) -> tuple[str, str]:
    """(the git folder of the worktree holding `worktree`, its `device:inode`); ("", "") when
    it is in none."""
    try:
        git_dir = repo_paths(worktree).git_dir
        info = os.stat(git_dir)
    except (NotAGitRepo, OSError):
        return "", ""
    return str(git_dir), f"{info.st_dev}:{info.st_ino}"


def check_identity(worktree: Path, git_dir: str | None, git_dir_id: str | None) -> None:
    """Raise RepoChanged unless `worktree` is in the repository `identity` found before
    (None: nothing was recorded, nothing to compare)."""
    if git_dir is None:
        return
    now_dir, now_id = identity(worktree)
    if (now_dir, now_id) == (git_dir, git_dir_id or ""):
        return
    then = git_dir or "no repository"
    now = now_dir or "no repository"
    if now_dir == git_dir:
        now = f"another repository at {now_dir} (made anew)"
    raise RepoChanged(
        f"{worktree} is in {now}, not in {then} as when its task began; "
        "nothing is rescued into another repository or reset"
    )
