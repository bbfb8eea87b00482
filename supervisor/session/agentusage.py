"""What an adapter needs beyond a run's own output: a thread's earlier spend, the agent's files.

Codex counts tokens over a whole thread, so a resumed run's adapter is given what the earlier
runs of that thread used (`thread_usage`). A run killed before its result line printed too
little: `recover_killed_run` completes it from what the agent keeps under its home (Claude
Code's transcript, Gemini CLI's chat files, Codex's rollout). A Codex run that finished has
its refused commands decided from the rollout too (`codex_refusals`: stdout can miss them).
File reads: call `read_agent_files` off the event loop.
"""

from __future__ import annotations

import logging
import os

from agentherd.sessions.adapters import (
    ClaudeParser,
    CodexParser,
    GeminiParser,
    OutputParser,
    Usage,
)
from agentherd.sessions.adapters.claude_transcript import (
    claude_config_dir,
    read_transcript,
    transcript_path,
)
from agentherd.sessions.adapters.codex_rollout import (
    codex_home,
    read_run_refusals,
    read_thread_total,
    rollout_paths,
)
from agentherd.sessions.adapters.gemini_chats import chat_paths, gemini_dir, read_chat_answers
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.launchspec import run_environment
from agentherd.sessions.records import RunRecord
from agentherd.sessions.times import parse_iso
from agentherd.supervisor.files.store import Store

log = logging.getLogger("herd.session")


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


def read_agent_files(parser: OutputParser, record: RunRecord, config: SessionConfig) -> bool:
    """Complete a run that ended from its agent's files; True if its usage or outcome changed."""
    if parser.outcome is None:
        return recover_killed_run(parser, record, config)
    if isinstance(parser, CodexParser):
        return codex_refusals(parser, record, config)
    return False


def codex_refusals(parser: CodexParser, record: RunRecord, config: SessionConfig) -> bool:
    """Decide a finished Codex run's refused commands from its rollout; True if changed."""
    thread_id = parser.session_id
    home = codex_home(run_environment(os.environ, config, record.run, 0, {}))
    since = parse_iso(record.started_at)
    if parser.outcome is None or thread_id is None or home is None or since is None:
        return False
    paths = rollout_paths(home, thread_id)
    refused = read_run_refusals(paths, since) if paths else None
    changed = parser.take_rollout_refusals(refused)
    if changed:
        log.info(
            "run %d of %s: refused commands from %s: %s",
            record.run,
            config.name,
            paths[-1],
            ", ".join(refused or ()) or "none",
        )
    return changed


def recover_killed_run(parser: OutputParser, record: RunRecord, config: SessionConfig) -> bool:
    """Complete a run that ended without its result from its agent's files; True if changed."""
    if isinstance(parser, ClaudeParser):
        return recover_killed_claude(parser, record, config)
    if isinstance(parser, GeminiParser):
        return recover_killed_gemini(parser, record, config)
    if isinstance(parser, CodexParser):
        return recover_killed_codex(parser, record, config)
    return False


def recover_killed_codex(parser: CodexParser, record: RunRecord, config: SessionConfig) -> bool:
    """Complete a Codex run killed mid-turn from its thread's rollout file; True if changed."""
    thread_id = parser.session_id
    home = codex_home(run_environment(os.environ, config, record.run, 0, {}))
    if parser.outcome is not None or thread_id is None or home is None:
        return False
    paths = rollout_paths(home, thread_id)
    changed = parser.recover_from_rollout(read_thread_total(paths))
    if changed:
        log.info("run %d of %s: usage taken from %s", record.run, config.name, paths[-1])
    return changed


def recover_killed_gemini(parser: GeminiParser, record: RunRecord, config: SessionConfig) -> bool:
    """Complete a Gemini run that ended without its result from its chat files; True if changed."""
    session_id = parser.session_id
    folder = gemini_dir(run_environment(os.environ, config, record.run, 0, {}))
    if parser.outcome is not None or session_id is None or folder is None:
        return False
    paths = chat_paths(folder, session_id)
    changed = parser.recover_from_chat(read_chat_answers(paths), record.started_at, record.ended_at)
    if changed:
        log.info("run %d of %s: usage taken from %s", record.run, config.name, paths[0].parent)
    return changed


def recover_killed_claude(parser: OutputParser, record: RunRecord, config: SessionConfig) -> bool:
    """Complete a Claude run that ended without its result from its transcript; True if changed."""
    if not isinstance(parser, ClaudeParser) or parser.outcome is not None:
        return False
    session_id = parser.session_id
    config_dir = claude_config_dir(run_environment(os.environ, config, record.run, 0, {}))
    if session_id is None or config_dir is None:
        return False
    path = transcript_path(config_dir, record.cwd or str(config.cwd), session_id)
    if path is None:
        return False
    changed = parser.recover_from_transcript(
        read_transcript(path), record.started_at, record.ended_at
    )
    if changed:
        log.info("run %d of %s: usage completed from %s", record.run, config.name, path)
    return changed


def log_adapter_warnings(parser: OutputParser, run: int, session: str) -> None:
    """Write what was odd in a run's output (refused ids, totals going backwards) to the log."""
    for text in parser.warnings:
        log.warning("run %d of %s: %s", run, session, text)
    if parser.warning_count > len(parser.warnings):
        log.warning(
            "run %d of %s: %d more", run, session, parser.warning_count - len(parser.warnings)
        )
