"""The `diff` operation: what a checkpoint or the uncommitted work changed, files and +/- first,
each file's text on demand, bounded. The daemon and the offline reader answer it alike."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentherd.sessions import diffpick
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.times import iso_seconds
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.git import changeset
from agentherd.supervisor.git.gitproc import GitError
from agentherd.supervisor.git.gitrun import NotAGitRepo

MAX_FILES = 2000
"""The most files one reply lists; the reply says when more changed."""
FILE_TEXT_MAX_BYTES = 256 << 10
"""One file's diff text is cut here (and says so)."""
TOTAL_TEXT_MAX_BYTES = 2 << 20
"""All the texts of one reply together: far below the wire's 16 MiB, escaped as JSON."""
CHECKPOINTS_LISTED = 500


def checkpoint_json(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint as the picker lists it."""
    return {
        "sha": checkpoint.sha,
        "short": checkpoint.short_sha,
        "at": iso_seconds(checkpoint.at),
        "subject": checkpoint.subject,
        "verified": checkpoint.verified,
        "files": len(checkpoint.files),
        "insertions": checkpoint.insertions,
        "deletions": checkpoint.deletions,
    }


def answer(
    session: str, worktree: Path, checkpoints: Sequence[Checkpoint], args: dict[str, Any]
) -> dict[str, Any]:
    """The `diff` reply for `args` (checkpoint, against, work, file, texts); ApiError
    `unknown-checkpoint` for a checkpoint the session does not have."""
    against: diffpick.Against = "verified" if args.get("against") == "verified" else "previous"
    try:
        chosen = diffpick.pick(checkpoints, args.get("checkpoint"), against, bool(args.get("work")))
    except diffpick.PickError as exc:
        raise ApiError("unknown-checkpoint", f"{session}: {exc}") from None
    reply: dict[str, Any] = {
        "session": session,
        "checkpoints": [checkpoint_json(c) for c in reversed(checkpoints)],
        "work": chosen.head is None,
        "target": None if chosen.target is None else checkpoint_json(chosen.target),
        "against": against,
        "base_label": chosen.label,
        "base": chosen.base,
        "files": [],
        "files_truncated": False,
        "texts": {},
        "texts_truncated": False,
        "error": None,
    }
    try:
        base = chosen.base or changeset.parent_or_empty(worktree, chosen.parent_of or "")
        reply["base"] = base
        files, more = changeset.changed_files(worktree, base, chosen.head, MAX_FILES)
        reply["files"] = [f.to_json() for f in files]
        reply["files_truncated"] = more
        wanted = args.get("file")
        if wanted is not None:
            files = [f for f in files if wanted in (f.path, f.old_path)]  # none: no text
        if wanted is not None or args.get("texts"):
            reply["texts"], reply["texts_truncated"] = _texts(worktree, base, chosen.head, files)
    except (GitError, NotAGitRepo, ValueError) as exc:
        reply["error"] = str(exc)
    return reply


def _texts(
    worktree: Path, base: str, head: str | None, files: Sequence[changeset.FileChange]
) -> tuple[dict[str, dict[str, Any]], bool]:
    """Each file's text, in order, until the reply's total bound; whether some were left out."""
    texts: dict[str, dict[str, Any]] = {}
    left_bytes = TOTAL_TEXT_MAX_BYTES
    for change in files:
        if left_bytes <= 0:
            return texts, True
        cap = min(FILE_TEXT_MAX_BYTES, left_bytes)
        text, cut = changeset.file_diff(worktree, base, head, change, cap)
        left_bytes -= len(text.encode("utf-8", "replace"))
        texts[change.path] = {"text": text, "truncated": cut}
    return texts, False
