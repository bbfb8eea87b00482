"""Durations as people write them in herd.toml: 90s, 20m, 6h, 1h30m, or a number of seconds."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

MAX_DURATION_S = 366 * 86400.0
"""The longest duration herd accepts (366d): longer is a typo, and every deadline herd computes
from it stays far inside what floats, sleeps and datetimes can hold."""


def parse_duration(value: object) -> float:
    """Seconds for a duration value, or ValueError with a message a person can act on."""
    if isinstance(value, bool):
        raise ValueError("must be a duration like 90s, 20m, 6h, 1h30m or a number of seconds")
    if isinstance(value, int | float):
        return _bounded(value)
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if text and re.fullmatch(r"\d+(\.\d+)?", text):
            return _bounded(float(text))
        if text and _PART.sub("", text) == "" and _PART.findall(text):
            return _bounded(sum(float(n) * _UNIT_S[unit] for n, unit in _PART.findall(text)))
    raise ValueError(
        f"{value!r} is not a duration; write it like 90s, 20m, 6h, 1h30m or a number of seconds"
    )


def _bounded(seconds: float) -> float:
    """`seconds` as a float when it is a usable duration: not nan, not negative, not endless."""
    # nan compares false with everything, so it would pass every later check: refuse it first.
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValueError(f"{seconds} is not a duration; write it like 90s, 20m, 6h or 1h30m")
    if seconds < 0:
        raise ValueError("must not be negative")
    if seconds > MAX_DURATION_S:  # also ints too large for a float
        raise ValueError("must be at most 366d; write it like 90s, 20m, 6h or 1h30m")
    return float(seconds)


def format_duration(seconds: float) -> str:
    """Render seconds compactly for people: 45s, 12m, 3h05m."""
    total_s = int(round(seconds))
    if total_s < 60:
        return f"{total_s}s"
    minutes, secs = divmod(total_s, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs and minutes < 10 else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
