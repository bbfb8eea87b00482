"""Adapters that read an agent's stdout lines: session id, usage, cost, turns, outcome, summary.

One module per output format. The registry of agents: every module of this package that
declares `AGENT = Agent(...)` (see `agent.py`) is one `agent` value of herd.toml; `AGENTS` holds
them in the order a person reads them, and every other list of agents is derived from it.
"""

from __future__ import annotations

import importlib
import pkgutil

from agentherd.sessions.adapters.agent import Agent, Preset
from agentherd.sessions.adapters.aider import AiderParser
from agentherd.sessions.adapters.amp import AmpParser
from agentherd.sessions.adapters.base import OutputParser, valid_session_id
from agentherd.sessions.adapters.claude import ClaudeParser
from agentherd.sessions.adapters.codex import CodexParser
from agentherd.sessions.adapters.gemini import GeminiParser
from agentherd.sessions.adapters.opencode import OpenCodeParser
from agentherd.sessions.adapters.plain import PlainParser
from agentherd.sessions.adapters.usage import OUTCOME_KINDS, Outcome, Usage
from agentherd.sessions.prices import Price, lookup

__all__ = [
    "AGENTS",
    "OUTCOME_KINDS",
    "PARSERS",
    "Agent",
    "AiderParser",
    "AmpParser",
    "ClaudeParser",
    "CodexParser",
    "GeminiParser",
    "OpenCodeParser",
    "Outcome",
    "OutputParser",
    "PlainParser",
    "Preset",
    "Usage",
    "make_parser",
    "price_for",
    "valid_session_id",
]


def _declared() -> dict[str, Agent]:
    """Every `AGENT` this package's modules declare, by name, in their `order`."""
    found: list[Agent] = []
    for module in pkgutil.iter_modules(__path__):
        declared = getattr(importlib.import_module(f"{__name__}.{module.name}"), "AGENT", None)
        if isinstance(declared, Agent):
            found.append(declared)
    return {agent.name: agent for agent in sorted(found, key=lambda agent: agent.order)}


AGENTS: dict[str, Agent] = _declared()
"""Each `agent` value of herd.toml -> what its adapter module declares."""

PARSERS: dict[str, type[OutputParser]] = {name: agent.parser for name, agent in AGENTS.items()}
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
    return parser_class.for_run(session_id, thread_usage)


def price_for(agent: str, name: str | None, table: dict[str, Price]) -> Price | None:
    """The price a session's estimate uses: its `price`, else its agent's usual model."""
    declared = AGENTS.get(agent)
    chosen = name or (declared.price if declared else None)
    return lookup(chosen, table) if chosen else None
