"""Find and read the transcript Claude Code keeps of a session, to recover a killed run's spend.

Claude Code appends every message of a session to
``<config>/projects/<cwd, each character other than a letter or digit made "->/<session>.jsonl``
where ``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``$HOME/.claude``. Each ``assistant`` entry is
written when its message is complete, so its ``message.usage`` has the final
``output_tokens`` that stdout lacks (stdout prints each message at its start). A resumed session
appends to the same file: ``ClaudeParser.recover_from_transcript`` keeps only the run's own
messages. Reading a file is all this does; the supervisor calls it off its event loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agentherd.sessions.adapters.base import valid_session_id
from agentherd.sessions.adapters.jsonlines import Stop, json_lines, never

MAX_TRANSCRIPT_BYTES = 256 * 1024 * 1024
"""A transcript is read up to this size (its tail beyond is not read)."""

MAX_ENTRY_BYTES = 4 * 1024 * 1024
"""A transcript line longer than this is skipped unread (a huge tool result, not usage)."""

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def claude_config_dir(env: Mapping[str, str]) -> Path | None:
    """Claude Code's config folder for a run's environment, or None when it has no home."""
    configured = env.get("CLAUDE_CONFIG_DIR", "").strip()
    if configured:
        return Path(configured)
    home = env.get("HOME", "").strip()
    return Path(home) / ".claude" if home else None


def transcript_path(config_dir: Path, cwd: str, session_id: str) -> Path | None:
    """The transcript file of a session started in cwd, or None when there is none.

    Looks in the project folder Claude Code names after cwd, then in any project folder (the
    naming rule has changed between releases). An unsafe session id is never made into a path.
    """
    if not valid_session_id(session_id) or session_id in (".", ".."):
        return None
    name = f"{session_id}.jsonl"
    projects = config_dir / "projects"
    direct = projects / _NOT_ALNUM.sub("-", cwd) / name
    if direct.is_file():
        return direct
    try:
        candidates = sorted(projects.glob(f"*/{name}"))
    except OSError:
        return None
    return next((path for path in candidates if path.is_file()), None)


def read_transcript(
    path: Path, max_bytes: int = MAX_TRANSCRIPT_BYTES, stop: Stop = never
) -> Iterator[dict[str, Any]]:
    """The assistant entries of a transcript that carry usage, one at a time, as read;
    unreadable lines are skipped, and `stop` ends the read between chunks."""
    lines = json_lines(
        [path],
        max_bytes,
        MAX_ENTRY_BYTES,
        lambda raw: b'"assistant"' in raw and b'"usage"' in raw,
        stop,
    )
    return (value for value in lines if isinstance(value, dict))
