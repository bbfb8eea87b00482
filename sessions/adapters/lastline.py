"""The one line a person sees for a run: its last output line that shows anything, summarised
only when it is read (a status, a snapshot), not for every line the agent prints."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentherd.sessions.adapters.summary import load_json

Summarize = Callable[[bytes, object | None, int], str]
"""An adapter's `summarize`: an output line and the value it decoded to -> one readable line."""

PENDING_LINES = 64
"""At most this many lines wait for a reader; past it they are summarised at once."""

PENDING_BYTES = 32 * 1024
"""At most this many bytes of lines wait, so memory stays small (their decoded values are
not kept: the one line summarised is decoded again, once per read instead of per line)."""


class LastLine:
    """The summary of the last line that shows anything, made lazily and exactly.

    Lines are held until `text` is read or the bound is passed; then they are summarised from
    the newest back until one shows something, as an eager reader of every line would have
    found. Past the bound, the lines just offered are summarised from the values the adapter
    decoded; an older one it decoded is decoded again (the adapters' value is `load_json`'s),
    one it did not (not JSON, part of a document) is summarised as such.
    """

    def __init__(self, summarize: Summarize, max_chars: int, text: str = "") -> None:
        """Start from `text` (an adopted run's stored last line)."""
        self._summarize = summarize
        self._max_chars = max_chars
        self._text = text
        self._pending: list[tuple[Sequence[bytes], list[bool] | None]] = []
        """Batches of lines as offered, each with which lines decoded (None: none did)."""
        self._pending_lines = 0
        self._pending_bytes = 0

    def offer(self, lines: Sequence[bytes], values: Sequence[object | None]) -> None:
        """Take lines the adapter read, with the values they decoded to."""
        if len(lines) != len(values):
            raise ValueError(f"{len(lines)} lines but {len(values)} values")
        if not lines:
            return
        # Kept as the batch it came in (plain text decodes to nothing: no per-line work here).
        undecoded = values.count(None) == len(values)
        self._pending.append((lines, None if undecoded else [v is not None for v in values]))
        self._pending_lines += len(lines)
        self._pending_bytes += sum(map(len, lines))
        if self._pending_lines > PENDING_LINES or self._pending_bytes > PENDING_BYTES:
            self._resolve(values)  # these lines' values are at hand: not decoded again

    @property
    def text(self) -> str:
        """The summary of the newest line that shows anything ("" before any)."""
        if self._pending:
            self._resolve()
        return self._text

    @text.setter
    def text(self, value: str) -> None:
        self._clear()
        self._text = value

    def _resolve(self, fresh: Sequence[object | None] | None = None) -> None:
        """Summarise from the newest line back; `fresh` holds the newest batch's values."""
        newest = len(self._pending) - 1
        for batch, (lines, decoded) in zip(
            range(newest, -1, -1), reversed(self._pending), strict=True
        ):
            for index in range(len(lines) - 1, -1, -1):
                line = lines[index]
                if fresh is not None and batch == newest:
                    value = fresh[index]
                else:
                    value = load_json(line) if decoded is not None and decoded[index] else None
                shown = self._summarize(line, value, self._max_chars)
                if shown.strip():
                    self._text = shown
                    self._clear()
                    return
        self._clear()

    def _clear(self) -> None:
        self._pending.clear()
        self._pending_lines = 0
        self._pending_bytes = 0
