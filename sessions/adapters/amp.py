"""Amp ``--stream-json``: Claude Code compatible lines, thread id ``T-<uuid>`` as session id.

Its documented ``result`` line has no ``total_cost_usd`` and no ``usage``, and its assistant
messages may have no ``id`` (each is then counted once as it comes). Amp bills by its own
plans, so herd's Claude price table is not applied: no cost means None.
"""

from __future__ import annotations

from typing import ClassVar

from agentherd.sessions.adapters.claude import ClaudeParser


class AmpParser(ClaudeParser):
    """Amp's Claude-compatible stream; never estimates a cost."""

    agent: ClassVar[str] = "amp"
    estimates_cost: ClassVar[bool] = False
