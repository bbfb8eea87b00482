"""Adapters that read an agent's stdout lines: session id, usage, cost, turns, outcome, summary.

One module per output format; `PARSERS` maps each ``agent`` name of herd.toml to its adapter.
"""

from __future__ import annotations

from agentherd.sessions.adapters.base import OutputParser, valid_session_id
from agentherd.sessions.adapters.claude import ClaudeParser
from agentherd.sessions.adapters.plain import PlainParser
from agentherd.sessions.adapters.usage import Outcome, Usage

__all__ = [
    "PARSERS",
    "ClaudeParser",
    "Outcome",
    "OutputParser",
    "PlainParser",
    "Usage",
    "make_parser",
    "valid_session_id",
]

PARSERS: dict[str, type[OutputParser]] = {
    "claude": ClaudeParser,
    "amp": ClaudeParser,
    "plain": PlainParser,
    # Until their own adapters land, these read plain JSON usage lines only.
    "codex": PlainParser,
    "gemini": PlainParser,
    "opencode": PlainParser,
    "aider": PlainParser,
}
"""Adapter per ``agent`` name in herd.toml."""


def make_parser(agent: str, session_id: str | None = None) -> OutputParser:
    """Return a fresh adapter for the agent named in herd.toml (ValueError if unknown)."""
    try:
        parser_class = PARSERS[agent]
    except KeyError:
        known = ", ".join(sorted(PARSERS))
        raise ValueError(f"unknown agent {agent!r}; expected one of: {known}") from None
    return parser_class(session_id)
