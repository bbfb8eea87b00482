"""Git access for herd: checkpoints, rescue commits, resets and scratch worktrees.

Every function is synchronous and meant for a worker thread (`anyio.to_thread.run_sync`).
Reads and writes alike run git plumbing as argv lists with an environment herd controls: no
hook, pager, editor, prompt, signing or inherited GIT_DIR/GIT_INDEX_FILE matters, and no
user.name/user.email is needed. (Reads once went through GitPython: 2-3 MB of the daemon's
memory, once the modules it shares with the daemon are counted, for what one `git log` gives.)
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentherd.sessions.checkpoint import Checkpoint, GitPaths
from agentherd.supervisor.git import gitfiles, gitwrite
from agentherd.supervisor.git.gitproc import GitCancelled as GitCancelled
from agentherd.supervisor.git.gitproc import GitDeadline as GitDeadline
from agentherd.supervisor.git.gitproc import GitError as GitError
from agentherd.supervisor.git.gitproc import GitTimeout as GitTimeout
from agentherd.supervisor.git.gitproc import run_bounded, wait_index_free

GIT_TIMEOUT_S = 600.0
"""Upper bound for one git command: an `add -A` or checkout of a large tree takes minutes, but
no command may hold a worker thread forever."""

RESCUE_IDENTITY = {
    "GIT_AUTHOR_NAME": "herd",
    "GIT_AUTHOR_EMAIL": "herd@localhost",
    "GIT_COMMITTER_NAME": "herd",
    "GIT_COMMITTER_EMAIL": "herd@localhost",
}
"""Author and committer of rescue commits, so no user.name/user.email is needed."""

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

# One commit of `git log -z`: "/" marks a record (a path never starts with "/").
_LOG_FORMAT = "--format=/%H%x00%ct%x00%s"
_SHORTSTAT_RE = {
    "files": re.compile(rb"(\d+) files? changed"),
    "insertions": re.compile(rb"(\d+) insertions?\(\+\)"),
    "deletions": re.compile(rb"(\d+) deletions?\(-\)"),
}


class NotAGitRepo(Exception):
    """The folder is not inside a git worktree (or does not exist)."""


def _first_line(stderr: bytes | str | None) -> str:
    """The most telling line of git's error output, for a one-line message."""
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else (stderr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines or ["no error output"])[0]


first_line = _first_line
"""Public: the most telling line of git's error output (for modules running git themselves)."""


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a git command herd runs itself."""
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_GIT_VARS}
    env.update(_QUIET_ENV)
    if extra:
        env.update(extra)
    return env


def _run_raw(
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


def run_git(
    cwd: Path, *args: str, deadline: GitDeadline | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run `git <args>` in `cwd` as herd runs every git command; the result, whatever its exit."""
    return _run_raw(cwd, *args, deadline=deadline)


def _run(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    ok_codes: Sequence[int] = (0,),
    deadline: GitDeadline | None = None,
) -> bytes:
    """Run `git <args>` in `cwd`; its stdout, or GitError with a one-line message."""
    result = _run_raw(cwd, *args, env=env, stdin=stdin, deadline=deadline)
    if result.returncode not in ok_codes:
        raise GitError(f"git {args[0]} failed in {cwd}: {_first_line(result.stderr)}")
    return result.stdout


@dataclass(frozen=True)
class _Repo:
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


def _open_repo(worktree: Path) -> _Repo:
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
            return _Repo(top=here, git_dir=git_dir)
    raise NotAGitRepo(f"not a git repository: {worktree}")


