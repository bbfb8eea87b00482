"""Git facts read straight from `.git` (HEAD, refs, loose commits), without running git.

Each git process costs 5-20 ms of CPU and far more wall time on a loaded machine; a crash's
restart ran fifteen of them. These readers answer the common case from files and say
"don't know" (None from `find_paths`, UNKNOWN elsewhere) for anything unusual (reftable,
packed objects, symbolic ref chains, foreign ownership, odd config), and the caller asks git.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import Final

from agentherd.sessions.checkpoint import GitPaths

UNKNOWN: Final = "?"
"""A read that could not be answered from the files: ask git."""

_SHA_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_BARE_RE = re.compile(rb"^\s*(bare\s*=\s*true|worktree\s*=)", re.IGNORECASE | re.MULTILINE)
_SIMPLE_REF_RE = re.compile(r"refs/[A-Za-z0-9_/-]+(?:\.[0-9]+)?")
PER_WORKTREE_PREFIXES = ("refs/worktree/", "refs/bisect/", "refs/rewritten/")
"""Refs kept in the worktree's own git folder rather than the shared one."""
MAX_COMMIT_BYTES = 1 << 20
"""A loose commit larger than this is read by git (a huge message is no checkpoint's norm)."""


def _owned(path: Path) -> bool:
    """True when this user owns `path` (git refuses others' repositories: safe.directory)."""
    try:
        return os.stat(path).st_uid == os.geteuid()
    except OSError:
        return False


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _gitdir_of(top: Path) -> Path | None:
    """The git folder `top/.git` stands for (a folder, or a `gitdir:` file's target)."""
    dot_git = top / ".git"
    if dot_git.is_dir():
        return dot_git.resolve()
    try:
        text = dot_git.read_text("utf-8", "replace")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    return (top / text[len("gitdir:") :].strip()).resolve()


def find_paths(worktree: Path) -> GitPaths | None:
    """The worktree holding `worktree`, as `git rev-parse` would find it; None: ask git.

    Only a plain layout is answered: a `.git` folder (or `gitdir:` file) with HEAD, objects
    and refs, owned by this user, without reftable, `core.bare` or `core.worktree`.
    """
    try:
        start = Path(worktree).resolve()
    except OSError:
        return None
    if not start.is_dir():
        return None
    for here in (start, *start.parents):
        if _is_git_dir(here):
            return None  # inside a git folder itself: git's own answer is needed
        if not os.path.lexists(here / ".git"):
            continue
        git_dir = _gitdir_of(here)
        if git_dir is None or not (git_dir / "HEAD").is_file():
            return None
        try:
            common_rel = (git_dir / "commondir").read_text().strip()
        except FileNotFoundError:
            common = git_dir
        except OSError:
            return None
        else:
            common = (git_dir / common_rel).resolve()
        if not ((common / "objects").is_dir() and (common / "refs").is_dir()):
            return None
        if (common / "reftable").exists() or not (_owned(here) and _owned(common)):
            return None
        try:
            config = (common / "config").read_bytes()
        except OSError:
            return None
        if _BARE_RE.search(config):
            return None
        return GitPaths(worktree=here, git_dir=git_dir, common_dir=common)
    return None


def _loose_or_packed(paths: GitPaths, ref: str) -> str | None:
    """The sha stored for `ref` (None: no such ref), or UNKNOWN."""
    base = paths.git_dir if ref.startswith(PER_WORKTREE_PREFIXES) else paths.common_dir
    try:
        text = (base / ref).read_text("ascii").strip()
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return UNKNOWN  # a folder of that name, unreadable...
    else:
        return text if _SHA_RE.fullmatch(text) else UNKNOWN  # a symbolic ref: ask git
    packed = _packed_refs(paths)
    if packed is None:
        return UNKNOWN
    return packed.get(ref)


def _packed_refs(paths: GitPaths) -> dict[str, str] | None:
    """The packed refs by name ({} when there is no file); None when unreadable."""
    try:
        raw = (paths.common_dir / "packed-refs").read_bytes()
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    found = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line or line[0] in "#^":
            continue
        sha, _, name = line.partition(" ")
        found[name] = sha
    return found


