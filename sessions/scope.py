"""`scope`: gitwildmatch-style patterns of the paths a session may change; the rest is drift."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache


def _translate(pattern: str) -> str:
    """A regex body for one glob: `**` crosses folders, `*` and `?` do not."""
    out = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", index + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[index + 1 : end].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    """One pattern as git reads it: no inner slash matches at any depth; a folder, all in it."""
    body = pattern.strip()
    folder = body.endswith("/")
    body = body.strip("/") if folder else body
    anchored = "/" in body.lstrip("/") or body.startswith("/")
    regex = _translate(body.lstrip("/"))
    prefix = "" if anchored else "(?:.*/)?"
    suffix = "/.*" if folder else "(?:/.*)?"
    return re.compile(f"^{prefix}{regex}{suffix}$")


def in_scope(path: str, patterns: Sequence[str]) -> bool:
    """True when `path` (relative to the worktree) matches one of `patterns`."""
    return any(_compile(pattern).match(path) for pattern in patterns)


def outside(paths: Iterable[str], patterns: Sequence[str], always: Iterable[str] = ()) -> list[str]:
    """The paths no pattern covers (none when there is no scope); `always` are never drift."""
    if not patterns:
        return []
    allowed = set(always)
    return [path for path in paths if path not in allowed and not in_scope(path, patterns)]
