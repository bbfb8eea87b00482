"""Shared pieces of reading how a run ended: its kind, a limit's reset time, denied tools."""

from __future__ import annotations

import re

from agentherd.sessions.adapters.base import display_text
from agentherd.sessions.adapters.usage import Outcome
from agentherd.sessions.times import iso_from_epoch, iso_seconds, parse_iso

RATE_LIMIT_TEXT = re.compile(
    r"hit your .{0,40}limit|rate.?limit|usage limit|quota|resource.?exhausted|"
    r"too many requests|\b429\b",
    re.IGNORECASE,
)
"""Words an agent's error uses when a rate or usage limit stopped it."""

MAX_DENIALS = 32
"""Denied tools kept per run (names, deduplicated)."""

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/ -]{1,64}")


def reset_time_iso(value: object) -> str | None:
    """A limit's reset time as ISO 8601 UTC: from an epoch (s or ms) or ISO text; else None."""
    if isinstance(value, str):
        moment = parse_iso(value.strip()[:64])
        return iso_seconds(moment) if moment is not None else None
    return iso_from_epoch(value)


def tool_name(value: object) -> str | None:
    """A denied tool's name when it is short printable text, else None."""
    if isinstance(value, str) and _TOOL_NAME.fullmatch(value.strip()):
        return value.strip()
    return None


def add_denial(denials: list[str], name: str | None) -> None:
    """Add a denied tool's name once, up to MAX_DENIALS."""
    if name is not None and name not in denials and len(denials) < MAX_DENIALS:
        denials.append(name)


def ended(
    *,
    is_error: bool,
    subtype: str | None,
    message: object,
    rate_limited: bool = False,
    max_turns: bool = False,
    denials: list[str] | tuple[str, ...] = (),
    terminal_reason: str | None = None,
    resets_at: str | None = None,
) -> Outcome:
    """The Outcome of a run that printed its end; kind decided in one order for every agent.

    A rate limit wins (the run can be retried later unchanged), then max turns, then denied
    permissions (even on a "success": the agent could not do its work), then any other error.
    """
    if is_error and rate_limited:
        kind = "rate-limit"
    elif max_turns:
        kind = "max-turns"
    elif denials:
        kind = "permission-denied"
    elif is_error:
        kind = "error"
    else:
        kind = "success"
    return Outcome(
        finished=True,
        is_error=is_error,
        subtype=subtype[:64] if isinstance(subtype, str) else None,
        message=display_text(message),
        rate_limited=is_error and rate_limited,
        terminal_reason=terminal_reason[:64] if isinstance(terminal_reason, str) else None,
        kind=kind,
        resets_at=resets_at if is_error and rate_limited else None,
        permission_denials=tuple(denials),
    )
