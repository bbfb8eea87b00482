"""Times as the contract writes them (ISO-8601 UTC with a Z) and back: the one place for both."""

from __future__ import annotations

import time
from datetime import UTC, datetime

EPOCH_MS_THRESHOLD = 100_000_000_000
"""An epoch value above this is in milliseconds (seconds would be the year 5138)."""


def utc_now() -> datetime:
    """Now, in UTC, from `time.time()`: herd's one wall clock (a test can shift it)."""
    return datetime.fromtimestamp(time.time(), UTC)


def iso(moment: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and a Z, as the store and the API write times."""
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def iso_seconds(moment: datetime) -> str:
    """ISO-8601 UTC to the second with a Z, as checkpoints and reports show times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str | None) -> datetime | None:
    """Read an ISO-8601 time as UTC (naive means UTC); None when absent or unreadable."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso_from_epoch(value: object) -> str | None:
    """An epoch time in seconds or milliseconds as `iso_seconds` text; None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    if seconds > EPOCH_MS_THRESHOLD:
        seconds /= 1000
    try:
        return iso_seconds(datetime.fromtimestamp(seconds, UTC))
    except (OverflowError, OSError, ValueError):
        return None
