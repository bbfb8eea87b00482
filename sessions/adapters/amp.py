"""Amp ``--stream-json``: Claude Code compatible lines, thread id ``T-<uuid>`` as session id.

Its documented ``result`` line has no ``total_cost_usd`` and no ``usage``, and its assistant
messages may have no ``id`` (each is then counted once as it comes). Amp bills by its own
plans, so herd's Claude price table is not applied: no cost means None.
"""

from __future__ import annotations

from typing import ClassVar

from agentherd.sessions.adapters.agent import MESSAGE, Agent, Preset
from agentherd.sessions.adapters.claude import ClaudeParser


class AmpParser(ClaudeParser):
    """Amp's Claude-compatible stream; never estimates a cost."""

    agent: ClassVar[str] = "amp"
    estimates_cost: ClassVar[bool] = False


AGENT = Agent(
    name="amp",
    key_env=("AMP_API_KEY",),
    parser=AmpParser,
    order=4,
    preset=Preset(
        prompt_at=2,
        command=(
            "amp",
            "-x",
            "Implement the next failing feature in feature_list.json.",
            "--stream-json",
        ),
        resume=("amp", "threads", "continue", "{session_id}", "-x", MESSAGE, "--stream-json"),
    ),
    price="claude-sonnet-4-5",
    reports_cost=True,
    ends_with_result=True,
)
