"""Gather one JSON document printed over many lines (pretty-printed), line by line.

A pretty-printed document opens with ``{`` or ``[`` alone at the start of a line and closes
with ``}`` or ``]`` alone at the start of a line; every line between is indented. So a line
that starts in column 0 inside the document is not part of it (stderr noise, or a JSONL line
of another format) and is handed back to the caller instead of being buffered.
"""

from __future__ import annotations

import json
from enum import Enum

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""A document larger than this is dropped unread (with a warning), bounding memory."""


class Step(Enum):
    """What feed() did with a line."""

    NOT_MINE = "not-mine"
    BUFFERED = "buffered"
    DONE = "done"
    DROPPED = "dropped"


class DocumentBuffer:
    """Collects the lines of one pretty-printed JSON document; hands back whole values."""

    def __init__(self, max_bytes: int = MAX_DOCUMENT_BYTES) -> None:
        """Start with no document open."""
        self.max_bytes = max_bytes
        self.value: object | None = None
        """The document's value after feed() returned DONE."""
        self._parts: list[bytes] = []
        self._size_bytes = 0
        self._open = False
        self._dropping = False

    @property
    def active(self) -> bool:
        """True while a document is open."""
        return self._open

    def feed(self, line: bytes) -> Step:
        """Take a line if it opens, continues or closes a document."""
        text = line.rstrip(b"\r\n\t ")
        if not self._open:
            if text in (b"{", b"["):
                self._open, self._dropping = True, False
                self._parts, self._size_bytes = [text], len(text)
                return Step.BUFFERED
            return Step.NOT_MINE
        if text in (b"{", b"["):  # a new document: the open one never closed
            self._parts, self._size_bytes, self._dropping = [text], len(text), False
            return Step.BUFFERED
        if text[:1] not in (b" ", b"\t", b"}", b"]", b""):
            return Step.NOT_MINE  # column 0 inside the document: not part of it
        if not self._dropping:
            self._size_bytes += len(text) + 1
            if self._size_bytes > self.max_bytes:
                self._dropping, self._parts = True, []
            else:
                self._parts.append(text)
        if text in (b"}", b"]"):
            return self._close()
        return Step.BUFFERED

    def _close(self) -> Step:
        """End the document at its closing line: its value, or DROPPED."""
        self._open = False
        if self._dropping:
            return Step.DROPPED
        raw = b"\n".join(self._parts)
        self._parts = []
        try:
            self.value = json.loads(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            return Step.DROPPED
        return Step.DONE
