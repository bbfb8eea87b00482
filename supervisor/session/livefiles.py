"""Codex's rollout and Gemini CLI's chats read while their run lives: spend before the turn ends.

Neither CLI prints usage before its turn ends, and a turn is the whole run; each writes every
answer's tokens to its own files as it goes (`codex_rollout`, `gemini_chats`). While a run of
either lives, its files are looked at every `agent_files_poll_s` (`agent_files_idle_poll_s`
while no budget limit counts its spend): only the bytes added since the last look are read, at
most LOOK_BYTES a look, in a worker thread. What a look found is taken as a killed run's read
is (Codex: the thread's running total, never below what stdout showed; Gemini: each answer
once by id), so the figures the run prints at its end, which replace it, count nothing twice.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.adapters import CodexParser, GeminiParser, codex_rollout, gemini_chats
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
        self, parser: CodexParser | GeminiParser, started_at: str, env: Mapping[str, str]
    ) -> None:
        self.parser = parser
        self.files: dict[Path, GrowingFile] = {}
        self.looks = 0
        self._total: dict[str, Any] = {}
        """Codex: the thread's last running total read."""
        self._tally = ChatTally(started_at)
        """Gemini: the run's answers read, once each."""
        if isinstance(parser, CodexParser):
            self.folder = codex_rollout.codex_home(env)
        else:
            self.folder = gemini_chats.gemini_dir(env)

    def look(self, session_id: str) -> Any:
        """Read what the run's files gained (worker thread): what `take` takes."""
        self.looks += 1
        # A thread's rollout is one file (a resume appends to it): once found, Codex's folder
        # of every day's sessions is not listed again.
        again = isinstance(self.parser, GeminiParser) and self.looks % SEARCH_EVERY_LOOKS == 0
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
        if isinstance(self.parser, CodexParser):
            return dict(self._total)
        return self._tally.models()

    @property
    def _max_bytes(self) -> int:
        if isinstance(self.parser, CodexParser):
            return codex_rollout.MAX_ROLLOUT_BYTES
        return gemini_chats.MAX_CHAT_BYTES

    @property
    def _max_line_bytes(self) -> int:
        if isinstance(self.parser, CodexParser):
            return codex_rollout.MAX_ENTRY_BYTES
        return gemini_chats.MAX_ENTRY_BYTES

    def _paths(self, folder: Path, session_id: str) -> list[Path]:
        if isinstance(self.parser, CodexParser):
            return codex_rollout.rollout_paths(folder, session_id)
        return gemini_chats.chat_paths(folder, session_id)

    def _read_line(self, raw: bytes) -> None:
        """Take one line: a Codex running total, or the Gemini answers it holds."""
        codex = isinstance(self.parser, CodexParser)
        if not (codex_rollout.may_hold_a_total(raw) if codex else b'"tokens"' in raw):
            return
        try:
            value = json.loads(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            return
        if codex:
            self._total = codex_rollout.total_in(value) or self._total
        else:
            for answer in gemini_chats.answers_in(value):
                self._tally.add(answer)

    def take(self, found: Any) -> bool:
        """Take a look's findings into the parser (on the loop); True if its usage changed."""
        if not found:
            return False
        if isinstance(self.parser, CodexParser):
            return self.parser.recover_from_rollout(found)
        return self.parser.take_chat_tokens(found)


def live_files(parser: object, record: RunRecord, config: SessionConfig) -> LiveFiles | None:
    """The live read a run needs (Codex and Gemini CLI), or None."""
    if not isinstance(parser, CodexParser | GeminiParser) or not record.started_at:
        return None
    env = run_environment(os.environ, config, record.run, 0, {})
    return LiveFiles(parser, record.started_at, env)


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
