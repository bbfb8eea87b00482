"""What an adapter needs beyond a run's own output: a thread's earlier spend, the agent's files.

Codex counts tokens over a whole thread, so a resumed run's adapter is given what the earlier
runs of that thread used (`thread_usage`). A run killed before its result line printed too
little: its spend is completed from what the agent keeps under its home (Claude Code's
transcript, Gemini CLI's chat files, Codex's rollout). A Codex run that finished has its
refused commands decided from the rollout too (stdout can miss them).
`AgentFilesReader` reads them in a worker thread, bounded in bytes, memory (running sums,
never a list of entries) and time, and cancellable: a stop never waits for it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio

from agentherd.sessions.adapters import (
    ClaudeParser,
    CodexParser,
    GeminiParser,
    OutputParser,
    Usage,
)
from agentherd.sessions.adapters.claude_tokens import transcript_messages
from agentherd.sessions.adapters.claude_transcript import (
    claude_config_dir,
    read_transcript,
    transcript_path,
)
from agentherd.sessions.adapters.codex_limits import read_limit_reset
from agentherd.sessions.adapters.codex_rollout import (
    codex_home,
    read_run_refusals,
    read_thread_total,
    rollout_paths,
)
from agentherd.sessions.adapters.gemini import gemini_chat_tokens
from agentherd.sessions.adapters.gemini_chats import chat_paths, gemini_dir, read_chat_answers
from agentherd.sessions.adapters.jsonlines import Stop
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.launchspec import run_environment
from agentherd.sessions.records import RunRecord
from agentherd.sessions.times import parse_iso
from agentherd.supervisor.files.store import Store

log = logging.getLogger("herd.session")

Found = TypeVar("Found")


def thread_usage(store: Store, session: str, agent_session_id: str | None) -> Usage | None:
    """The usage of the ended runs of a session that belong to the agent's thread (or None)."""
    if not agent_session_id:
        return None
    total = Usage()
    for run in store.runs(session):
        if run.agent_session_id == agent_session_id and run.ended_at is not None and run.usage:
            total = total + Usage.from_json(run.usage)
    return total


def recoverable(parser: OutputParser) -> bool:
    """True for an agent whose own files can complete a killed run (a thread's work to look);
    a plain command has none, and `herd down` ends hundreds of them."""
    return isinstance(parser, ClaudeParser | GeminiParser | CodexParser)


def reads_agent_files(parser: OutputParser) -> bool:
    """True when a run that just ended needs its agent's files: a killed run's spend, or a
    finished Codex run's refused commands."""
    return recoverable(parser) and (parser.outcome is None or isinstance(parser, CodexParser))


@dataclass(frozen=True)
class AgentFilesRead(Generic[Found]):
    """One read of a run's agent files: planned on the event loop from the parser, `read` in a
    worker thread (it touches nothing the loop uses), and what it found `take`n on the loop."""

    read: Callable[[Stop], tuple[Found, Path | None]]
    """Read the files, `Stop` asked between chunks: what was found, and the file (or None)."""
    take: Callable[[Found], bool]
    """Take it into the parser; True if the run's usage or outcome changed."""
    done: str
    """What the log says when it changed, before the file's name."""


def plan_read(
    parser: OutputParser, record: RunRecord, config: SessionConfig
) -> AgentFilesRead[Any] | None:
    """The read a run that just ended needs (a killed run's spend, or a finished Codex run's
    refused commands), or None."""
    env = run_environment(os.environ, config, record.run, 0, {})
    if isinstance(parser, CodexParser):
        if parser.outcome is None:
            return _codex(parser, env)
        return _codex_refusals(parser, record, env)
    if parser.outcome is not None:
        return None
    if isinstance(parser, ClaudeParser):
        return _claude(parser, record, config, env)
    if isinstance(parser, GeminiParser):
        return _gemini(parser, record, env)
    return None


def _codex_refusals(
    parser: CodexParser, record: RunRecord, env: Mapping[str, str]
) -> AgentFilesRead[tuple[list[str] | None, str | None]] | None:
    """A finished Codex run's refused commands, and a limit's reset its stdout did not give,
    from its rollout."""
    thread_id, home, since = parser.session_id, codex_home(env), parse_iso(record.started_at)
    if thread_id is None or home is None or since is None:
        return None

    def read(stop: Stop) -> tuple[tuple[list[str] | None, str | None], Path | None]:
        paths = rollout_paths(home, thread_id)
        refused = read_run_refusals(paths, since, stop=stop) if paths else None
        limited = parser.outcome is not None and parser.outcome.kind == "rate-limit"
        reset = read_limit_reset(paths, since, stop=stop) if paths and limited else None
        return (refused, reset), paths[-1] if paths else None

    def take(found: tuple[list[str] | None, str | None]) -> bool:
        refused, reset = found
        return parser.take_rollout_refusals(refused) | parser.take_rollout_reset(reset)

    return AgentFilesRead(read, take, "refused commands (or a limit's reset) from")


