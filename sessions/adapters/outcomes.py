"""Shared pieces of reading how a run ended: its kind, a limit's reset time, denied tools."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentherd.sessions.adapters import resetwords
from agentherd.sessions.adapters.base import display_text
from agentherd.sessions.adapters.usage import Outcome
from agentherd.sessions.times import iso_from_epoch, iso_seconds, parse_iso, utc_now

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


_EPOCH_AFTER_BAR = re.compile(r"limit reached\|(\d{10,13})")
"""Older Claude Code: ``Claude AI usage limit reached|1750000000``."""

_CLOCK_AND_ZONE = re.compile(
    r"resets\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+){0,2})\)",
    re.IGNORECASE,
)
"""Claude Code: ``You've hit your limit · resets 1pm (Europe/Lisbon)``."""


def reset_time_in_text(
    text: str, now: datetime | None = None, zone: tzinfo | None = None
) -> str | None:
    """The reset time a limit message states: an epoch, a clock time in a named zone, a wait
    in words ("retry in 20s") or Codex's clock time in the agent's local `zone` (None: this
    machine's). A clock time is the next such moment after now; None when there is none."""
    found = _EPOCH_AFTER_BAR.search(text)
    if found is not None:
        return iso_from_epoch(int(found.group(1)))
    clock = _CLOCK_AND_ZONE.search(text)
    if clock is None:
        return resetwords.wait_in_text(text, now) or resetwords.clock_in_text(text, now, zone)
    hour, minute = int(clock.group(1)), int(clock.group(2) or 0)
    if not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if clock.group(3).lower() == "pm" else 0)
    try:
        zone = ZoneInfo(clock.group(4))
    except (ZoneInfoNotFoundError, ValueError):
        return None
    local_now = (now or utc_now()).astimezone(zone)
    moment = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= local_now:
        moment += timedelta(days=1)
    return iso_seconds(moment)


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
