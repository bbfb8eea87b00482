"""A diff reply in words: a changed file's line, the heading, the stat. Read by attribute, so
the command line's fast path prints the daemon's plain JSON (tui/cli/fastview.py) with them,
without pydantic; the models are in diffreply.py."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # the models only name the types: importing them would bring pydantic
    from agentherd.sessions.diffreply import DiffFile, DiffReply

VERIFIED_WORDS: dict[bool | None, str] = {
    True: " (verified)",
    False: " (failed verification)",
    None: "",
}
"""A checkpoint's verification as a diff's heading says it."""
VERIFIED_MARKS: dict[bool | None, str] = {True: "✓", False: "✗", None: " "}
"""A checkpoint's verification as the picker marks it."""

_MARK = {"added": "A", "deleted": "D", "renamed": "R", "copied": "C", "untracked": "?"}


def file_line(change: DiffFile) -> str:
    """`M path  +12 -3`: a changed file as the stat lists it (a rename as `old -> new`)."""
    name = f"{change.old_path} -> {change.path}" if change.old_path else change.path
    counts = "binary" if change.binary else f"+{change.added or 0} -{change.removed or 0}"
    return f"{_MARK.get(change.status, 'M')} {name}  {counts}"


def heading(reply: DiffReply) -> str:
    """What the diff shows, in one line: the work or the checkpoint, against what."""
    if reply.target is None:
        what = f"{reply.session}: uncommitted work"
    else:
        seal = VERIFIED_WORDS[reply.target.verified]
        what = f"{reply.session}: checkpoint {reply.target.short}{seal} {reply.target.subject!r}"
    return f"{what} against {reply.base_label}"


def stat_lines(reply: DiffReply) -> list[str]:
    """The heading, one line per changed file, and the totals (or why there is nothing)."""
    lines = [heading(reply)]
    if reply.error:
        return [*lines, f"  cannot read this diff: {reply.error}"]
    lines += [f"  {file_line(change)}" for change in reply.files]
    if reply.files_truncated:
        lines.append("  … more files changed (truncated: the list stops here)")
    count = len(reply.files)
    noun = "file" if count == 1 else "files"
    added = sum(change.added or 0 for change in reply.files)
    removed = sum(change.removed or 0 for change in reply.files)
    lines.append(f"  {count} {noun} changed, +{added} -{removed}" if count else "  no changes")
    return lines
