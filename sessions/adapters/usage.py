"""What an agent reported it used (tokens, cost, turns) and how it said its run ended."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens, cost and turns reported by one agent process."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    cost_estimated: bool = False
    turns: int = 0
    cost_unpriced_model: str | None = None
    """A model the agent named that herd has no price for: the cost leaves its tokens out
    (None, or only what the agent reported itself), never priced as another model."""
    uncounted_requests: int = 0
    """Requests a kill cut off mid-answer: billed in part or whole, counted in no figure."""
    output_estimate_tokens: int = 0
    """How much of output_tokens is herd's estimate from printed content, not a reported figure.

    Live only (not in to_json): a running Claude message prints its start figure until its
    result; the estimate may later be replaced by a lower true figure (CostGuard allows that).
    """

    @property
    def total_tokens(self) -> int:
        """All tokens: input, output, cache read and cache write."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def __add__(self, other: Usage) -> Usage:
        """Add the usage of separate processes; a cost is None only when neither reported one."""
        if self.cost_usd is None and other.cost_usd is None:
            cost_usd: float | None = None
        else:
            cost_usd = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=cost_usd,
            cost_estimated=self.cost_estimated or other.cost_estimated,
            turns=self.turns + other.turns,
            cost_unpriced_model=self.cost_unpriced_model or other.cost_unpriced_model,
            uncounted_requests=self.uncounted_requests + other.uncounted_requests,
            output_estimate_tokens=self.output_estimate_tokens + other.output_estimate_tokens,
        )

    def to_json(self) -> dict[str, Any]:
        """Return the CONTRACT.md ``usage`` object."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "cost_estimated": self.cost_estimated,
            "cost_unpriced_model": self.cost_unpriced_model,
            "turns": self.turns,
            "uncounted_requests": self.uncounted_requests,
        }

    @classmethod
    def from_json(cls, data: Any) -> Usage:
        """Read a ``usage`` object written by to_json; bad or missing fields become defaults."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            input_tokens=as_count(data.get("input_tokens")) or 0,
            output_tokens=as_count(data.get("output_tokens")) or 0,
            cache_read_tokens=as_count(data.get("cache_read_tokens")) or 0,
            cache_write_tokens=as_count(data.get("cache_write_tokens")) or 0,
            cost_usd=as_amount(data.get("cost_usd")),
            cost_estimated=data.get("cost_estimated") is True,
            turns=as_count(data.get("turns")) or 0,
            cost_unpriced_model=model_name(data.get("cost_unpriced_model")),
            uncounted_requests=as_count(data.get("uncounted_requests")) or 0,
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an agent process said its run ended (from its terminal event)."""

    finished: bool
    is_error: bool
    subtype: str | None
    message: str | None
    rate_limited: bool = False
    terminal_reason: str | None = None
    kind: str = "success"
    """How the run ended, one of OUTCOME_KINDS; the supervisor decides the next move on it."""
    resets_at: str | None = None
    """ISO 8601 time a rate or usage limit lifts, where the agent's output gives one."""
    permission_denials: tuple[str, ...] = ()
    """Tools the agent was refused (e.g. "Write", "Bash"); non-empty means it could not work."""


@dataclass(frozen=True, slots=True)
class LimitWait:
    """The agent is retrying a rate-limited request by itself."""

    since: str
    """When it said so first (ISO)."""
    retry_at: str | None
    """When it tries again, where it said (ISO)."""
    attempt: int | None
    """Its attempt that failed, where it said."""

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since, "retry_at": self.retry_at, "attempt": self.attempt}


OUTCOME_KINDS = ("success", "error", "max-turns", "rate-limit", "permission-denied")
"""The ways a run can end, as the adapters read them from the agent's own result."""


def as_count(value: object) -> int | None:
    """Return value as a non-negative token/turn count, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


MAX_MODEL_CHARS = 80
"""A model name longer than this is not one (a record written by something else)."""


def model_name(value: object) -> str | None:
    """Return value as a model's name (short printable text), or None."""
    if isinstance(value, str) and 0 < len(value) <= MAX_MODEL_CHARS and value.isprintable():
        return value
    return None


def as_amount(value: object) -> float | None:
    """Return value as a non-negative finite amount of money, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    amount = float(value)
    return amount if math.isfinite(amount) and amount >= 0 else None
