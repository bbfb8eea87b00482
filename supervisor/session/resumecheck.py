"""After a resume, prove the agent continued the stored conversation, and say so in events.

A resumed run is launched with the conversation id herd stored; the agent's first lines name
the conversation it is in. The same id, and the agent's own record of that conversation on
disk (Claude Code's transcript, Codex's rollout, Gemini CLI's chat file) which it appends to,
make a `resume-checked` event; another id is a `resume-mismatch` warning (the agent started a
new conversation: the earlier work is not in its context).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio

from agentherd.sessions.adapters import ClaudeParser, CodexParser, GeminiParser, OutputParser
from agentherd.sessions.adapters.claude_transcript import claude_config_dir, transcript_path
from agentherd.sessions.adapters.codex_rollout import codex_home, rollout_paths
from agentherd.sessions.adapters.gemini_chats import chat_paths, gemini_dir
from agentherd.sessions.launchspec import run_environment
from agentherd.sessions.records import Event
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen

log = logging.getLogger("herd.session")


def due(live: LiveRun) -> bool:
    """True once a resumed run's output named its conversation and it was not yet checked."""
    return (
        live.record.mode == "resume"
        and not live.resume_checked
        and live.parser.reported_session_id is not None
    )


def conversation_file(parser: OutputParser, env: dict[str, str], cwd: str, sid: str) -> Path | None:
    """The agent's own file of conversation `sid`, or None (none found, or an agent without)."""
    if isinstance(parser, ClaudeParser):
        folder = claude_config_dir(env)
        return transcript_path(folder, cwd, sid) if folder is not None else None
    if isinstance(parser, CodexParser):
        home = codex_home(env)
        paths = rollout_paths(home, sid) if home is not None else []
        return paths[-1] if paths else None
    if isinstance(parser, GeminiParser):
        folder = gemini_dir(env)
        paths = chat_paths(folder, sid) if folder is not None else []
        return paths[-1] if paths else None
    return None


async def check(pen: Pen, live: LiveRun) -> None:
    """Write how the resumed run's conversation compares with the stored one (`due` said so,
    and the caller marked it checked)."""
    record, parser = live.record, live.parser
    expected, got = parser.resumed_session_id, parser.reported_session_id
    if expected is None or got is None:
        return
    config = pen.config()
    env = run_environment(os.environ, config, record.run, 0, {})
    cwd = record.cwd or str(config.cwd)
    found = await anyio.to_thread.run_sync(conversation_file, parser, env, cwd, got)
    file = str(found) if found is not None else None
    event: Event
    if got == expected:
        where = f"; it appends to {file}" if file else ""
        event = pen.event(
            "resume-checked",
            f"run {record.run} continued conversation {got}{where}",
            record.run,
            agent_session_id=got,
            file=file,
        )
    else:
        event = pen.event(
            "resume-mismatch",
            f"run {record.run} was to resume conversation {expected} but the agent is in "
            f"{got}: the earlier work is not in its context",
            record.run,
            expected=expected,
            agent_session_id=got,
            file=file,
        )
    log.info("%s", event.message)
    pen.commit(event)
