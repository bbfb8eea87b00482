"""Aider ``--message`` runs: text only, one ``Tokens: ...`` line (and a ``Cost:`` part) per reply.

``Tokens: 12k sent, 1.2k cache write, 3.4k cache hit, 512 received. Cost: $0.01 message, $0.23
session.`` (the cost part may be on the next line, or absent for a model without pricing).
Token figures are rounded by Aider (``12k``), so totals are as exact as Aider prints them.
``sent`` already counts the cache figures: input is ``sent`` less cache write and cache hit.
Each reply's tokens are added; the ``session`` cost is a running total (the last one wins,
never lower), else ``message`` costs are added. Aider prints no session id and no result line:
its exit code decides the outcome (the supervisor's rule when ``outcome`` is None).
"""

from __future__ import annotations

import re
from typing import ClassVar

from agentherd.sessions.adapters.agent import Agent, Preset
from agentherd.sessions.adapters.base import MAX_TEXT_CHARS, OutputParser, display_text
from agentherd.sessions.adapters.usage import Usage

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
_NUMBER = r"(\d+(?:\.\d+)?)\s*([kKmM]?)"
_TOKENS = re.compile(rf"Tokens:\s*{_NUMBER}\s+sent(?P<rest>.*)")
_PART = re.compile(rf"{_NUMBER}\s+(cache write|cache hit|received)")
_MODEL = re.compile(r"^(?:Main model|Model):\s*(\S{1,80})\s+with\b")
"""Aider's banner names the model it answers with (its weak model writes commit messages)."""
_COST = re.compile(r"Cost:\s*\$(\d+(?:\.\d+)?)\s+message(?:,\s*\$(\d+(?:\.\d+)?)\s+session)?")


def _count(figure: str, unit: str) -> int:
    """An Aider token figure (``12k``, ``1.2M``, ``512``) as a count."""
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[unit.lower()]
    return round(float(figure) * scale)


class AiderParser(OutputParser):
    """Aider's text output: token and cost lines; the last other line is kept for display."""

    agent: ClassVar[str] = "aider"
    priced_by_table: ClassVar[bool] = True

    def __init__(self, session_id: str | None = None) -> None:
        """Start empty; Aider has no session id (continuity is its chat history and git)."""
        super().__init__(session_id)
        self._tokens = [0, 0, 0, 0]
        self._replies = 0
        self._session_cost_usd: float | None = None
        self._message_costs_usd: float | None = None
        self.model: str | None = None
        """The main model from Aider's banner (`Main model: NAME with ...`)."""

    @property
    def usage(self) -> Usage:
        """Summed reply tokens; the session cost (or the summed message costs), else None."""
        cost = self._session_cost_usd
        if cost is None:
            cost = self._message_costs_usd
        return Usage(
            input_tokens=self._tokens[0],
            output_tokens=self._tokens[1],
            cache_read_tokens=self._tokens[2],
            cache_write_tokens=self._tokens[3],
            cost_usd=cost,
            turns=self._replies,
        )

    @property
    def models(self) -> dict[str, tuple[int, int, int, int]]:
        """The banner's main model with every reply's tokens (herd prices them by it)."""
        if self.model is None:
            return {}
        tokens = self._tokens
        return {self.model: (tokens[0], tokens[1], tokens[2], tokens[3])}

    def _on_other_line(self, line: bytes) -> None:
        """Read a token or cost line; keep any other non-blank line for display."""
        raw = _ANSI.sub(b"", line[: MAX_TEXT_CHARS * 4]).strip()
        if not raw:
            return
        text = raw.decode("utf-8", errors="replace")
        banner = _MODEL.match(text)
        if banner is not None and self.model is None:
            self.model = banner.group(1)
        found = _TOKENS.search(text)
        if found is not None:
            self._on_tokens(found)
        cost = _COST.search(text)
        if cost is not None:
            self._on_cost(cost)
        if found is None and cost is None:
            self.last_text = display_text(text)
        else:
            self.parsed_lines += 1
            self.skipped_lines -= 1  # counted as skipped by the JSON reader; it was read

    def _on_tokens(self, found: re.Match[str]) -> None:
        """Add one reply's tokens."""
        sent = _count(found.group(1), found.group(2))
        parts = {name: _count(figure, unit) for figure, unit, name in _PART.findall(found["rest"])}
        write, hit = parts.get("cache write", 0), parts.get("cache hit", 0)
        self._tokens[0] += max(0, sent - write - hit)
        self._tokens[1] += parts.get("received", 0)
        self._tokens[2] += hit
        self._tokens[3] += write
        self._replies += 1

    def _on_cost(self, found: re.Match[str]) -> None:
        """Take the running session cost (never lower) and add the message cost."""
        message_usd = float(found.group(1))
        self._message_costs_usd = (self._message_costs_usd or 0.0) + message_usd
        if found.group(2) is not None:
            session_usd = float(found.group(2))
            if self._session_cost_usd is not None and session_usd < self._session_cost_usd:
                self.warn("aider session cost went backwards: the larger figure is kept")
            else:
                self._session_cost_usd = session_usd


AGENT = Agent(
    name="aider",
    key_env=("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"),
    parser=AiderParser,
    order=6,
    preset=Preset(
        prompt_at=-1,
        command=(
            "aider",
            "--yes-always",
            "--message",
            "Implement the next failing feature in feature_list.json.",
        ),
    ),
)
"""Aider prints no cost for a model it has no price for, and no session id to resume."""
