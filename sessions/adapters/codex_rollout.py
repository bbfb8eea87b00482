"""Find and read the rollout file Codex keeps of a thread: a run's spend, live or killed.

Codex CLI (0.171) writes each thread to
``<codex home>/sessions/YYYY/MM/DD/rollout-<start time>-<thread id>.jsonl`` where
``<codex home>`` is ``$CODEX_HOME`` or ``$HOME/.codex``; ``codex exec resume`` appends to the
same file. As each model response completes it writes a ``token_usage_record`` line whose
``thread_token_usage`` is the thread's running total (the figure ``turn.completed`` prints on
stdout only when the turn ends), and once the response's tool calls are done an ``event_msg``
of payload type ``token_count`` whose ``info.total_token_usage`` says the same: the last of
either is what the thread has used so far, killed turn included, before its tools ran. Its
``turn_context``, ``function_call`` and ``function_call_output`` lines tell which commands the
sandbox refused (``codex_refusals``): stdout can miss them. Reading files is all this does;
the supervisor calls it off its event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from agentherd.sessions.adapters.base import valid_session_id
from agentherd.sessions.adapters.codex_refusals import RunRefusals
from agentherd.sessions.adapters.jsonlines import Stop, json_lines, never

MAX_ROLLOUT_BYTES = 256 * 1024 * 1024
"""A rollout file is read up to this size (its tail beyond is not read)."""

MAX_ENTRY_BYTES = 1024 * 1024
"""A rollout line longer than this is skipped unread (token counts are short lines)."""

_REFUSAL_MARKERS = (b'"turn_context"', b'"function_call"', b'"function_call_output"')
"""Only lines holding one of these are parsed when looking for refused commands."""

MAX_ROLLOUT_FILES = 16
"""At most this many files are opened for one thread."""


def codex_home(env: Mapping[str, str]) -> Path | None:
    """Codex's home folder for a run's environment, or None when it has no home."""
    configured = env.get("CODEX_HOME", "").strip()
    if configured:
        return Path(configured)
    home = env.get("HOME", "").strip()
    return Path(home) / ".codex" if home else None


def rollout_paths(home: Path, thread_id: str) -> list[Path]:
    """The rollout files of a thread, oldest first; [] when none or the id is unsafe."""
    if not valid_session_id(thread_id) or thread_id in (".", ".."):
        return []
    try:
        found = sorted((home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    except OSError:
        return []
    return [path for path in found[:MAX_ROLLOUT_FILES] if path.is_file()]


def read_thread_total(
    paths: list[Path], max_bytes: int = MAX_ROLLOUT_BYTES, stop: Stop = never
) -> dict[str, Any]:
    """The last ``total_token_usage`` the rollout files hold ({} when none); `stop` ends the
    read between chunks (with the last total read so far)."""
    total: dict[str, Any] = {}
    lines = json_lines(paths, max_bytes, MAX_ENTRY_BYTES, may_hold_a_total, stop)
    for value in lines:
        found = total_in(value)
        if found:
            total = found
    return total


def may_hold_a_total(raw: bytes) -> bool:
    """Whether a rollout line may hold the thread's running total (only those are parsed)."""
    return b'"total_token_usage"' in raw or b'"thread_token_usage"' in raw


def _may_hold_a_refusal(raw: bytes) -> bool:
    return any(marker in raw for marker in _REFUSAL_MARKERS)


def total_in(value: object) -> dict[str, Any] | None:
    """A ``token_usage_record`` line's ``thread_token_usage`` or a ``token_count`` line's
    ``info.total_token_usage``, or None (any other line)."""
    if not isinstance(value, dict) or not isinstance(value.get("payload"), dict):
        return None
    payload = value["payload"]
    if value.get("type") == "token_usage_record":
        thread = payload.get("thread_token_usage")
        return thread if isinstance(thread, dict) else None
    if payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    return total if isinstance(total, dict) else None


def read_run_refusals(
    paths: list[Path], since: datetime, max_bytes: int = MAX_ROLLOUT_BYTES, stop: Stop = never
) -> list[str] | None:
    """The commands refused in the run that started at since; None when its sandbox is unknown.
    `stop` ends the read between chunks (with what was read so far)."""
    refusals = RunRefusals(since)
    for value in json_lines(paths, max_bytes, MAX_ENTRY_BYTES, _may_hold_a_refusal, stop):
        refusals.take(value)
    return refusals.verdict