def _codex(parser: CodexParser, env: Mapping[str, str]) -> AgentFilesRead[dict[str, Any]] | None:
    """A Codex run killed mid-turn: its thread's total, from the rollout files."""
    thread_id, home = parser.session_id, codex_home(env)
    if thread_id is None or home is None:
        return None

    def read(stop: Stop) -> tuple[dict[str, Any], Path | None]:
        paths = rollout_paths(home, thread_id)
        return read_thread_total(paths, stop=stop), paths[-1] if paths else None

    return AgentFilesRead(read, parser.recover_from_rollout, "usage taken from")


def _gemini(
    parser: GeminiParser, record: RunRecord, env: Mapping[str, str]
) -> AgentFilesRead[dict[str, Any]] | None:
    """A Gemini run that ended without its result: its answers' tokens, from its chat files."""
    session_id, folder, since = parser.session_id, gemini_dir(env), record.started_at
    if session_id is None or folder is None or since is None:
        return None
    until = record.ended_at

    def read(stop: Stop) -> tuple[dict[str, Any], Path | None]:
        paths = chat_paths(folder, session_id)
        answers = read_chat_answers(paths, stop=stop)
        return gemini_chat_tokens(answers, since, until), paths[0].parent if paths else None

    return AgentFilesRead(read, parser.take_chat_tokens, "usage taken from")


def _claude(
    parser: ClaudeParser, record: RunRecord, config: SessionConfig, env: Mapping[str, str]
) -> AgentFilesRead[list[Any]] | None:
    """A Claude run that ended without its result: its messages' usage, from its transcript."""
    session_id, config_dir = parser.session_id, claude_config_dir(env)
    if session_id is None or config_dir is None:
        return None
    cwd, ids = record.cwd or str(config.cwd), parser.message_ids
    since, until = record.started_at, record.ended_at

    def read(stop: Stop) -> tuple[list[Any], Path | None]:
        path = transcript_path(config_dir, cwd, session_id)
        if path is None:
            return [], None
        return transcript_messages(read_transcript(path, stop=stop), ids, since, until), path

    return AgentFilesRead(read, parser.take_transcript_messages, "usage completed from")


class AgentFilesReader:
    """Reads one ended run's agent files off the event loop, in bounded chunks and time.

    `cancel` (a stop of the session) ends a read under way at once, as the daemon going down
    does; the worker thread sees it at its next chunk and ends too, and what it read is never
    taken. A stop's own read of the run it killed is bounded by time only.
    """

    def __init__(self) -> None:
        self._cancelled = threading.Event()
        self._scope: anyio.CancelScope | None = None

    def cancel(self) -> None:
        """End the read under way now, if there is one."""
        if self._scope is not None:
            self._cancelled.set()
            self._scope.cancel()

    async def read(
        self, parser: OutputParser, record: RunRecord, config: SessionConfig, limit_s: float
    ) -> bool:
        """Complete a run that ended from its agent's files within `limit_s` (what was read by
        then counts); True if its usage or outcome changed, False also when cancelled."""
        plan = plan_read(parser, record, config)
        if plan is None:
            return False
        bound = _Bound(self._cancelled, time.monotonic() + limit_s)
        try:
            with anyio.CancelScope() as self._scope:
                found, path = await anyio.to_thread.run_sync(
                    plan.read, bound, abandon_on_cancel=True
                )
                if bound.timed_out:
                    log.warning(
                        "run %d of %s: stopped reading %s after %.0f s; what was read counts",
                        record.run,
                        config.name,
                        path,
                        limit_s,
                    )
                changed = plan.take(found)
                if changed:
                    log.info("run %d of %s: %s %s", record.run, config.name, plan.done, path)
                return changed
        finally:
            self._scope = None
            self._cancelled.set()  # an abandoned thread stops at its next chunk
            self._cancelled = threading.Event()  # for a later read (the next of this run)
        log.info("run %d of %s: reading its agent's files was cancelled", record.run, config.name)
        return False


class _Bound:
    """The `Stop` of one read: cancelled, or past its deadline (noted: what was read counts)."""

    def __init__(self, cancelled: threading.Event, deadline: float) -> None:
        self.cancelled = cancelled
        self.deadline = deadline
        self.timed_out = False

    def __call__(self) -> bool:
        if self.cancelled.is_set():
            return True
        if time.monotonic() > self.deadline:
            self.timed_out = True
        return self.timed_out


def log_adapter_warnings(parser: OutputParser, run: int, session: str) -> None:
    """Write what was odd in a run's output (refused ids, totals going backwards) to the log."""
    for text in parser.warnings:
        log.warning("run %d of %s: %s", run, session, text)
    if parser.warning_count > len(parser.warnings):
        log.warning(
            "run %d of %s: %d more", run, session, parser.warning_count - len(parser.warnings)
        )
