"""A Codex limit's reset time from its rollout, where its stdout gives none.

Codex prints a usage limit without a time ("... or try again later.") when the API's error
body has no `resets_at`, yet it writes the limit windows the API's `x-codex-primary-*` and
`x-codex-secondary-*` headers gave into the rollout: an ``event_msg`` of payload type
``token_count`` with ``rate_limits.primary`` / ``secondary`` = ``{used_percent,
window_minutes, resets_at}`` (epoch seconds). A window used up (100 %) resets at its
``resets_at``: that is the agent's own reset time, read from its own file.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from agentherd.sessions.adapters import outcomes
from agentherd.sessions.adapters.jsonlines import Stop, json_lines, never
from agentherd.sessions.times import parse_iso

MAX_ROLLOUT_BYTES = 256 * 1024 * 1024
MAX_ENTRY_BYTES = 1024 * 1024
_WINDOWS = ("primary", "secondary")


def _used_up_reset(limits: object) -> str | None:
    """The latest reset of the windows used up in one `rate_limits` object, as ISO."""
    if not isinstance(limits, dict):
        return None
    found: list[str] = []
    for name in _WINDOWS:
        window = limits.get(name)
        if not isinstance(window, dict):
            continue
        used = window.get("used_percent")
        if isinstance(used, int | float) and not isinstance(used, bool) and used >= 100:
            reset = outcomes.reset_time_iso(window.get("resets_at"))
            if reset is not None:
                found.append(reset)
    return max(found) if found else None


def read_limit_reset(
    paths: list[Path], since: datetime, max_bytes: int = MAX_ROLLOUT_BYTES, stop: Stop = never
) -> str | None:
    """The reset of the limit the run that started at `since` used up, per its rollout; else
    None (the last such line written in the run wins)."""
    reset: str | None = None
    for value in json_lines(
        paths, max_bytes, MAX_ENTRY_BYTES, lambda raw: b'"rate_limits"' in raw, stop
    ):
        if not isinstance(value, dict):
            continue
        at = parse_iso(value.get("timestamp")) if isinstance(value.get("timestamp"), str) else None
        payload = value.get("payload")
        if at is None or at < since or not isinstance(payload, dict):
            continue
        found = _used_up_reset(payload.get("rate_limits"))
        if found is not None:
            reset = found
    return reset
