"""Find and read the transcript Claude Code keeps of a session, to recover a killed run's spend.

Claude Code appends every message of a session to
``<config>/projects/<cwd, each character other than a letter or digit made "->/<session>.jsonl``
where ``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``$HOME/.claude``. Each ``assistant`` entry is
written when its message is complete, so its ``message.usage`` has the final
``output_tokens`` that stdout lacks (stdout prints each message at its start). A resumed session
appends to the same file: ``ClaudeParser.recover_from_transcript`` keeps only the run's own
messages. A subagent's messages are in their own files,
``<session>/subagents/agent-*.jsonl`` beside it (`read_transcript` reads them too), and a
compaction leaves only a ``compact_boundary`` entry with its ``compactMetadata.preTokens``.
Reading a file is all this does; the supervisor calls it off its event loop.
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

MAX_SUBAGENT_FILES = 1000
"""A session's subagent transcripts read at most (a busy session starts a few dozen)."""

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


def subagent_transcripts(path: Path) -> list[Path]:
    """The transcripts of a session's subagents, beside its own (``<session>/subagents/``)."""
    try:
        found = sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl"))
    except OSError:
        return []
    return found[:MAX_SUBAGENT_FILES]


def may_hold_spend(raw: bytes) -> bool:
    """A line that may carry spend: an assistant message's usage, or a compaction's."""
    return (b'"assistant"' in raw and b'"usage"' in raw) or b'"compact_boundary"' in raw


def read_transcript(
    path: Path, max_bytes: int = MAX_TRANSCRIPT_BYTES, stop: Stop = never
) -> Iterator[dict[str, Any]]:
    """The entries of a transcript and its subagents' that carry spend (assistant usage,
    compaction boundaries), one at a time, as read; unreadable lines are skipped, and `stop`
    ends the read between chunks. `max_bytes` bounds each file."""
    lines = json_lines(
        [path, *subagent_transcripts(path)], max_bytes, MAX_ENTRY_BYTES, may_hold_spend, stop
    )
    return (value for value in lines if isinstance(value, dict))
