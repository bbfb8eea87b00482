"""The adapter base: feed it an agent's stdout lines, read what the agent reported so far.

Agent output is untrusted: a line that does not parse, or a field of the wrong type, is
skipped (and counted), never raised. See reference/agent-formats.md sections 1, 8 and 9.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar, Self

from agentherd.sessions.adapters.eventwords import is_quiet
from agentherd.sessions.adapters.summary import load_json, summarize_decoded
from agentherd.sessions.adapters.usage import LimitWait, Outcome, Usage

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:][A-Za-z0-9_.:-]{0,127}")
"""A session id that is safe as one argv element: 1-128 chars, no leading "-"."""

MAX_TEXT_CHARS = 4000
"""Texts kept for display (last assistant text, outcome message) are cut to this length."""

MAX_WARNINGS = 20
"""Distinct warnings kept per run; later ones are only counted (output can repeat a fault)."""


def valid_session_id(value: str) -> bool:
    """Return True when value may be put into argv as a session id."""
    return isinstance(value, str) and SESSION_ID_PATTERN.fullmatch(value) is not None


def display_text(value: object) -> str | None:
    """Return value cut to MAX_TEXT_CHARS when it is a string, else None."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_TEXT_CHARS else value[: MAX_TEXT_CHARS - 1] + "…"


class OutputParser:
    """Base adapter: feed it stdout lines, read what the agent reported so far."""

    agent: ClassVar[str] = "plain"

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; session_id is the id this process resumes, if any."""
        self._initial_session_id = (
            session_id if session_id and valid_session_id(session_id) else None
        )
        self.session_id: str | None = self._initial_session_id
        self.reported_session_id: str | None = None
        """The first safe id the output named: a resumed run's proof of its conversation."""
        self.outcome: Outcome | None = None
        self.skipped_lines = 0
        self.parsed_lines = 0
        self.rate_limit_resets_at: str | None = None
        self.last_text: str | None = None
        self.result_text: str | None = None
        """The agent's final answer, where its output marks one."""
        self.refused_session_ids = 0
        """Session ids the output gave that are unsafe in argv (refused, never used)."""
        self.warnings: list[str] = []
        """What was odd in the output (refused ids, totals going backwards); MAX_WARNINGS kept."""
        self.warning_count = 0
        self.awaiting_answer = False
        """The agent sent the model something (its prompt, a tool's result) and no answer has
        printed since: a run killed now loses that request, which no figure anywhere counts."""
        self._rate_limited = False
        self.limit_wait: LimitWait | None = None
        """The agent is retrying a rate-limited request by itself (until it prints anything
        else): herd shows it waiting on the limit, not working."""
        self.limit_earlier: LimitWait | None = None
        """The wait before the JSON line being read: a retry after a retry keeps its `since`."""

    @classmethod
    def for_run(cls, session_id: str | None, thread_usage: Usage | None) -> Self:
        """A fresh adapter for one run; thread_usage (what earlier runs of the resumed thread
        used) matters only to agents whose counters are cumulative over a thread (Codex)."""
        return cls(session_id)

    @property
    def usage(self) -> Usage:
        """Tokens, cost and turns reported so far by this process."""
        return Usage()

    priced_by_table: ClassVar[bool] = False
    """The agent's own cost figure is known to leave out what it does not count (Aider's): where
    herd's table prices every model it names, herd's estimate replaces it."""

    @property
    def models(self) -> dict[str, tuple[int, int, int, int]]:
        """Tokens (input, output, cache read, cache write) per model the agent named; empty
        for an agent that names none (its estimate is its usual model's)."""
        return {}

    @property
    def rate_limited(self) -> bool:
        """True while the agent reports that a usage limit rejected it."""
        return self._rate_limited

    def feed_line(self, line: bytes) -> None:
        """Read one stdout line (without its newline); never raises."""
        self._feed(line)

    def feed_lines(self, lines: Sequence[bytes], max_chars: int) -> str:
        """Read stdout lines; return the summary of the last one that shows anything, or "".

        Each line is decoded once: its summary is made from the value the adapter decoded, and
        only for the lines at the end that are shown (a burst of output shows its last line).
        """
        values = self.decode_lines(lines)
        for line, value in zip(reversed(lines), reversed(values), strict=True):
            shown = self.summarize(line, value, max_chars)
            if shown.strip():
                return shown
        return ""

    def decode_lines(self, lines: Sequence[bytes]) -> list[object | None]:
        """Read stdout lines; return the JSON value each decoded to (None: not JSON), for a
        summary made later (`LastLine`) without decoding them again."""
        return [self._feed(line) for line in lines]

    def summarize(self, line: bytes, value: object | None, max_chars: int) -> str:
        """One line a person can read for an output line that decoded to value (None: not JSON);
        "" for a turn or step marker, so that a run's last line is what the agent did."""
        return "" if is_quiet(value) else summarize_decoded(line, value, max_chars)

    def _feed(self, line: bytes) -> object | None:
        """Read one line; return the JSON value it decoded to (None when it is not JSON)."""
        value = load_json(line)
        if value is None:
            self.skipped_lines += 1
            self._on_other_line(line)
            return None
        # The agent moved on, unless this line's handler says it waits again (from `earlier`).
        self.limit_earlier, self.limit_wait = self.limit_wait, None
        if type(value) is dict:  # one object a line, as every stream prints: no list for it
            try:
                self._on_object(value)
            except Exception:  # untrusted input must never raise; count it as skipped
                self.skipped_lines += 1
                return value
            self.parsed_lines += 1
            return value
        objects = value if isinstance(value, list) else [value]
        handled = False
        for obj in objects:
            if not isinstance(obj, dict):
                continue
            try:
                self._on_object(obj)
            except Exception:  # untrusted input must never raise; count it as skipped
                continue
            handled = True
        if handled:
            self.parsed_lines += 1
        else:
            self.skipped_lines += 1
        return value

    def warn(self, text: str) -> None:
        """Note something odd in the output once (bounded); never raises."""
        self.warning_count += 1
        if text not in self.warnings and len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)

    @property
    def resumed_session_id(self) -> str | None:
        """The conversation this process was started to resume, if any (and safe)."""
        return self._initial_session_id

    def learn_session_id(self, value: object) -> None:
        """Take the conversation id the agent named elsewhere (an interactive run's hooks),
        checked as one its output named."""
        self._set_session_id(value)

    def _set_session_id(self, value: object) -> None:
        """Record a reported session id when it is safe to use; refuse and count any other."""
        if value is None or (
            value == self.session_id and type(value) is str and self.reported_session_id
        ):
            return  # the id every line repeats was checked when it first came
        if isinstance(value, str) and valid_session_id(value):
            self.session_id = value
            if self.reported_session_id is None:
                self.reported_session_id = value
            return
        self.refused_session_ids += 1
        shown = value[:40] if isinstance(value, str) else type(value).__name__
        self.warn(f"refused an unsafe {self.agent} session id {shown!r}: it is never put in argv")

    def _on_object(self, obj: dict[str, Any]) -> None:
        """Handle one JSON object from the stream."""

    def _on_other_line(self, line: bytes) -> None:
        """Handle a line that is not JSON (by default: nothing)."""
