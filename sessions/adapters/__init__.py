"""Adapters that read an agent's stdout lines: session id, usage, cost, turns, outcome, summary.

One module per output format; `PARSERS` maps each ``agent`` name of herd.toml to its adapter.
"""

from __future__ import annotations

from agentherd.sessions.adapters.aider import AiderParser
from agentherd.sessions.adapters.amp import AmpParser
from agentherd.sessions.adapters.base import OutputParser, valid_session_id
from agentherd.sessions.adapters.claude import ClaudeParser
from agentherd.sessions.adapters.codex import CodexParser
from agentherd.sessions.adapters.gemini import GeminiParser
from agentherd.sessions.adapters.opencode import OpenCodeParser
from agentherd.sessions.adapters.plain import PlainParser
from agentherd.sessions.adapters.usage import OUTCOME_KINDS, Outcome, Usage

__all__ = [
    "OUTCOME_KINDS",
    "PARSERS",
    "AiderParser",
    "AmpParser",
    "ClaudeParser",
    "CodexParser",
    "GeminiParser",
    "OpenCodeParser",
    "Outcome",
    "OutputParser",
    "PlainParser",
    "Usage",
    "make_parser",
    "valid_session_id",
]

PARSERS: dict[str, type[OutputParser]] = {
    "claude": ClaudeParser,
    "codex": CodexParser,
    "gemini": GeminiParser,
    "amp": AmpParser,
    "opencode": OpenCodeParser,
    "aider": AiderParser,
    "plain": PlainParser,
}
"""Adapter per ``agent`` name in herd.toml."""


def make_parser(
    agent: str, session_id: str | None = None, thread_usage: Usage | None = None
) -> OutputParser:
    """Return a fresh adapter for the agent named in herd.toml (ValueError if unknown).

    thread_usage: what earlier runs of the resumed thread used, for agents whose counters are
    cumulative over a thread (Codex); the others ignore it.
    """
    try:
        parser_class = PARSERS[agent]
    except KeyError:
        known = ", ".join(sorted(PARSERS))
        raise ValueError(f"unknown agent {agent!r}; expected one of: {known}") from None
    if parser_class is CodexParser:
        return CodexParser(session_id, thread_usage=thread_usage)
    return parser_class(session_id)
