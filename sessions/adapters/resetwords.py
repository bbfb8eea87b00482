"""A limit's reset time said in words: "Please retry in 20s", "try again at 9:53 PM".

Agents print the API's words rather than its headers: Gemini CLI the API's "Please retry in
20s." and its own "Suggested retry after 20s."; Codex a stream's "Please try again in 120s."
and a usage limit's "try again at 9:53 PM" (in its own local time, or "at Dec 6th, 2026 7:53
PM" for another day). A reset time read here is the agent's, never herd's guess.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, tzinfo

from agentherd.sessions.times import iso, iso_seconds, utc_now

MAX_WAIT_S = 8 * 24 * 3600.0
"""A wait in words longer than this (weekly limits are 7 days) is not believed."""

_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

_UNIT = r"(?:milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)(?![a-z])"
_DURATION = rf"(?:\d+(?:\.\d+)?\s*{_UNIT}\s*(?:,|and)?\s*)+"
_WAIT = re.compile(
    r"(?:(?:re)?try(?:ing)?\s+(?:again\s+)?(?:in|after)|retry-after:?|\"?retryDelay\"?\s*:)\s*\"?"
    rf"({_DURATION}|\d+(?:\.\d+)?\b(?!\s*(?:%|:|[ap]m)))",
    re.IGNORECASE,
)
"""A wait after "retry in", "try again in", "retry after", "Retry-After:" or `retryDelay`."""

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)", re.IGNORECASE)

_CLOCK = re.compile(
    r"try again at\s+(?:([A-Z][a-z]{2})\s+(\d{1,2})(?:st|nd|rd|th)?,\s*(\d{4})\s+)?"
    r"(\d{1,2}):(\d{2})\s*([AP]M)\b",
    re.IGNORECASE,
)
"""Codex's usage limit: "try again at 9:53 PM" today, "at Dec 6th, 2026 7:53 PM" another day."""

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _seconds(words: str) -> float | None:
    """A duration in words ("6m0s", "2 minutes", "1h 30m", bare "120" seconds) in seconds."""
    total, found = 0.0, False
    for number, unit in _PART.findall(words):
        key = unit.lower()[:1] if unit else "s"
        if unit.lower().startswith("ms") or unit.lower().startswith("milli"):
            key = "ms"
        elif key == "m" and unit.lower().startswith("mo"):
            return None
        if key not in _UNIT_S:
            return None
        total += float(number) * _UNIT_S[key]
        found = True
    return total if found and total <= MAX_WAIT_S else None


def wait_in_text(text: str, now: datetime | None = None) -> str | None:
    """The reset time a wait in words gives ("retry in 20s": now plus 20 s), as ISO; else None."""
    found = _WAIT.search(text)
    if found is None:
        return None
    seconds = _seconds(found.group(1))
    if seconds is None:
        return None
    return iso((now or utc_now()) + timedelta(seconds=seconds))


def clock_in_text(text: str, now: datetime | None = None, zone: tzinfo | None = None) -> str | None:
    """Codex's "try again at 9:53 PM" (the next such time) or "at Dec 6th, 2026 7:53 PM", read
    in `zone` (the agent's local time; None: this machine's), as ISO; else None."""
    found = _CLOCK.search(text)
    if found is None:
        return None
    month, day, year, hour, minute, half = found.groups()
    hour_n, minute_n = int(hour), int(minute)
    if not 1 <= hour_n <= 12 or minute_n > 59:
        return None
    hour_n = hour_n % 12 + (12 if half.upper() == "PM" else 0)
    local_now = (now or utc_now()).astimezone(zone)
    try:
        if month is None:
            moment = local_now.replace(hour=hour_n, minute=minute_n, second=0, microsecond=0)
            if moment <= local_now:
                moment += timedelta(days=1)
        else:
            month_n = _MONTHS.index(month.lower()) + 1
            moment = local_now.replace(
                year=int(year),
                month=month_n,
                day=int(day),
                hour=hour_n,
                minute=minute_n,
                second=0,
                microsecond=0,
            )
    except ValueError:  # an unknown month or a day the month has not
        return None
    if (moment - local_now).total_seconds() > MAX_WAIT_S:
        return None
    return iso_seconds(moment)
