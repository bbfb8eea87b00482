"""A rescue's commit written straight into `.git`, without a `git commit-tree` process.

A crash's relaunch waited for six git processes in a row (5-20 ms each, far more on a busy
machine); `commit-tree` only writes one small loose object. Here it is written as git writes it
(compressed under a temporary name, then linked into place, never replacing an object), for
plain config only: anything unusual (sha256, a shared repository, a commit encoding, included
config) answers None and the caller runs git as before. The ref stays git's (`update-ref`): its
own process finishes even when the daemon is killed meanwhile, where a lock file of ours left
behind would refuse every later rescue of that run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
import zlib
from pathlib import Path

from agentherd.sessions.checkpoint import GitPaths

# Config that changes what git would write (object format, file modes, encodings) or
# that we cannot see through (includes, per-worktree config): then git does the writing.
_UNUSUAL_CONFIG_RE = re.compile(
    rb"objectformat|sharedrepository|commitencoding|include|worktreeconfig|fsync",
    re.IGNORECASE,
)


_ENV_GIT_DECIDES = (
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DEFAULT_HASH",
)
"""Environment that moves or changes what git writes: then git does the writing."""


def _config_files(paths: GitPaths) -> list[Path]:
    """The config files git would read for this repository: system, global, repository."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else "")
    found = [paths.common_dir / "config"]
    if not os.environ.get("GIT_CONFIG_NOSYSTEM"):
        found.append(Path(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    if os.environ.get("GIT_CONFIG_GLOBAL"):
        found.append(Path(os.environ["GIT_CONFIG_GLOBAL"]))
    else:
        found += [Path(f"{xdg}/git/config"), Path(f"{home}/.gitconfig")] if home else []
    return found


def plain_config(paths: GitPaths) -> bool:
    """True when no config git reads asks for anything these writers do not do."""
    if any(os.environ.get(name) for name in _ENV_GIT_DECIDES):
        return False
    for path in _config_files(paths):
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if _UNUSUAL_CONFIG_RE.search(text):
            return False
    return True


def commit_body(
    tree: str, parent: str | None, identity: str, message: str, at_s: int, offset_min: int
) -> bytes:
    """The bytes `git commit-tree` stores for this commit (no signature, no encoding header)."""
    sign = "-" if offset_min < 0 else "+"
    zone = f"{sign}{abs(offset_min) // 60:02d}{abs(offset_min) % 60:02d}"
    stamp = f"{identity} {at_s} {zone}"
    lines = [f"tree {tree}"] + ([f"parent {parent}"] if parent else [])
    lines += [f"author {stamp}", f"committer {stamp}", ""]
    text = message if message.endswith("\n") else message + "\n"
    return ("\n".join(lines) + "\n" + text).encode("utf-8")


def local_offset_min(at_s: int) -> int:
    """The local time zone's offset from UTC at `at_s`, in minutes (as git writes it)."""
    return (time.localtime(at_s).tm_gmtoff or 0) // 60


def write_commit(paths: GitPaths, body: bytes) -> str | None:
    """Store `body` as a loose commit object; its sha, or None (then ask git)."""
    raw = b"commit %d\0" % len(body) + body
    sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
    folder = paths.common_dir / "objects" / sha[:2]
    final = folder / sha[2:]
    try:
        folder.mkdir(exist_ok=True)
        if final.exists():
            return sha  # the same bytes are there already (objects never change)
        handle, temporary = tempfile.mkstemp(prefix="tmp_obj_", dir=folder)
        try:
            # Level 1 and no fsync: git's defaults for a loose object (core.looseCompression,
            # core.fsync without loose-object), as `add` wrote the tree's blobs just before.
            with os.fdopen(handle, "wb") as out:
                out.write(zlib.compress(raw, 1))
            os.chmod(temporary, 0o444)
            try:
                os.link(temporary, final)  # as git does: never replace an existing object
            except FileExistsError:
                pass
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    except OSError:
        return None
    return sha
