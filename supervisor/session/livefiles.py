"""An agent's own files read while its run lives: spend before the turn ends, or at all.

Codex and Gemini CLI print usage only when their turn ends, and a turn is the whole run; an
interactive run prints none at all (its terminal shows the agent's interface). Each CLI writes
every answer's tokens to its own files as it goes (`codex_rollout`, `gemini_chats`, Claude
Code's transcript, `claude_transcript`). While such a run lives, its files are looked at every
`agent_files_poll_s` (`agent_files_idle_poll_s` while no budget limit counts its spend): only
the bytes added since the last look are read, at most LOOK_BYTES a look, in a worker thread.
What a look found is taken as a killed run's read is (Codex: the thread's running total, never
below what stdout showed; Gemini: each answer once by id; Claude: each message's last figure
by id), so the figures the run prints at its end, which replace it, count nothing twice.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.adapters import (
    ClaudeParser,
    CodexParser,
    GeminiParser,
    claude_transcript,
    codex_rollout,
    gemini_chats,
)
from agentherd.sessions.adapters.claude_tokens import transcript_messages
from agentherd.sessions.adapters.gemini import ChatTally
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.launchspec import run_environment
from agentherd.sessions.records import RunRecord
from agentherd.supervisor.files.growingfile import GrowingFile

if TYPE_CHECKING:
    from agentherd.supervisor.session.liverun import LiveRun

log = logging.getLogger("herd.session")

LOOK_BYTES = 4 * 1024 * 1024
"""A look reads at most this much of what was added (a long thread's rollout, read from its
start at a resume, takes a few looks)."""

SEARCH_EVERY_LOOKS = 10
"""The agent's folder is searched for the run's files at each look until one is found; Gemini's
then every this many looks (a resume starts a second chat file)."""


class LiveFiles:
    """One run's agent files as they grow: `look` in a worker thread, `take` on the loop."""

    def __init__(
        self,
        parser: ClaudeParser | CodexParser | GeminiParser,
        started_at: str,
        env: Mapping[str, str],
        cwd: str = "",
    ) -> None:
        self.parser = parser
        self.files: dict[Path, GrowingFile] = {}
        self.looks = 0
        self.started_at = started_at
        self.cwd = cwd
        """Claude: the folder its transcript is named after."""
        self._total: dict[str, Any] = {}
        """Codex: the thread's last running total read."""
        self._tally = ChatTally(started_at)
        """Gemini: the run's answers read, once each."""
        self._entries: list[Any] = []
        """Claude: the transcript entries with spend this look read."""
        if isinstance(parser, CodexParser):
            self.folder = codex_rollout.codex_home(env)
        elif isinstance(parser, ClaudeParser):
            self.folder = claude_transcript.claude_config_dir(env)
        else:
            self.folder = gemini_chats.gemini_dir(env)

    def look(self, session_id: str) -> Any:
        """Read what the run's files gained (worker thread): what `take` takes."""
        self.looks += 1
        # A thread's rollout is one file (a resume appends to it): once found, Codex's folder
        # of every day's sessions is not listed again. Gemini's resume starts a second chat
        # file, Claude's subagents files of their own: those are looked for again.
        codex = isinstance(self.parser, CodexParser)
        again = not codex and self.looks % SEARCH_EVERY_LOOKS == 0
        if self.folder is not None and (not self.files or again):
            for path in self._paths(self.folder, session_id):
                if path not in self.files:
                    self.files[path] = GrowingFile(path, self._max_line_bytes)
        left = LOOK_BYTES
        for growing in self.files.values():
            before = growing.offset
            # A file is read up to the bound a killed run's read has (its tail beyond is not).
            for raw in growing.read_new(min(left, self._max_bytes - before)):
                self._read_line(raw)
            left -= max(0, growing.offset - before)
            if left <= 0:
                break
        if codex:
            return dict(self._total)
        if isinstance(self.parser, ClaudeParser):
            entries, self._entries = self._entries, []
            return transcript_messages(entries, (), self.started_at)
        return self._tally.models()

    @property
    def _max_bytes(self) -> int:
        if isinstance(self.parser, CodexParser):
            return codex_rollout.MAX_ROLLOUT_BYTES
        if isinstance(self.parser, ClaudeParser):
            return claude_transcript.MAX_TRANSCRIPT_BYTES
        return gemini_chats.MAX_CHAT_BYTES

    @property
    def _max_line_bytes(self) -> int:
        if isinstance(self.parser, CodexParser):
            return codex_rollout.MAX_ENTRY_BYTES
        if isinstance(self.parser, ClaudeParser):
            return claude_transcript.MAX_ENTRY_BYTES
        return gemini_chats.MAX_ENTRY_BYTES

    def _paths(self, folder: Path, session_id: str) -> list[Path]:
        if isinstance(self.parser, CodexParser):
            return codex_rollout.rollout_paths(folder, session_id)
        if isinstance(self.parser, ClaudeParser):
            found = claude_transcript.transcript_path(folder, self.cwd, session_id)
            return [found, *claude_transcript.subagent_transcripts(found)] if found else []
        return gemini_chats.chat_paths(folder, session_id)

    def _read_line(self, raw: bytes) -> None:
        """Take one line: a Codex running total, the Gemini answers it holds, or a Claude
        message's usage."""
        if isinstance(self.parser, CodexParser):
            wanted = codex_rollout.may_hold_a_total(raw)
        elif isinstance(self.parser, ClaudeParser):
            wanted = claude_transcript.may_hold_spend(raw)
        else:
            wanted = b'"tokens"' in raw
        if not wanted:
            return
        try:
            value = json.loads(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            return
        if isinstance(self.parser, CodexParser):
            self._total = codex_rollout.total_in(value) or self._total
        elif isinstance(self.parser, ClaudeParser):
            self._entries.append(value)
        else:
            for answer in gemini_chats.answers_in(value):
                self._tally.add(answer)

    def take(self, found: Any) -> bool:
        """Take a look's findings into the parser (on the loop); True if its usage changed."""
        if not found:
            return False
        if isinstance(self.parser, CodexParser):
            return self.parser.recover_from_rollout(found)
        if isinstance(self.parser, ClaudeParser):
            return self.parser.take_transcript_messages(found)
        return self.parser.take_chat_tokens(found)


def live_files(parser: object, record: RunRecord, config: SessionConfig) -> LiveFiles | None:
    """The live read a run needs (Codex and Gemini CLI; Claude Code's interface, whose
    terminal prints no usage), or None."""
    if not isinstance(parser, ClaudeParser | CodexParser | GeminiParser) or not record.started_at:
        return None
    if isinstance(parser, ClaudeParser) and not config.interactive:
        return None  # its stream prints every message's usage as it comes
    env = run_environment(os.environ, config, record.run, 0, {})
    return LiveFiles(parser, record.started_at, env, record.cwd or str(config.cwd))


async def follow(live: LiveRun, poll_s: Callable[[], float], changed: Callable[[], None]) -> None:
    """Look at a live run's agent files until it ends; `changed` when its usage moved."""
    files = live_files(live.parser, live.record, live.config)
    if files is None:
        return
    while not live.exited.is_set():
        with anyio.move_on_after(poll_s()):
            await live.exited.wait()
        session_id = live.parser.session_id
        if live.exited.is_set() or session_id is None:
            continue  # an ended run's files are read by the end of the run, a killed one's whole
        try:
            found = await anyio.to_thread.run_sync(files.look, session_id, abandon_on_cancel=True)
        except OSError as exc:  # evidence herd reads, never a reason to fail
            log.info("run %d: its agent's files could not be read: %s", live.record.run, exc)
            continue
        if live.record.ended_at is None and files.take(found):
            changed()