def _read(repo: _Repo, *args: str, ok_codes: Sequence[int] = (0,)) -> tuple[int, bytes]:
    """Run a read-only `git <args>` against `repo`; (exit status, stdout)."""
    # GIT_DIR/GIT_WORK_TREE pin the command to this repo whatever the daemon inherited.
    pins = {"GIT_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(repo.top)}
    result = _run_raw(repo.top, *args, env=pins)
    if result.returncode not in ok_codes:
        if b"not a git repository" in result.stderr:
            raise NotAGitRepo(f"not a git repository: {repo.top} ({_first_line(result.stderr)})")
        raise GitError(f"git {args[0]} failed in {repo.top}: {_first_line(result.stderr)}")
    return result.returncode, result.stdout


def _check_rev(rev: str) -> None:
    """Refuse a revision that git would read as an option."""
    if not rev or rev.startswith("-") or "\0" in rev:
        raise ValueError(f"not a revision: {rev!r}")


def _parse_log(raw: bytes) -> list[Checkpoint]:
    """Checkpoints from `git log -z --numstat` in `_LOG_FORMAT`, in git's order."""
    tokens = raw.split(b"\0")
    found: list[Checkpoint] = []
    i = 0
    while i + 2 < len(tokens):
        if not tokens[i].startswith(b"/"):
            i += 1
            continue
        sha = tokens[i][1:].decode("ascii")
        at = datetime.fromtimestamp(int(tokens[i + 1]), UTC)
        subject = tokens[i + 2].decode("utf-8", "replace")
        i += 3
        files: list[str] = []
        insertions = deletions = 0
        while i < len(tokens) and not tokens[i].startswith(b"/"):
            # git separates the stat list from the header with a newline; each entry is
            # "added<TAB>deleted<TAB>path" ("-" for a binary file); a path may hold tabs.
            entry = tokens[i][1:] if not files and tokens[i].startswith(b"\n") else tokens[i]
            added, _, rest = entry.partition(b"\t")
            deleted, _, name = rest.partition(b"\t")
            if name:
                files.append(os.fsdecode(name))
                insertions += int(added) if added.isdigit() else 0
                deletions += int(deleted) if deleted.isdigit() else 0
            i += 1
        found.append(
            Checkpoint(
                sha=sha,
                at=at,
                subject=subject,
                files=tuple(files),
                insertions=insertions,
                deletions=deletions,
            )
        )
    return found


def _log(repo: _Repo, revs: Sequence[str], limit: int) -> list[Checkpoint]:
    """Up to `limit` commits of `git log <revs>`, newest first, each with its files."""
    _, raw = _read(
        repo,
        "log",
        "-z",
        _LOG_FORMAT,
        "--numstat",
        "--no-renames",
        "--diff-merges=first-parent",
        f"--max-count={limit}",
        "--ignore-missing",
        *revs,
        "--",
    )
    return _parse_log(raw)


def git_paths(worktree: Path) -> GitPaths:
    """Where the git data of the worktree holding `worktree` lives; raises NotAGitRepo."""
    path = Path(worktree).absolute()
    if not path.is_dir():
        raise NotAGitRepo(f"not a git repository: {path} (no such folder)")
    result = _run_raw(
        path, "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"
    )
    lines = result.stdout.split(b"\n")
    if result.returncode != 0 or len(lines) < 3:
        raise NotAGitRepo(f"not a git worktree: {path} ({_first_line(result.stderr)})")
    top, git_dir, common = (Path(os.fsdecode(line)) for line in lines[:3])
    return GitPaths(
        worktree=top.resolve(),
        git_dir=git_dir.resolve(),
        common_dir=(path / common).resolve(),  # relative to `path` when git prints it so
    )


def is_git_repo(path: Path) -> bool:
    """True when `path` is inside a git worktree."""
    try:
        _paths(path)
    except NotAGitRepo:
        return False
    return True


def _paths(worktree: Path) -> GitPaths:
    """`git_paths`, read from the files when the layout is plain (no git process)."""
    return gitfiles.find_paths(worktree) or git_paths(worktree)


def head_sha(worktree: Path, paths: GitPaths | None = None) -> str | None:
    """The sha HEAD points at, or None before the first commit (from the files when it can)."""
    paths = paths or _paths(worktree)
    sha = gitfiles.head_sha(paths)
    return _head_or_none(paths.worktree) if sha == gitfiles.UNKNOWN else sha


def head_checkpoint(worktree: Path) -> Checkpoint | None:
    """The commit HEAD points at, with the files it changed; None before the first commit."""
    found = _log(_open_repo(worktree), ["HEAD"], limit=1)
    return found[0] if found else None


def commits_between(
    worktree: Path, old_sha: str | None, new_sha: str, limit: int = 50
) -> list[Checkpoint]:
    """Commits reachable from `new_sha` and not from `old_sha`, oldest first (at most `limit`).

    When `old_sha` is not an ancestor of `new_sha` (after a reset, a rebase, or once it is
    gone), history was rewritten: only the checkpoint of `new_sha` is returned. An unknown
    `new_sha` gives [].
    """
    _check_rev(new_sha)
    repo = _open_repo(worktree)
    if old_sha is None:
        return list(reversed(_log(repo, [new_sha], limit)))
    _check_rev(old_sha)
    status, _ = _read(repo, "merge-base", "--is-ancestor", old_sha, new_sha, ok_codes=(0, 1, 128))
    if status != 0:
        return _log(repo, [new_sha], limit=1)
    return list(reversed(_log(repo, [new_sha, f"^{old_sha}"], limit)))


def new_commits(
    worktree: Path, old_sha: str | None, new_sha: str, limit: int, paths: GitPaths | None
) -> list[Checkpoint]:
    """`commits_between`, in one git process when `new_sha` is a loose commit whose only
    parent is `old_sha` (an agent's commit on top of the last checkpoint)."""
    if (
        old_sha is not None
        and paths is not None
        and gitfiles.commit_parents(paths, new_sha) == (old_sha,)
    ):
        return _log(_open_repo(worktree), [new_sha], limit=1)
    return commits_between(worktree, old_sha, new_sha, limit)


def resolve_commit(worktree: Path, rev: str) -> str:
    """The full sha of the commit `rev` names; ValueError when there is none."""
    _check_rev(rev)
    repo = _open_repo(worktree)
    status, out = _read(
        repo, "rev-parse", "-q", "--verify", f"{rev}^{{commit}}", ok_codes=(0, 1, 128)
    )
    where = repo.top
    if status != 0 or not out.strip():
        raise ValueError(f"no commit {rev!r} in {where}")
    return out.strip().decode("ascii")


def diffstat(worktree: Path, base_sha: str, head_sha: str) -> tuple[int, int, int]:
    """(files changed, insertions, deletions) from `base_sha` to `head_sha` (renames unpaired)."""
    _check_rev(base_sha)
    _check_rev(head_sha)
    args = ("--shortstat", "--no-renames", "--no-ext-diff", "--no-textconv")
    _, raw = _read(_open_repo(worktree), "diff", *args, base_sha, head_sha, "--")
    counts = [m.group(1) if (m := rx.search(raw)) else b"0" for rx in _SHORTSTAT_RE.values()]
    return int(counts[0]), int(counts[1]), int(counts[2])


def files_touched(worktree: Path, base_sha: str, head_sha: str) -> list[str]:
    """Paths added, changed or deleted from `base_sha` to `head_sha` (both sides of a rename)."""
    _check_rev(base_sha)
    _check_rev(head_sha)
    repo = _open_repo(worktree)
    _, raw = _read(repo, "diff", "--name-only", "-z", "--no-renames", base_sha, head_sha, "--")
    return [os.fsdecode(name) for name in raw.split(b"\0") if name]


def changes(worktree: Path, base_rev: str, head_sha: str) -> tuple[tuple[int, int, int], list[str]]:
    """`diffstat` and `files_touched` from one `git diff --numstat` (one git process, not two:
    `herd down` writes a report per session, and git's start-ups were most of its cost)."""
    _check_rev(base_rev)
    _check_rev(head_sha)
    args = ("--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv")
    _, raw = _read(_open_repo(worktree), "diff", *args, base_rev, head_sha, "--")
    files: list[str] = []
    insertions = deletions = 0
    for entry in raw.split(b"\0"):
        added, _, rest = entry.partition(b"\t")
        removed, _, name = rest.partition(b"\t")
        if not name:
            continue
        files.append(os.fsdecode(name))
        # A binary file shows `-`: counted as changed, with no lines (as --shortstat does).
        insertions += int(added) if added.isdigit() else 0
        deletions += int(removed) if removed.isdigit() else 0
    return (len(files), insertions, deletions), files


def changes_from_before(
    worktree: Path, first_sha: str, last_sha: str
) -> tuple[tuple[int, int, int], list[str]]:
    """`changes` from the parent of `first_sha` (from `first_sha` itself when it has none) to
    `last_sha`: what a task's checkpoints changed, in one git process when there is a parent."""
    paths = gitfiles.find_paths(worktree)
    if paths is not None and gitfiles.commit_parents(paths, first_sha) == ():
        # A root commit read from its object: no git process that fails on `~1` first, and
        # none at all for a task that stayed on it (`herd down` writes a report per session).
        return ((0, 0, 0), []) if first_sha == last_sha else changes(worktree, first_sha, last_sha)
    try:
        return changes(worktree, f"{first_sha}~1", last_sha)
    except GitError:  # a root commit has no parent: count from the commit itself
        return changes(worktree, first_sha, last_sha)


def _head_or_none(top: Path, deadline: GitDeadline | None = None) -> str | None:
    """The sha HEAD points at, or None before the first commit."""
    out = _run(
        top, "rev-parse", "-q", "--verify", "HEAD^{commit}", ok_codes=(0, 1), deadline=deadline
    ).strip()
    return out.decode("ascii") if out else None


MAX_REF_COPIES = 1000
"""`<ref>.2` ... `<ref>.1000`: a run rescued more often than this has a bigger problem."""


@dataclass(frozen=True)
class SavedRef:
    """A commit herd saved on a ref of its own; `earlier` lists older copies for the same run."""

    ref: str
    sha: str
    earlier: tuple[str, ...] = ()


def _copies(top: Path, ref: str, deadline: GitDeadline | None) -> list[tuple[str, str, str, str]]:
    """(name, sha, tree, parents) of `ref` and its numbered copies `ref.2`, `ref.3`..."""
    raw = _run(
        top,
        "for-each-ref",
        "--format=%(refname)%00%(objectname)%00%(tree)%00%(parent)",
        ref,
        f"{ref}.*",
        deadline=deadline,
    )
    found = []
    for line in raw.decode("utf-8", "replace").splitlines():
        name, sha, tree, parents = (line.split("\0") + ["", "", ""])[:4]
        suffix = name[len(ref) :]
        if name == ref or (suffix.startswith(".") and suffix[1:].isdigit()):
            found.append((name, sha, tree, parents))
    return found


def _create_ref(
    top: Path, ref: str, sha: str, message: str, taken: Sequence[str], deadline: GitDeadline | None
) -> str:
    """Point a NEW ref at `sha`: `ref`, else the first free `ref.N`; an existing ref never moves.

    The empty old value makes `update-ref` refuse, atomically, a name that exists: another
    daemon (or a person) creating it meanwhile cannot be overwritten either.
    """
    for n in range(1, MAX_REF_COPIES + 1):
        name = ref if n == 1 else f"{ref}.{n}"
        if name in taken:
            continue
        if _run_raw(top, "update-ref", "-m", message, name, sha, "", deadline=deadline).returncode:
            if _run_raw(top, "show-ref", "--verify", "-q", name, deadline=deadline).returncode:
                raise GitError(f"git update-ref {name} failed in {top}")
            continue  # created by someone else since we looked: take the next name
        return name
    raise GitError(f"{ref} has {MAX_REF_COPIES} copies in {top}; not saving another")


def save_rescue(
    worktree: Path,
    ref: str,
    message: str,
    exclude: Sequence[Path] = (),
    deadline: GitDeadline | None = None,
) -> SavedRef | None:
    """Commit the dirty tree (staged, modified, untracked; not ignored) to a NEW ref.

    The real index, the worktree and HEAD are left exactly as they are, no hook runs and no
    user identity is needed: the tree is built in a temporary index. Untracked paths in
    `exclude` (herd.toml living in the worktree) are not the agent's work: the rescue holds
    them as HEAD does (left out when HEAD has none).
    A rescue ref is never moved: when `ref` exists (the same run rescued again, e.g. by a new
    daemon after a kill mid-reset), the commit goes on `ref.2`, `ref.3`..., unless one of them
    already holds this very tree on this HEAD. Returns None when there is nothing to save.
    """
    paths = _paths(worktree)
    top = paths.worktree
    if not ref.startswith("refs/") or (
        not gitfiles.valid_ref_name(ref) and _run_raw(top, "check-ref-format", ref).returncode
    ):
        raise ValueError(f"not a ref name for a rescue: {ref!r} (e.g. refs/herd/api/rescue/3)")
    head = gitfiles.head_sha(paths)
    if head == gitfiles.UNKNOWN:
        head = _head_or_none(top, deadline)
    with tempfile.TemporaryDirectory(prefix="herd-rescue-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            # A copy keeps what is staged and the cached stat data (no full re-hash); copy2
            # keeps the index's mtime too, which git's racy-entry check compares against.
            shutil.copy2(paths.git_dir / "index", Path(tmp) / "index")
        except FileNotFoundError:
            if head is not None:
                _run(top, "read-tree", head, env=index, deadline=deadline)
        # --ignore-errors: an unreadable file must not lose the rest (exit 1 then).
        _run(top, "add", "-A", "--ignore-errors", env=index, ok_codes=(0, 1), deadline=deadline)
        for path in _inside(top, exclude):
            # As HEAD has it: a committed herd.toml neither deleted nor edited, else left out.
            unstage = (
                ["reset", "-q", head, "--"]
                if head
                else ["rm", "--cached", "-q", "--ignore-unmatch", "--"]
            )
            _run(top, *unstage, path, env=index, deadline=deadline)
        tree = _run(top, "write-tree", env=index, deadline=deadline).strip().decode("ascii")
    if head is None:
        base_tree = _run(top, "hash-object", "-t", "tree", "--stdin", stdin=b"", deadline=deadline)
    elif (loose_tree := gitfiles.commit_tree(paths, head)) != gitfiles.UNKNOWN:
        base_tree = loose_tree.encode("ascii")
    else:
        base_tree = _run(top, "rev-parse", f"{head}^{{tree}}", deadline=deadline)
    if tree == base_tree.strip().decode("ascii"):
        return None
    # Mostly neither the ref nor a copy exists yet: then no git process need list them.
    copies = [] if gitfiles.no_ref_like(paths, ref) else _copies(top, ref, deadline)
    earlier = tuple(name for name, *_ in copies)
    for name, sha, copy_tree, parents in copies:
        if copy_tree == tree and parents == (head or ""):
            return SavedRef(name, sha, tuple(e for e in earlier if e != name))
    written = _write_rescue_commit(paths, tree, head, message or "herd rescue")
    if written is None:
        parent = ["-p", head] if head is not None else []
        commit_args = ["commit-tree", tree, *parent, "-m", message or "herd rescue"]
        out = _run(top, *commit_args, env=RESCUE_IDENTITY, deadline=deadline)
        written = out.strip().decode("ascii")
    # The ref by git: its own process finishes the ref even when this daemon is killed then (a
    # lock file of ours left behind would refuse every later rescue of this run).
    name = _create_ref(top, ref, written, "herd rescue", earlier, deadline)
    return SavedRef(name, written, earlier)


def _write_rescue_commit(paths: GitPaths, tree: str, head: str | None, message: str) -> str | None:
    """The rescue commit written into .git without `git commit-tree` (`gitwrite`), its sha;
    None when git must write it (unusual config, an abbreviated or sha256 id)."""
    full_shas = len(tree) == 40 and (head is None or len(head) == 40)
    if not (full_shas and gitwrite.plain_config(paths)):
        return None
    at_s = int(time.time())
    identity = f"{RESCUE_IDENTITY['GIT_AUTHOR_NAME']} <{RESCUE_IDENTITY['GIT_AUTHOR_EMAIL']}>"
    body = gitwrite.commit_body(
        tree, head, identity, message, at_s, gitwrite.local_offset_min(at_s)
    )
    return gitwrite.write_commit(paths, body)


def keep_head(
    worktree: Path, ref: str, target_sha: str, deadline: GitDeadline | None = None
) -> SavedRef | None:
    """Before HEAD moves back to `target_sha`, save it on a new `ref` unless nothing is lost.

    Nothing is lost when there is no HEAD yet or HEAD is already an ancestor of the target.
    """
    _check_rev(target_sha)
    paths = _paths(worktree)
    top = paths.worktree
    head = gitfiles.head_sha(paths)
    if head == gitfiles.UNKNOWN:
        head = _head_or_none(top, deadline)
    if head is None or head == target_sha:  # HEAD is its own ancestor: nothing to keep
        return None
    ancestor = _run_raw(top, "merge-base", "--is-ancestor", head, target_sha, deadline=deadline)
    if ancestor.returncode == 0:
        return None
    copies = _copies(top, ref, deadline)
    for name, sha, *_ in copies:
        if sha == head:
            return SavedRef(name, sha)
    earlier = tuple(name for name, *_ in copies)
    name = _create_ref(top, ref, head, "herd: kept before a reset", earlier, deadline)
    return SavedRef(name, head, earlier)


def reset_worktree(
    worktree: Path, sha: str, keep: Sequence[Path] = (), deadline: GitDeadline | None = None
) -> None:
    """`git reset --hard sha` then `git clean -fd`: ignored files stay, untracked ones go.

    Paths in `keep` (herd.toml when it lives in the worktree) are never cleaned, and keep
    their bytes when committed: the person's edit is not the agent's work.
    Call only when no process of the run is alive. A leftover `index.lock` is removed only
    when no live process may hold it (a killed daemon's `git reset` can still be running):
    until `deadline`, we wait for it; after, GitError and nothing is reset.
    """
    paths = _paths(worktree)
    # Resetting to HEAD itself (a crash's restart from the last checkpoint) needs no lookup.
    full = sha if sha == gitfiles.head_sha(paths) else resolve_commit(worktree, sha)
    top = paths.worktree
    wait_index_free(top, paths.git_dir / "index.lock", deadline)
    kept = _read_kept(top, _inside(top, keep))
    _run(top, "reset", "--hard", "--quiet", full, deadline=deadline)
    for path, data in kept.items():  # a committed herd.toml the person edited stays edited
        with contextlib.suppress(OSError):
            if (top / path).read_bytes() != data:
                (top / path).write_bytes(data)
    excludes = [arg for path in _inside(top, keep) for arg in ("-e", "/" + path)]
    _run(top, "clean", "-f", "-d", "--quiet", *excludes, deadline=deadline)


def _read_kept(top: Path, paths: Sequence[str]) -> dict[str, bytes]:
    """The bytes of each kept file that exists, so that `reset --hard` cannot change them."""
    kept = {}
    for path in paths:
        with contextlib.suppress(OSError):
            kept[path] = (top / path).read_bytes()
    return kept


def _inside(top: Path, paths: Sequence[Path]) -> list[str]:
    """The `paths` that lie in the worktree `top`, relative to it; others are dropped."""
    found = []
    for path in paths:
        try:
            found.append(str(Path(path).resolve().relative_to(top.resolve())))
        except ValueError:
            continue
    return found


@contextmanager
def scratch_worktree(
    repo_worktree: Path, sha: str, dest: Path, deadline: GitDeadline | None = None
) -> Iterator[Path]:
    """A detached worktree of `sha` at `dest` for the block, removed afterwards (also on error).

    The checkout (filter drivers included) is bounded by `deadline`; a checkout that failed
    or was killed half-way is removed too. git runs from `dest`'s parent with `--git-dir`, so
    its process never works in the agent's worktree (a reset there would wait for it).
    """
    full = resolve_commit(repo_worktree, sha)
    paths = git_paths(repo_worktree)
    where = Path(dest).absolute()
    add = ("worktree", "add", "--detach", "--quiet", str(where), full)
    try:
        _run(where.parent, f"--git-dir={paths.git_dir}", *add, deadline=deadline)
        yield where
    finally:
        remove_scratch(paths.worktree, where)


def remove_scratch(top: Path, where: Path) -> None:
    """Remove the scratch worktree at `where` and its registration, whatever state it is in.

    Only this worktree's registration goes: `git worktree prune` would also forget every other
    worktree whose folder is missing right now (a person's worktree on an unmounted disk).
    """
    if where.exists():
        remove = ("worktree", "remove", "--force", "--force", str(where))
        if _run_raw(top, *remove).returncode == 0:
            return
    shutil.rmtree(where, ignore_errors=True)
    forget_worktree(git_paths(top).common_dir, where)


def forget_worktree(common_dir: Path, where: Path) -> bool:
    """Delete the registration (under `<common>/worktrees/`) of the worktree at `where`."""
    admin_root = common_dir / "worktrees"
    target = (where / ".git").absolute()
    try:
        admins = list(admin_root.iterdir())
    except OSError:
        return False
    for admin in admins:
        try:
            pointer = Path((admin / "gitdir").read_text().strip())
        except OSError:
            continue
        if pointer == target:
            shutil.rmtree(admin, ignore_errors=True)
            return True
    return False


def read_at(worktree: Path, rev: str, path: str, max_bytes: int | None = None) -> bytes | None:
    """The bytes of `path` (relative to the worktree top) at commit `rev`; None if absent.

    With `max_bytes`, a larger blob raises ValueError before it is read (an agent commits it).
    """
    _check_rev(rev)
    top = git_paths(worktree).worktree
    if max_bytes is not None:
        size = _run_raw(top, "cat-file", "-s", f"{rev}:{path}")
        if size.returncode != 0:
            return None
        if int(size.stdout) > max_bytes:
            raise ValueError(f"{path} at {rev} is {int(size.stdout)} bytes, over {max_bytes}")
    result = _run_raw(top, "show", f"{rev}:{path}")
    return result.stdout if result.returncode == 0 else None
