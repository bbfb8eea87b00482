"""An agent waiting on a rate limit while it runs: it retries by itself and shows nothing else.

Gemini CLI retries a 429 up to ten times, minutes apart, printing only `Attempt 1 failed: ...
Retrying after 21432ms...` on stderr (which shares output.log with its JSON); Claude Code prints
a `system/api_retry` line. Until the agent prints anything else, the session is waiting on a
limit, not working: `herd status` and the dashboard say so.
"""

from __future__ import annotations

import re
from datetime import timedelta

from agentherd.sessions.adapters import outcomes, resetwords
from agentherd.sessions.adapters.usage import LimitWait
from agentherd.sessions.times import iso, utc_now


def waiting(earlier: LimitWait | None, delay_ms: float | None, attempt: int | None) -> LimitWait:
    """The wait after a failed attempt; `since` stays that of the first attempt in a row."""
    now = utc_now()
    retry_at = iso(now + timedelta(milliseconds=delay_ms)) if delay_ms is not None else None
    since = earlier.since if earlier is not None else iso(now) or ""
    return LimitWait(since=since, retry_at=retry_at, attempt=attempt)


def is_limit(text: str) -> bool:
    """The words of a failed attempt name a rate or usage limit (429, quota, "retry in 20s")."""
    return (
        outcomes.RATE_LIMIT_TEXT.search(text) is not None
        or resetwords.wait_in_text(text) is not None
    )


_ATTEMPT = re.compile(r"\bAttempt (\d{1,4}) failed")
_RETRYING = re.compile(r"Retrying (?:after (\d{1,9})ms|with backoff)")
_GIVEN_UP = re.compile(r"Max attempts reached")
MAX_ATTEMPT_CHARS = 2000
"""An attempt's message is read over its lines up to this length (a stack trace is longer)."""


class RetryLines:
    """Gemini CLI's stderr retry lines: `Attempt N failed: <message>` (the message may span
    lines), then `Retrying after Nms...` or `Retrying with backoff...`."""

    def __init__(self) -> None:
        self._attempt: int | None = None
        self._words = ""

    def feed(self, text: str, earlier: LimitWait | None) -> LimitWait | None:
        """Read one non-JSON line; the wait it shows, else `earlier` unchanged."""
        found = _ATTEMPT.search(text)
        if found is not None:
            self._attempt, self._words = int(found.group(1)), ""
        elif self._attempt is None:
            return earlier
        self._words = (self._words + "\n" + text)[:MAX_ATTEMPT_CHARS]
        if _GIVEN_UP.search(text):
            self._attempt = None
            return earlier
        retrying = _RETRYING.search(text)
        if retrying is None:
            return earlier
        attempt, words = self._attempt, self._words
        self._attempt = None
        if not is_limit(words):
            return earlier
        delay_ms = float(retrying.group(1)) if retrying.group(1) else None
        return waiting(earlier, delay_ms, attempt)