def head_sha(paths: GitPaths) -> str | None:
    """The commit HEAD points at; None before the first commit; UNKNOWN: ask git."""
    try:
        text = (paths.git_dir / "HEAD").read_text("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return UNKNOWN
    if _SHA_RE.fullmatch(text):
        return text  # detached
    if not text.startswith("ref: "):
        return UNKNOWN
    ref = text[len("ref: ") :].strip()
    if not _SIMPLE_REF_RE.fullmatch(ref) or ".." in ref or "/." in ref:
        return UNKNOWN
    return _loose_or_packed(paths, ref)


def head_ref(paths: GitPaths) -> str | None:
    """The branch HEAD names (`refs/heads/main`); None when detached, unreadable or odd."""
    try:
        text = (paths.git_dir / "HEAD").read_text("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    ref = text.removeprefix("ref: ").strip()
    if ref == text or not _SIMPLE_REF_RE.fullmatch(ref) or ".." in ref or "/." in ref:
        return None
    return ref


LOG_TAIL_BYTES = 8192
"""How much of the end of `logs/HEAD` is read for its last entry (one line, its message first)."""


def logged_head(paths: GitPaths) -> str | None:
    """The commit the last entry of `logs/HEAD` moved HEAD to; None: no entry, or unreadable.

    git appends that entry before it moves the ref itself, so while a commit is under way the
    log already names the new commit and HEAD still the old one.
    """
    try:
        with open(paths.head_log, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - LOG_TAIL_BYTES))
            tail = log.read()
    except OSError:
        return None
    lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
    if len(lines) < 2 and size > LOG_TAIL_BYTES:
        return None  # the last line began before the bytes read
    fields = lines[-1].split(b" ", 2)
    if len(fields) < 3:
        return None
    moved_to = fields[1].decode("ascii", "replace")
    return moved_to if _SHA_RE.fullmatch(moved_to) else None


def no_ref_like(paths: GitPaths, ref: str) -> bool:
    """True when neither `ref` nor a numbered copy `ref.N` exists (False: maybe; ask git)."""
    if not _SIMPLE_REF_RE.fullmatch(ref) or ".." in ref:
        return False
    folder, _, leaf = ref.rpartition("/")
    base = paths.git_dir if ref.startswith(PER_WORKTREE_PREFIXES) else paths.common_dir
    try:
        names = os.listdir(base / folder)
    except FileNotFoundError:
        names = []
    except OSError:
        return False
    if any(name == leaf or name.startswith(f"{leaf}.") for name in names):
        return False
    packed = _packed_refs(paths)
    if packed is None:
        return False
    return not any(name == ref or name.startswith(f"{ref}.") for name in packed)


def valid_ref_name(ref: str) -> bool:
    """True for a ref name `git check-ref-format` surely accepts (False: maybe; ask git)."""
    if not _SIMPLE_REF_RE.fullmatch(ref):
        return False
    parts = ref.split("/")
    return all(part and not part.startswith(".") and not part.endswith(".lock") for part in parts)


def _commit_header(paths: GitPaths, sha: str) -> list[bytes] | None:
    """The header lines (tree, parents, author...) of the loose commit `sha`; None: ask git."""
    if not _SHA_RE.fullmatch(sha):
        return None
    try:
        with open(paths.common_dir / "objects" / sha[:2] / sha[2:], "rb") as handle:
            packed = handle.read(MAX_COMMIT_BYTES)
        # The object header, tree and parent lines are in the first few hundred bytes.
        head = zlib.decompressobj().decompress(packed, 4096)
    except (OSError, zlib.error):
        return None
    kind, _, body = head.partition(b"\0")
    lines = body.split(b"\n")
    if not kind.startswith(b"commit ") or len(lines) < 2 or not lines[0].startswith(b"tree "):
        return None
    return lines


def commit_tree(paths: GitPaths, sha: str) -> str:
    """The tree of the loose commit `sha`, or UNKNOWN (packed, elsewhere, not a commit)."""
    lines = _commit_header(paths, sha)
    if lines is None:
        return UNKNOWN
    tree = lines[0][5:].decode("ascii", "replace")
    return tree if _SHA_RE.fullmatch(tree) else UNKNOWN


def commit_parents(paths: GitPaths, sha: str) -> tuple[str, ...] | None:
    """The parents of the loose commit `sha` (none for a root commit); None: ask git."""
    lines = _commit_header(paths, sha)
    if lines is None:
        return None
    parents = []
    for line in lines[1:]:
        if not line.startswith(b"parent "):
            break
        parent = line[7:].decode("ascii", "replace")
        if not _SHA_RE.fullmatch(parent):
            return None
        parents.append(parent)
    if len(lines) <= len(parents) + 1:
        return None  # the header was cut before its end: more parents may follow
    return tuple(parents)
