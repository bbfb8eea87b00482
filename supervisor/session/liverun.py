"""A run being watched: its identity, output reader and exit, and what its end means."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from agentherd.sessions.adapters import AGENTS, OutputParser
from agentherd.sessions.adapters.lastline import LastLine
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.lines import LineSplitter
from agentherd.sessions.records import RunRecord
from agentherd.supervisor.files import logcap
from agentherd.supervisor.files.fleetreader import Reading
from agentherd.supervisor.files.paths import OUTPUT_FILE
from agentherd.supervisor.files.tailer import LogTailer
from agentherd.supervisor.process import runid
from agentherd.supervisor.session import agentusage

LAST_LINE_CHARS = 400
"""The dashboard shows one line per session; longer lines are cut before they are stored."""


class LiveRun:
    """A run this daemon is watching: its record, identity, output reader and exit."""

    def __init__(
        self,
        record: RunRecord,
        identity: runid.RunIdentity,
        folder: Path,
        parser: OutputParser,
        process: Process | None,
        config: SessionConfig,
    ) -> None:
        self.record = record
        self.config = config
        """The configuration the run was launched with (a reload changes only later runs)."""
        self.identity = identity
        self.folder = folder
        self.parser = parser
        self.process = process
        self.tailer = LogTailer(folder / OUTPUT_FILE)
        self.log_cap = logcap.RunningLogCap(folder / OUTPUT_FILE)
        self.log_grew = anyio.Event()
        """Set by the watcher when the log changed: the cap guard looks at once."""
        self.log_capped_reported = 0
        """Dropped bytes the last `log-capped` event told of."""
        self.log_capped_at = 0.0
        self.log_guarded: anyio.Event | None = None
        """Set once the log's cap guard, if one was started, made its last check."""
        self.splitter = LineSplitter()
        self.shown = LastLine(parser.summarize, LAST_LINE_CHARS)
        """The run's last line a person can read, summarised only when asked."""
        self.exit: runid.ExitInfo | None = None
        self.exited = anyio.Event()
        self.drained = anyio.Event()
        self.reading: Reading | None = None
        self.chatty = False
        """The last read found output: the log is read again after its rest, unwatched."""
        """Its place in the fleet's reader while its output is followed."""
        self.agent_files = agentusage.AgentFilesReader()
        """Reads the agent's own files once the run ended; a stop cancels it."""
        self.started_monotonic = time.monotonic()
        self.handled = False
        self.paused = False
        self.resume_checked = False
        """A resumed run's conversation was compared with the stored one (resumecheck)."""

    @property
    def last_line(self) -> str:
        """The summary of the run's newest output line that shows anything."""
        return self.shown.text

    @last_line.setter
    def last_line(self, value: str) -> None:
        self.shown.text = value


def output_written_at(live: LiveRun | None) -> float | None:
    """When the run's agent last wrote output the follower has not read yet (wall time); None
    when all of it is read (its time is counted already: a wall clock set back must not make
    old output new), or without a run or a file."""
    if live is None:
        return None
    try:
        stat = (live.folder / OUTPUT_FILE).stat()
    except OSError:
        return None
    return stat.st_mtime if stat.st_size > live.tailer.offset else None


RESUME_REFUSED_PHRASES = ("No conversation found", "Error resuming session:")
"""What an agent's error result says when it cannot resume the session id it was given."""


def outcome_name(outcome: Any, agent: str, info: runid.ExitInfo, interactive: bool = False) -> str:
    """success | agent-error | rate-limit | permission-denied | resume-refused | no-result |
    exit N | signal SIGX | exit unknown. An `interactive` run's agent draws its own interface
    and never prints a print mode's result line: its clean exit is a success."""
    if outcome is not None:
        kind = getattr(outcome, "kind", None)
        if kind in ("rate-limit", "permission-denied"):
            return str(kind)
        if outcome.is_error and any(
            phrase in (outcome.message or "") for phrase in RESUME_REFUSED_PHRASES
        ):
            return "resume-refused"
        if outcome.is_error:
            return "rate-limit" if getattr(outcome, "rate_limited", False) else "agent-error"
        if outcome.finished and info.exit_code in (0, None) and info.signal is None:
            return "success"
    if info.clean:
        # A structured agent that exits 0 without its final result line did not finish.
        declared = AGENTS.get(agent)
        waits_result = declared is not None and declared.ends_with_result and not interactive
        return "no-result" if waits_result else "success"
    return info.describe()
