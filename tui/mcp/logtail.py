"""A readable, bounded tail of a run's output for `herd_logs`: no control byte reaches a model."""

from __future__ import annotations

from pathlib import Path

from agentherd.sessions.adapters.summary import summarize

TAIL_MAX_BYTES = 256 << 10
"""At most this much of the end of a log is read, however many lines are asked for."""

LINE_CHARS = 2000
"""A line is cut here (with "…"): a model reads what happened, not a whole file dump."""


def readable_tail(path: Path, lines: int) -> tuple[list[str], bool]:
    """The last `lines` lines of the log, summarised and inert; and whether more came before."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            start = max(0, size - TAIL_MAX_BYTES)
            handle.seek(start)
            data = handle.read(size - start)
    except FileNotFoundError:
        return [], False
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    if start > 0 and raw:
        raw.pop(0)  # begins mid-line
    # The log cap punches a hole in a long running log: its bytes read as zeros.
    kept = [line for line in (r.replace(b"\0", b"") for r in raw) if line.strip()]
    shown = kept[-lines:] if lines else []
    return [summarize(line, LINE_CHARS) for line in shown], start > 0 or len(kept) > len(shown)
